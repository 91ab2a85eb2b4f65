"""Adapters that plug flashproof's kernels into other libraries (each imports its library lazily)."""
