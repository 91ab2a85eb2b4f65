"""A user's sampler with a planted bug: it ignores the uniforms it is handed and uses u = 0.5 for
every accept test (the class of a hard-coded uniform)."""
import torch

from flashproof.kernels.sampler import SamplerUniforms, rejection_sample


def sample(draft_token_ids, p_draft, p_target, p_bonus, *, num_draft_tokens=None, uniforms=None, generator=None):
    """The rejection_sample contract; the accept uniforms replaced by 0.5."""
    u = SamplerUniforms(torch.full_like(uniforms.accept, 0.5), uniforms.residual, uniforms.bonus)
    return rejection_sample(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens=num_draft_tokens,
                            uniforms=u, backend="torch")
