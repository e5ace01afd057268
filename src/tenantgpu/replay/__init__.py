"""Trace replay and capacity planning on GPU-sharing traces."""
