"""flashproof.kernels: production torch/Triton kernels (never imports flashproof.verified/proofs)."""
from .attention import AttnOut, BlockSparseMask, attention, scaled_dot_product_attention  # noqa: F401
from .sampler import SamplerUniforms, SpecSample, draw_uniforms, rejection_sample  # noqa: F401
