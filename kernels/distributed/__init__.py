"""flashproof.kernels.distributed: context-parallel (ring) attention over torch.distributed.

    from flashproof.kernels.distributed import ring_attention, shard, unshard, gather

``ring.py`` the autograd ring op, ``schedule.py`` the schedule as pure functions (the proof runs
them on z3 integers), ``merge.py`` the (out, lse) merge, ``p2p.py`` one hop of the ring,
``layout.py`` the contiguous / zigzag layouts. ``docs/distributed.md`` has the long form.
"""
from .layout import gather, shard, unshard  # noqa: F401
from .ring import ring_attention  # noqa: F401
from .schedule import LAYOUTS, ring_plan  # noqa: F401
