"""flashproof.bench: the product's own benchmarks (``flashproof bench``): attention against SDPA's backends
and FlexAttention (attention.py), the speculative sampler (sampler.py). CUDA only; tables, no raw logs in git."""
