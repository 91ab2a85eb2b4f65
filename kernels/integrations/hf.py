"""A Hugging Face ``transformers`` attention backend on flashproof's kernels.

    from flashproof.kernels.integrations.hf import register
    register()                                   # name "fproof"
    model = AutoModelForCausalLM.from_config(config, attn_implementation="fproof")
    # or: model.set_attn_implementation("fproof")

``register(name)`` adds ``attention_forward`` to transformers' ``AttentionInterface`` and, so that
the model builds the same masks as for its ``sdpa`` backend (a boolean (B, 1, Nq, Nk) mask, or None
where ``is_causal`` says it all), transformers' ``sdpa_mask`` to its ``AttentionMaskInterface``
under the same name. transformers is imported by ``register`` only (it is not a dependency of
flashproof).

``attention_forward`` follows the decisions transformers' ``sdpa`` backend makes — causal only for a
decoder layer with more than one query and no explicit mask (SDPA's top-left ``is_causal``) — and calls
``flashproof.kernels.scaled_dot_product_attention`` with ``enable_gqa`` (no ``repeat_kv`` copy). Query
rows with no allowed key (left padding) come back as zeros where SDPA gives NaN or garbage; a model
never reads those rows' outputs for real tokens.
"""
from __future__ import annotations

import torch

from ..attention.sdpa import scaled_dot_product_attention

__all__ = ["NAME", "attention_forward", "register"]

#: not "flashproof": transformers takes any implementation name containing "flash" for a request of a
#: FlashAttention kernel (``is_flash_attention_requested``) and goes looking for one
NAME = "fproof"


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                      is_causal: bool | None = None, **kwargs):
    """transformers' attention-function signature: query (B, Hq, Nq, D), key/value (B, Hkv, Nk, ·),
    attention_mask bool or float (B|1, 1|Hq, Nq, Nk) or None -> (out (B, Nq, Hq, Dv), None)."""
    if kwargs.get("softcap") is not None:
        raise ValueError("the flashproof attention backend does not take softcap (logit soft-capping)")
    if kwargs.get("position_bias") is not None:
        raise ValueError("the flashproof attention backend does not take position_bias; pass it folded into "
                         "a float attention_mask")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = query.shape[2] > 1 and attention_mask is None and causal
    out = scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                       scale=scaling, is_causal=bool(causal), enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2).contiguous(), None


def register(name: str = NAME) -> str:
    """Register the backend (and transformers' SDPA mask builder) under ``name``; returns ``name``."""
    if "flash" in name:
        raise ValueError(f"backend name {name!r} contains 'flash': transformers would treat it as a FlashAttention "
                         "kernel request; choose another name")
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError as e:  # pragma: no cover — exercised only without transformers
        raise ImportError("flashproof.kernels.integrations.hf needs transformers >= 5 "
                          "(pip install 'transformers>=5,<6')") from e
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name
