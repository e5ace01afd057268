"""Allows `python -m tenantgpu`."""

from tenantgpu.cli import main

main()
