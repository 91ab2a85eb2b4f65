"""Reproducers: every deviation as a standalone script, and the ``flashproof repro FILE`` verb.

``write_scripts(deviations, target, folder)`` writes one script per deviation. A script holds
the kernel's reference (a built-in name, ``MODULE:FUNCTION`` or ``/abs/path.py:FUNCTION``), the
declared conventions, the dtype, the device and the ``ProblemSpec``; run as ``python FILE`` or
``flashproof repro FILE`` it rebuilds the inputs (``problem.build``, bit for bit), calls the kernel
through the same adapter, runs the same check against the oracle and prints got / expected /
bound. Its exit status is 1 while the kernel still deviates there, 0 once it does not (and 2 when
the kernel cannot be loaded: a target registered from a test has no reference to load).
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import runpy
import sys

__all__ = ["write_scripts", "script", "replay", "add_arguments", "run"]

_TEMPLATE = '''#!/usr/bin/env python3
"""flashproof reproducer (written by `flashproof fuzz`).

{line}

Run `python {name}` or `flashproof repro {name}`: it rebuilds the inputs, calls the kernel and
prints got / expected / bound; exit 1 while the kernel still deviates, 0 once it does not.
"""
from flashproof.fuzz.problem import ProblemSpec
from flashproof.fuzz.repro import replay

KERNEL = {kernel!r}
CONVENTIONS = {conventions!r}
SPEC = {spec}
DTYPE, DEVICE, CHECK, TENSOR = {dtype!r}, {device!r}, {check!r}, {tensor!r}

if __name__ == "__main__":
    raise SystemExit(replay(KERNEL, SPEC, dtype=DTYPE, device=DEVICE, check=CHECK, tensor=TENSOR,
                            conventions=CONVENTIONS))
'''


def _kernel_ref(target) -> str:
    from .user import absolute_ref, is_reference

    return absolute_ref(target.name) if is_reference(target.name) else target.name


def script(dev, target) -> str:
    """The source of ``dev``'s reproducer script (``dev`` a ``checks.Deviation`` of ``target``)."""
    conv = getattr(target, "conventions", None)
    line = dev.reproducer().replace('"""', "'''")
    return _TEMPLATE.format(line=line, name="THIS_FILE", kernel=_kernel_ref(target),
                            conventions={} if conv is None else dict(conv._asdict()), spec=repr(dev.spec),
                            dtype=dev.dtype, device=dev.device, check=dev.check, tensor=dev.tensor)


def write_scripts(deviations, target, folder: pathlib.Path) -> list:
    """Write one script per deviation under ``folder``; returns their paths."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for dev in deviations:
        text = script(dev, target)
        stem = "".join(ch if ch.isalnum() else "_" for ch in f"{target.name}_{dev.check}_{dev.tensor}_{dev.dtype}")
        path = folder / f"repro_{stem[-60:]}_{hashlib.sha1(text.encode()).hexdigest()[:8]}.py"
        path.write_text(text.replace("THIS_FILE", path.name))
        paths.append(path)
    return paths


def replay(kernel: str, spec, *, dtype: str, device: str, check: str, tensor: str = "-", conventions=None) -> int:
    """Rebuild ``spec``, run ``check`` ("forward", "gradients", "split", "determinism", or several
    joined by "+") of ``kernel`` and print what it finds; 1 if it deviates, 0 if not, 2 if the
    kernel cannot be loaded."""
    from .checks import examine
    from .errors import UsageError
    from .targets import Unsupported
    from .user import resolve

    try:
        target = resolve(kernel, **(conventions or {}))
    except UsageError as e:
        print(f"flashproof repro: {e}", file=sys.stderr)
        return 2
    checks = tuple(check.split("+"))
    try:
        ex = examine(target, spec, dtype, device, checks=checks)
    except Unsupported as e:
        print(f"the kernel no longer takes this problem: {e}")
        return 0
    print(f"[{target.name}] {spec.describe()} in {dtype} on {device}; oracle {ex.source}")
    for c, v in ex.verdicts:
        if tensor in ("-", v.name) or not v.ok:
            print(f"  {c}/{v.name}: {'ok' if v.ok else 'DEVIATES (' + v.reason + ')'}: max error {v.error:.6g}, "
                  f"bound {v.bound:.6g}" + ("" if v.ok else f"; at {list(v.first)}: got {v.got!r}, expected {v.expected!r}"))
    for d in ex.deviations:
        if d.reason in ("error", "bitwise"):
            print(f"  {d.check}/{d.tensor}: DEVIATES ({d.reason}): {d.note}")
    if ex.deviations:
        print("still deviates")
        return 1
    print("no deviation now")
    return 0


# ----------------------------------------------------------------------------------- the verb

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=pathlib.Path, help="a reproducer script written by `flashproof fuzz`")


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        print(f"flashproof repro: no such file: {args.file}", file=sys.stderr)
        return 2
    try:
        runpy.run_path(str(args.file), run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    return 0
