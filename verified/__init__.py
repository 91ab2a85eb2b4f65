"""flashproof.verified — the one pure-Python reference, generic over number systems.

It is the oracle for fuzzing kernels and the code that ``make prove`` runs symbolically.
"""
from .attention import (BOTTOM, Dropout, Gradients, Summary, TiledForward, block_ranges, dense_attention,
                        dense_attention_from_scores, merge, summarize, tiled_backward, tiled_forward,
                        tiled_forward_from_scores)
from .branching import BranchingNum, Uniform, canonical, emission_law
from .numbers import NumberSystem, available, register, resolve
from .speculative import (RULES, CycleUniforms, Rules, SpecStep, Step, accept_test, first_argmax, inverse_cdf,
                          rejection_step, residual, speculative_cycle, target_sample, verify)

__all__ = ["BOTTOM", "Dropout", "Gradients", "Summary", "TiledForward", "block_ranges", "dense_attention",
           "dense_attention_from_scores", "merge", "summarize", "tiled_backward", "tiled_forward",
           "tiled_forward_from_scores", "NumberSystem", "available", "register", "resolve",
           # speculative decoding
           "RULES", "CycleUniforms", "Rules", "SpecStep", "Step", "accept_test", "first_argmax", "inverse_cdf",
           "rejection_step", "residual", "speculative_cycle", "target_sample", "verify",
           "BranchingNum", "Uniform", "canonical", "emission_law"]
