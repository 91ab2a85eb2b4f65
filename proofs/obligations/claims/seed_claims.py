"""The seed claims as obligations: for every recomputable claim of ``flashproof.spec.seed_claims``

* the obligation ``RECOMPUTE-<id>``: the recomputation's verdict must match the claim's ``expect``
  (``holds`` → confirmed; ``fails`` → an erratum the recomputation refutes);
* its negative control ``RECOMPUTE-<id>/perturbed``: the same check on a planted error (see
  ``flashproof.proofs.ledger.verdict.check_claim``), which must come out refuted.
"""
from __future__ import annotations

from flashproof.proofs.engine.core import control, obligation
from flashproof.proofs.ledger.recompute import BUGS, RECOMPUTE
from flashproof.proofs.ledger.verdict import check_claim
from flashproof.spec import seed_claims as spec


def _register() -> None:
    for c in spec.CLAIMS:
        if not spec.recomputable(c) or c.id not in RECOMPUTE:
            continue  # a missing function is reported by missing_recomputations()
        oid = spec.obligation_id(c.id)

        def ob(ctx, _id=c.id):
            return check_claim(_id)

        def ctl(ctx, _id=c.id):
            return check_claim(_id, as_control=True)

        ob.__doc__ = f"Recompute seed claim {c.id}: {c.topic}\n\n{c.method}"
        ob.__qualname__ = f"claim_{c.id}"
        ctl.__qualname__ = f"claim_{c.id}_control"
        obligation(oid, checks=[c.id], bounds={}, solver="exact", scope="unbounded" if c.check == "value" else "bounded")(ob)
        bug = BUGS.get(c.id) or ("the stated figure replaced by the correctly rounded value (the erratum removed)"
                                 if c.expect == "fails" else "the first stated figure moved by two units in its last digit")
        control(f"{oid}/perturbed", of=oid, bug=bug)(ctl)


_register()
