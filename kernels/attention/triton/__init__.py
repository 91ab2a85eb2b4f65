"""The Triton attention kernels (forward, backward, δ, the block-sparse plan and the GQA partial sums) and
their host side. Importing the package applies the interpreter fixes (``kernels/interpreter.py``), so the
kernels compute under ``TRITON_INTERPRET=1`` what they compute on a GPU."""
from ...interpreter import interpreter_fixes

interpreter_fixes()
