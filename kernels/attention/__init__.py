"""Attention: ``attention()`` (api.py), the one router (dispatch.py) and the kernels it routes to
(torch.py, triton/, gluon/)."""
from .api import AttnOut, BlockSparseMask, attention  # noqa: F401
