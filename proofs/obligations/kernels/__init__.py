"""Obligations about the production Triton kernels' index logic (items KER-* in spec/kernels.py): the
kernels' own integer functions run on z3 integers through ``proofs/support/kernel_exec.py``."""
