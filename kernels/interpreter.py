"""The one place in ``flashproof.kernels`` that reads the environment: whether Triton runs its kernels
in the interpreter (``TRITON_INTERPRET=1``, CI and CPU runs). Triton itself decides that when it is
imported; the dispatchers read this function so that a CPU tensor is routed to a Triton kernel only
when the interpreter will really run it."""
from __future__ import annotations

import os


def interpreting() -> bool:
    """True when Triton kernels run on the CPU through the interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"
