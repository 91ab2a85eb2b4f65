"""flashproof.kernels: production torch/Triton kernels (never imports flashproof.verified/proofs)."""
from .attention import AttnOut, BlockSparseMask, attention  # noqa: F401
