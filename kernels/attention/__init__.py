"""Attention: ``attention()`` (api.py), its SDPA-compatible front (sdpa.py), the custom ops that
compile and export see (op.py), the one router (dispatch.py) and the kernels it routes to
(torch.py, triton/, gluon/); dropout's counter-based keep bits (dropout.py)."""
from .api import AttnOut, BlockSparseMask, attention  # noqa: F401
from . import op  # noqa: F401  (registers the flashproof:: custom ops)
from .dropout import dropout_mask  # noqa: F401
from .sdpa import scaled_dot_product_attention  # noqa: F401
