"""Settings for the whole suite."""

import os

# Every stored object a write replaces is checked against the JSON it was stored with: the server shares
# its objects with in-process readers, which must never change them (tenantgpu/inprocesswatch.py). The
# labs the end-to-end tests start inherit it.
os.environ.setdefault("TENANTGPU_VERIFY_STORED", "1")
