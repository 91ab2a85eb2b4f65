"""Obligations about speculative decoding (the sampler's step and cycle laws, tokens per cycle)."""
