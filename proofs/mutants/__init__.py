"""Negative-control mutants, one module per area; each mutant's one-line docstring names the
planted bug."""
