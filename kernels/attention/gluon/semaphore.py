"""Global-memory semaphores that put the Gluon backward's dQ reduce-adds in a fixed order
(``deterministic=True``; ``bwd.py``'s deterministic dQ writer). Gluon 3.6 has no acquire/release
loads and stores nor a wait for a bulk copy's *completion* (``tma.store_wait`` waits for its reads
only), so both helpers are inline PTX, run by all 32 lanes of the writer warp (scalar operands):

* ``acquire_wait(ptr, value)``: spin on ``ld.acquire.gpu`` until ``*ptr == value``, then a proxy fence
  (``fence.proxy.async.global``) so the TMA reduce-add issued next (async proxy) is ordered after the
  acquire (generic proxy), hence after the adds the previous writer released.
* ``complete_release(ptr)``: wait until this thread's bulk groups have completed, writes included
  (``cp.async.bulk.wait_group 0``, no ``.read``), proxy fence, ``bar.warp.sync`` (the reduce-add was
  issued by one elected lane), then lane 0 adds 1 to ``*ptr`` with ``red.release.gpu``.

A semaphore counts the reduce-adds done into one dQ tile; the writer whose turn is ``value`` waits
for it, adds, and releases. Forward progress needs every writer waited on to be resident or done:
the launch order ensures it (``bwd.py``).
"""
from __future__ import annotations

from .common import AVAILABLE, jit as _jit

if AVAILABLE:
    from triton.experimental.gluon import language as gl


@_jit
def acquire_wait(ptr, value):
    """Spin until the int32 at ``ptr`` (global) equals ``value`` (acquire, gpu scope); returns it."""
    return gl.inline_asm_elementwise(
        "{\n.reg .pred p;\nsem_spin:\nld.acquire.gpu.global.b32 $0, [$1];\nsetp.ne.s32 p, $0, $2;\n"
        "@p bra sem_spin;\n}\nfence.proxy.async.global;",
        "=r,l,r", [ptr, value], dtype=gl.int32, is_pure=False, pack=1)


@_jit
def complete_release(ptr):
    """This thread's bulk async groups complete (writes visible), then lane 0: ``*ptr += 1`` (release,
    gpu scope). Returns a dummy 0 (inline asm needs an output)."""
    return gl.inline_asm_elementwise(
        "cp.async.bulk.wait_group 0;\nfence.proxy.async.global;\nbar.warp.sync -1;\n"
        "{\n.reg .u32 l;\n.reg .pred p;\nmov.u32 l, %laneid;\nsetp.eq.u32 p, l, 0;\n"
        "@p red.release.gpu.global.add.s32 [$1], 1;\n}\nmov.b32 $0, 0;",
        "=r,l", [ptr], dtype=gl.int32, is_pure=False, pack=1)
