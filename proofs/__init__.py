"""flashproof.proofs: obligations that run ``flashproof.verified`` on proof-only number systems.

Rooms (one idea each): ``engine`` (the obligation API, discovery, runner, cache, trail, status and
``flashproof prove``), ``obligations`` (every module under it registers obligations; nothing else
lives there), ``numbers`` (number systems used only by proofs), ``mutants`` (the planted bugs the
negative controls patch in), ``support`` (inputs and checks shared by several obligation modules),
``ledger`` (the seed claims' recomputations and verdict rule) and ``audit`` (the report).
"""
