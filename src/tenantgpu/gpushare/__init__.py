"""HAMi's GPU-sharing semantics as a pure library: requests, codecs, fit, scoring, quota. No I/O."""
