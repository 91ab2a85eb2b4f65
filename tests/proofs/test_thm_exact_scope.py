"""THM-EXACT reads "every n" (issue 15): which proof obligations carry it, that each is registered
unbounded, that the bounded runs are cross-checks, and that the symbolic-loop proofs behind the
change prove the reference and refute their controls in-process."""
from __future__ import annotations

import pytest

from flashproof.proofs.engine import core, status
from flashproof.proofs.engine.core import Context
from flashproof.proofs.engine.discover import collect
from flashproof.spec.registry import collect as collect_items

#: the proofs of THM-EXACT and of the items it uses (DEF-SUMMARY, ALG-TILED), each for every size
PROOFS = {"ATT-MERGE-IDENTITY", "ATT-MERGE-UNION", "ATT-SUMMARIZE-ANY-B", "ATT-TILED-STEP", "ATT-TILED-BASE-FINAL",
          "ATT-PARTITION", "ATT-GRAD-SCHEDULE", "ATT-GRAD-SOFTMAX", "ATT-GRAD-CHAIN"}
CROSS = {"ATT-SUMMARIZE-BLOCK", "ATT-TILED-BOUNDED", "ATT-TILED-MASKS", "ATT-GRAD", "ATT-GRAD-ROUTING"}


@pytest.fixture(scope="module")
def registry():
    obs, errs = collect()
    assert not errs
    return obs, collect_items()


def test_thm_exact_derives_unbounded(registry):
    obs, items = registry
    sc = status.derive_scope(items, obs)["THM-EXACT"]
    assert (sc.scope, sc.bounded_by, sc.with_uses, tuple(sc.bounded_via)) == ("unbounded", (), "unbounded", ())
    carried = {o for iid in ("THM-EXACT", "DEF-SUMMARY", "ALG-TILED") for o in items[iid].checked_by}
    assert {o for o in carried if obs[o].role == "proof"} == PROOFS
    assert {o for o in carried if obs[o].role == "cross-check"} == CROSS
    assert all(obs[o].scope == "unbounded" for o in PROOFS)
    assert all(obs[o].scope == "bounded" for o in CROSS)


def test_bounded_proof_would_make_it_bounded(registry):
    """The derivation is not vacuous: one of the carrying proofs registered bounded flips the theorem."""
    obs, items = registry
    planted = dict(obs, **{"ATT-PARTITION": obs["ATT-PARTITION"]._replace(scope="bounded", why_unbounded="")})
    sc = status.derive_scope(items, planted)["THM-EXACT"]
    assert sc.scope == "bounded" and sc.bounded_by == ("ATT-PARTITION",)
    planted = dict(obs, **{"ATT-SUMMARIZE-ANY-B": obs["ATT-SUMMARIZE-ANY-B"]._replace(scope="bounded", why_unbounded="")})
    sc = status.derive_scope(items, planted)["THM-EXACT"]
    assert sc.with_uses == "bounded" and "ATT-SUMMARIZE-ANY-B" in sc.bounded_via


CASES = [("ATT-PARTITION", "proved"), ("ATT-PARTITION/block-off-by-one", "refuted"),
         ("ATT-PARTITION/step-b-plus-one", "refuted"),
         ("ATT-SUMMARIZE-ANY-B", "proved"), ("ATT-SUMMARIZE-ANY-B/skips-last-key", "refuted"),
         ("ATT-SUMMARIZE-ANY-B/max-ignores-mask", "refuted"), ("ATT-SUMMARIZE-ANY-B/sum-no-weight", "refuted"),
         ("ATT-GRAD-SCHEDULE", "proved"), ("ATT-GRAD-SCHEDULE/keys-up-to-nq", "refuted"),
         ("ATT-GRAD-SCHEDULE/dk-nq-rows", "refuted"), ("ATT-GRAD-SCHEDULE/drive-swaps-pair", "refuted")]


@pytest.mark.parametrize("oid, want", CASES)
def test_symbolic_loop_proofs_and_controls(registry, oid, want):
    obs, _ = registry
    ob = obs[oid]
    out = ob.fn(Context(dict(ob.bounds), 20000, False))
    assert out.status == want, out
    if want == "refuted":
        assert out.counterexample
