"""Number systems used only by proofs (z3 reals, z3 floating point, log domain, base 2, counting);
each implements the ``flashproof.verified.numbers`` protocol."""
