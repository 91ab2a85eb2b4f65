"""flashproof: proofs, a verified oracle and fuzzed kernels for exact tiled attention and
speculative decoding.

Sub-packages (each a top-level folder of the repository):

* ``flashproof.spec``     — the theorem-page items and the obligations that check them (data).
* ``flashproof.verified`` — the one pure-Python reference, generic over number systems.
* ``flashproof.proofs``   — obligations that run ``verified`` on symbolic number systems.
* ``flashproof.kernels``  — production torch / Triton code (never imports ``verified``/``proofs``).
"""
__version__ = "0.1.0"
