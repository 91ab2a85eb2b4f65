"""flashproof.kernels: production torch/Triton kernels (never imports flashproof.verified/proofs).

In a checkout, this folder is also reachable as a top-level ``kernels`` package when the checkout's
root is on ``sys.path`` (``python -m pytest`` from the root puts it there) — the import name of Hugging
Face's unrelated ``kernels`` distribution, which transformers imports to read its version. Imported
under that name the package defines nothing: importing the attention modules a second time would
register the ``flashproof::`` custom ops twice (which corrupts torch's dispatcher state)."""
if __name__ == "flashproof.kernels":
    from .attention import AttnOut, BlockSparseMask, attention, scaled_dot_product_attention  # noqa: F401
    from .sampler import SamplerUniforms, SpecSample, draw_uniforms, rejection_sample  # noqa: F401
    from .kvcache import KVCacheOut, attention_with_kvcache  # noqa: F401
