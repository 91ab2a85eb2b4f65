"""Obligations about tiled attention (merge, tiling, gradients, floating point, memory, worked
examples)."""
