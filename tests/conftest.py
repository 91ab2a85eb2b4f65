import os

from hypothesis import HealthCheck, settings

# Triton kernels run on the CPU through the interpreter; set before any triton import.
os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deep", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
