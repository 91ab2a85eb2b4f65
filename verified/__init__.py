"""flashproof.verified — the one pure-Python reference, generic over number systems.

It is the oracle for fuzzing kernels and the code that ``make prove`` runs symbolically.
"""
from .attention import (BOTTOM, Gradients, Summary, TiledForward, block_ranges, dense_attention,
                        dense_attention_from_scores, merge, summarize, tiled_backward, tiled_forward,
                        tiled_forward_from_scores)
from .numbers import NumberSystem, available, register, resolve

__all__ = ["BOTTOM", "Gradients", "Summary", "TiledForward", "block_ranges", "dense_attention",
           "dense_attention_from_scores", "merge", "summarize", "tiled_backward", "tiled_forward",
           "tiled_forward_from_scores", "NumberSystem", "available", "register", "resolve"]
