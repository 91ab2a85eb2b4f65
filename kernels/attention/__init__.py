"""Attention: ``attention()`` (api.py), the one router (dispatch.py) and the kernels it routes to
(torch.py, triton/, gluon/); dropout's counter-based keep bits (dropout.py)."""
from .api import AttnOut, BlockSparseMask, attention  # noqa: F401
from .dropout import dropout_mask  # noqa: F401
