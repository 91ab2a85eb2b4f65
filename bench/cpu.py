"""``flashproof bench-cpu`` (or ``python -m flashproof.bench.cpu``): the torch path on the CPU against
torch's own SDPA on the CPU, forward and backward, dense and causal; prints a table.

Default problem: B = 1, H = 8, N = 1024, D = 64, float32 (the shape of the 1.5× target). Each
measurement alternates the two providers for ``--reps`` rounds and reports each one's fastest round
(the figure least disturbed by other processes on a shared machine) and its median round (what a
call typically takes there: under load the two part, and the median says how much). The backward is
timed alone: the forward of each round runs untimed, then ``torch.autograd.grad``. Before timing, our
output is compared with SDPA's (max |diff|, printed for the reader; correctness is the tests' job).

``--threads 1 2`` (the default) measures at each thread count in turn (``torch.set_num_threads``) and
prints one table per count. Each table's title states the machine's load average (1 min) before and
after it was measured and the CPU count: on a shared machine other processes take cores from a
multi-threaded run, and a figure measured under load says so.

``--busy N`` measures the loaded case on purpose: N processes that spin (``while True: pass``, at
niceness ``--busy-nice``) run beside the measurement, started before the first table and stopped (by
their process ids) after the last; the titles say so. A CPU op that waits at its barrier for a thread
such a process has taken off its core is what this case shows.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from typing import NamedTuple

import torch
import torch.nn.functional as F

PROVIDERS = ("ours", "sdpa")


def _call(provider, q, k, v, causal):
    if provider == "ours":
        from flashproof.kernels import attention

        return attention(q, k, v, causal=causal, backend="torch")
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _time_forward(provider, q, k, v, causal):
    with torch.no_grad():
        t0 = time.perf_counter()
        _call(provider, q, k, v, causal)
        return time.perf_counter() - t0


def _time_backward(provider, q, k, v, causal, dout):
    out = _call(provider, q, k, v, causal)
    t0 = time.perf_counter()
    torch.autograd.grad(out, (q, k, v), dout)
    return time.perf_counter() - t0


class Row(NamedTuple):
    """One measurement: ``best`` and ``median`` {provider: seconds} over the rounds; ``err`` max |ours − sdpa|."""

    causal: bool
    direction: str
    best: dict
    median: dict
    err: float


def measure(B=1, H=8, N=1024, D=64, reps=5, dtype=torch.float32):
    """[Row] for the problem given: dense and causal, forward and backward."""
    g = torch.Generator().manual_seed(0)
    q, k, v, dout = (torch.randn(B, H, N, D, generator=g, dtype=dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()
    rows = []
    for causal in (False, True):
        with torch.no_grad():
            err = (_call("ours", q, k, v, causal) - _call("sdpa", q, k, v, causal)).abs().max().item()
        for direction, timer in (("forward", _time_forward), ("backward", _time_backward)):
            args = (q, k, v, causal) if direction == "forward" else (q, k, v, causal, dout)
            for p in PROVIDERS:  # warm-up
                timer(p, *args)
            times = {p: [] for p in PROVIDERS}
            for _ in range(reps):
                for p in PROVIDERS:
                    times[p].append(timer(p, *args))
            rows.append(Row(causal, direction, {p: min(t) for p, t in times.items()},
                            {p: statistics.median(t) for p, t in times.items()}, err))
    return rows


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:  # pragma: no cover - no load average on this platform
        return "?"


@contextlib.contextmanager
def busy(n: int, nice: int):
    """n spinning Python processes at niceness ``nice`` for the duration of the block (none for n = 0),
    stopped by their ids when it ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              preexec_fn=(lambda: os.nice(nice)) if nice else None) for _ in range(n)]
    try:
        if procs:
            time.sleep(0.5)  # let them reach their loops
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def table(rows, shape, load=("?", "?"), busy_note="") -> str:
    B, H, N, D = shape
    lines = [f"CPU, B={B} H={H} N={N} D={D} float32, torch {torch.__version__}, {torch.get_num_threads()} threads "
             f"of {os.cpu_count()} CPUs, load average {load[0]} before / {load[1]} after{busy_note} "
             "(ms: the fastest round, then the median round)",
             "| causal | direction | ours | SDPA | ours / SDPA | ours median | SDPA median | median ratio | max abs diff |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, m = r.best, r.median
        lines.append(f"| {'yes' if r.causal else 'no'} | {r.direction} | {b['ours'] * 1e3:.1f} | {b['sdpa'] * 1e3:.1f} | "
                     f"{b['ours'] / b['sdpa']:.2f} | {m['ours'] * 1e3:.1f} | {m['sdpa'] * 1e3:.1f} | "
                     f"{m['ours'] / m['sdpa']:.2f} | {r.err:.2e} |")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    for name, default in (("--batch", 1), ("--heads", 8), ("--seqlen", 1024), ("--head-dim", 64), ("--reps", 5)):
        p.add_argument(name, type=int, default=default)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                   help="thread counts to measure, one table each (torch.set_num_threads; default: 1 2)")
    p.add_argument("--busy", type=int, default=0,
                   help="spinning processes to run beside the measurement, the loaded case (default 0)")
    p.add_argument("--busy-nice", type=int, default=0, help="their niceness, 0..19 (default 0)")


def run(args) -> int:
    for name in ("batch", "heads", "seqlen", "head_dim", "reps"):
        if getattr(args, name) < 1:
            print(f"bench-cpu: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
            return 2
    bad = [t for t in args.threads if t < 1]
    if bad:
        print(f"bench-cpu: --threads must be >= 1, got {bad[0]}")
        return 2
    if args.busy < 0 or not 0 <= args.busy_nice <= 19:
        print(f"bench-cpu: --busy must be >= 0 and --busy-nice in 0..19, got {args.busy} and {args.busy_nice}")
        return 2
    shape = (args.batch, args.heads, args.seqlen, args.head_dim)
    note = f", beside {args.busy} spinning processes at nice {args.busy_nice}" if args.busy else ""
    with busy(args.busy, args.busy_nice):
        for i, threads in enumerate(args.threads):
            torch.set_num_threads(threads)
            before = _load()
            rows = measure(*shape, reps=args.reps)
            print(("\n" if i else "") + table(rows, shape, (before, _load()), note), flush=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
