"""The speculative rejection sampler: ``rejection_sample()`` (api.py) over a torch path (torch.py) and a
Triton path (triton.py)."""
from .api import SamplerUniforms, SpecSample, draw_uniforms, rejection_sample  # noqa: F401
