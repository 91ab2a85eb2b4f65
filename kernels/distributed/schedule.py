"""The ring schedule as pure functions of (world, rank, step): which key/value chunk a rank holds at
each step and how each (query chunk, key chunk) block is treated. No torch, no communication.

The sequence of length N is cut into C equal chunks (C = W contiguous, C = 2W zigzag); rank r holds
``slots(layout)`` of them (``chunk_of``). At step s = 0 … W − 1, rank r holds the key/value shard
that rank ``source_rank(r, s, W) = (r − s) mod W`` started with (each step passes shards to r + 1).
For every query slot a and key slot b the block (chunk_of(r, a), chunk_of(src, b)) is

    SKIP  no query of the block may read any key of it (causal, key chunk after query chunk),
    DIAG  the chunks coincide: the block is causal inside (equal lengths, so j ≤ i locally),
    FULL  every pair is allowed (non-causal, or key chunk before query chunk).

Every function here computes with ``+ − %`` and ``where(cond, a, b)`` only, so the proof
(``flashproof.proofs.obligations.attention.ring``) runs these very functions on z3 integers for a
symbolic world size, rank and step; ``where`` defaults to Python's conditional for plain ints.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["LAYOUTS", "SKIP", "DIAG", "FULL", "Block", "Step", "slots", "num_chunks", "chunk_of", "owner_of",
           "source_rank", "block_kind", "runs", "local_causal", "step_blocks", "ring_plan"]

LAYOUTS = ("contiguous", "zigzag")
SKIP, DIAG, FULL = 0, 1, 2


def _where(cond, a, b):
    return a if cond else b


def _check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def slots(layout: str) -> int:
    """How many sequence chunks one rank holds: 1 (contiguous) or 2 (zigzag)."""
    _check_layout(layout)
    return 1 if layout == "contiguous" else 2


def num_chunks(world, layout: str):
    """C: the number of equal chunks the sequence is cut into."""
    return world * slots(layout)


def chunk_of(rank, slot: int, world, layout: str):
    """The global chunk index that ``rank`` holds in ``slot`` (contiguous: r; zigzag: r, 2W − 1 − r)."""
    _check_layout(layout)
    if layout == "contiguous" or slot == 0:
        return rank
    return 2 * world - 1 - rank


def owner_of(chunk, world, layout: str, *, where=_where) -> tuple:
    """(rank, slot) holding global ``chunk``: the inverse of ``chunk_of``."""
    _check_layout(layout)
    if layout == "contiguous":
        return chunk, 0
    head = chunk < world
    return where(head, chunk, 2 * world - 1 - chunk), where(head, 0, 1)


def source_rank(rank, step, world):
    """Whose key/value shard ``rank`` holds at ``step``: the ring passes shards from r to r + 1."""
    return (rank - step) % world


def block_kind(q_chunk, k_chunk, causal: bool, *, where=_where):
    """SKIP, DIAG or FULL for the block of query chunk ``q_chunk`` and key chunk ``k_chunk``."""
    if not causal:
        return FULL
    return where(k_chunk < q_chunk, FULL, where(k_chunk == q_chunk, DIAG, SKIP))


def runs(kind):
    """Whether a block of ``kind`` gets a local attention call (every kind but SKIP)."""
    return kind != SKIP


def local_causal(kind):
    """The ``causal`` flag of the block's local call: only DIAG blocks (n × n, so j ≤ i locally)."""
    return kind == DIAG


class Block(NamedTuple):
    """One local attention call: query slot, key slot, and its kind (SKIP / DIAG / FULL)."""

    q_slot: int
    k_slot: int
    kind: object


class Step(NamedTuple):
    """Step ``step`` of the ring on one rank: the shard of ``source`` is present; ``blocks`` lists
    every (query slot, key slot) pair with its kind (SKIP blocks included)."""

    step: object
    source: object
    blocks: tuple


def step_blocks(world, rank, step, layout: str, causal: bool, *, where=_where) -> Step:
    """The blocks rank ``rank`` treats at ``step``: every (query slot, key slot) pair."""
    src = source_rank(rank, step, world)
    n = slots(layout)
    blocks = tuple(Block(a, b, block_kind(chunk_of(rank, a, world, layout), chunk_of(src, b, world, layout),
                                          causal, where=where))
                   for a in range(n) for b in range(n))
    return Step(step, src, blocks)


def ring_plan(world: int, rank: int, layout: str, causal: bool) -> tuple:
    """The whole schedule of one rank with concrete ints: ``world`` Steps, SKIP blocks dropped."""
    for name, x in (("world", world), ("rank", rank)):
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"{name} must be an int, got {type(x).__name__}")
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"need world >= 1 and 0 <= rank < world, got world={world}, rank={rank}")
    plan = []
    for s in range(world):
        st = step_blocks(world, rank, s, layout, causal)
        plan.append(st._replace(blocks=tuple(b for b in st.blocks if runs(b.kind))))
    return tuple(plan)
