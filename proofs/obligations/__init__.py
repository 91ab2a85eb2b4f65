"""Obligation modules, by area. Every module below this package is imported by
``flashproof.proofs.engine.discover`` and must register at least one obligation; helpers shared by
obligations live in ``flashproof.proofs.support``, number systems in ``flashproof.proofs.numbers``."""
