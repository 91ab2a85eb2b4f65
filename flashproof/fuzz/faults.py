"""Device faults: a CUDA error raised by the kernel's own work, attributed to the kernel.

CUDA reports a device-side fault (an illegal address, a misaligned access, a device-side assert)
asynchronously: at whichever later API call waits on the stream, which without care is one of the
harness's own copies (``x.to(device)`` of the next example) and reads as a failure of the harness.
``checks._call`` therefore waits for the device right after every call into the kernel
(``synchronize``), so a fault surfaces inside that call and is the kernel's finding.

After such a fault the process's CUDA context is unusable (these errors are sticky: every later
call fails), so nothing more can run in it: the campaign records the example as a deviation
(reason ``error``, ``Deviation.device_fault``), stops there, and shrinks the example in fresh
processes (``fresh.py``: each candidate examined in a new process, as many at once as there are
workers; the simplest that still faults is reported) when the kernel can be loaded in one (a
built-in name or a ``MODULE:FUNCTION`` / ``PATH.py:FUNCTION`` reference), else reports it
unshrunk; its reproducer replays it in a fresh process. Which CUDA errors are sticky is
not decided here: every device fault ends the campaign (a non-sticky one would be stopped on needlessly,
never hidden).
"""
from __future__ import annotations

import torch

__all__ = ["is_device_fault", "synchronize", "FAULT_NOTE"]

#: torch >= 2.8 raises ``torch.AcceleratorError`` for CUDA runtime errors (a RuntimeError subclass);
#: earlier releases raised a plain RuntimeError whose message starts "CUDA error:".
_ACCELERATOR_ERROR = getattr(torch, "AcceleratorError", None)

#: what the summary and each device-fault deviation say about the stop
FAULT_NOTE = ("device fault: the CUDA context is unusable after it, so the campaign stopped here; the example "
              "is not shrunk in this process (its candidates run in fresh processes, where the kernel loads); "
              "the reproducer script replays it in a fresh process")


def is_device_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA runtime error (a device-side fault reported by the driver), as
    opposed to a Python-level error of the kernel (a bad shape, a ValueError it raised)."""
    if _ACCELERATOR_ERROR is not None and isinstance(exc, _ACCELERATOR_ERROR):
        return True
    return isinstance(exc, RuntimeError) and str(exc).lstrip().startswith("CUDA error")


def synchronize(device: str) -> None:
    """Wait for ``device``'s work (CUDA); a no-op on the CPU. A fault of work queued before it
    is raised here."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
