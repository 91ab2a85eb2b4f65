"""Obligations that recompute the seed claims of ``flashproof.spec.seed_claims``."""
