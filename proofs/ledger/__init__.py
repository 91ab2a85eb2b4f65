"""The claims ledger: one recomputation per seed claim (``recompute``) and the verdict rule
(``verdict``)."""
