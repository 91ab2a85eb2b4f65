import os

from hypothesis import HealthCheck, settings

# Without a GPU, Triton kernels run on the CPU through the interpreter (set before any triton
# import). On a CUDA machine the compiled kernels run: `-m gpu` tests must exercise real code.
try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("TRITON_INTERPRET") == "1":
    from flashproof.fuzz.interpreter_shim import apply as apply_interpreter_shims

    apply_interpreter_shims()

# "ci" (the default, make test): the same draws on every run (derandomize), so a CI verdict reproduces
# on any machine; "deep" (HYPOTHESIS_PROFILE=deep): random draws, many more, to find new examples
# (a failure found there becomes an explicit @example)
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
