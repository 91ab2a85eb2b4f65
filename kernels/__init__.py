"""flashproof.kernels: production torch/Triton kernels (never imports flashproof.verified/proofs)."""
from .attention import AttnOut, BlockSparseMask, attention  # noqa: F401
from .sampler import SamplerUniforms, SpecSample, draw_uniforms, rejection_sample  # noqa: F401
from .kvcache import KVCacheOut, attention_with_kvcache  # noqa: F401
