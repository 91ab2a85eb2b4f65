"""The ``flashproof`` command. Each verb lives in its own module and is loaded on demand:

* ``prove``  — ``flashproof.proofs.engine.cli``  (discharge the obligations, write the audit JSON)
* ``audit``  — ``flashproof.proofs.audit.cli``   (the browsable report)
* ``fuzz``   — ``flashproof.fuzz.cli`` (differential fuzzing of a kernel or sampler against the oracle)
* ``repro``  — ``flashproof.fuzz.repro`` (run a reproducer script written by ``fuzz``)
* ``fuzz-bench`` — ``flashproof.fuzz.bench`` (complete fuzzing examples per minute; for a GPU)
* ``bench``  — ``flashproof.bench.attention`` (timings against the anchors; needs a GPU)
* ``bench-cpu`` — ``flashproof.bench.cpu`` (the torch path against torch's SDPA on the CPU)

A verb module provides ``add_arguments(parser)`` and ``run(args) -> int``.
"""
from __future__ import annotations

import argparse
import importlib
import sys

VERBS = {
    "prove": ("flashproof.proofs.engine.cli", "discharge the proof obligations and write the audit trail"),
    "audit": ("flashproof.proofs.audit.cli", "write the browsable audit report (HTML, Markdown, JSON)"),
    "fuzz": ("flashproof.fuzz.cli", "differential fuzzing of an attention kernel or sampler against the oracle"),
    "repro": ("flashproof.fuzz.repro", "run a reproducer script written by `flashproof fuzz`"),
    "fuzz-bench": ("flashproof.fuzz.bench", "complete fuzzing examples per minute (ours, SDPA flash; GPU)"),
    "bench": ("flashproof.bench.attention", "time the kernels against SDPA/cuDNN/FlexAttention (GPU)"),
    "bench-cpu": ("flashproof.bench.cpu", "time the torch path against torch's SDPA on the CPU (a table)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="flashproof", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    # Parse the verb first so that only its module is imported (z3/torch are slow to load).
    verb = next((a for a in argv if not a.startswith("-")), None)
    for name, (_, help_) in VERBS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name == verb:
            mod = _load(name)
            if mod is not None:
                mod.add_arguments(p)
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help()
        return 2
    mod = _load(args.verb)
    if mod is None:
        print(f"flashproof {args.verb}: not available in this build", file=sys.stderr)
        return 2
    return int(mod.run(args) or 0)


def _load(verb: str):
    try:
        return importlib.import_module(VERBS[verb][0])
    except ModuleNotFoundError as e:
        if e.name == VERBS[verb][0]:
            return None
        raise


if __name__ == "__main__":
    raise SystemExit(main())
