"""Run a flashproof command counting every plan the dispatcher makes, to see which kernels a fuzz
campaign reached:

    ROUTES_JSON=routes.json python lab/fuzz_routes.py fuzz --kernel triton-atomic --profile gluon-sparse ...

Each key is "forward route/backward route/mask kind" ("-" for the backward when no gradient follows, as
in the split check's key partitions; mask kind "tiles" = a BlockSparseMask, "dense-mask", "no-mask"),
each value the number of calls; written to $ROUTES_JSON at exit. Counts the plans of the process it
runs in (a campaign's timed part; its warm-phase workers are other processes)."""
import atexit, collections, json, os, sys
from flashproof.kernels.attention import op
from flashproof import cli

counts = collections.Counter()
_orig = op.plan

def plan(prob, device):
    r = _orig(prob, device)
    kind = "tiles" if prob.tiles is not None else ("dense-mask" if prob.mask is not None else "no-mask")
    counts[f"{r.forward}/{r.backward if prob.requires_grad else '-'}/{kind}"] += 1
    return r

op.plan = plan
atexit.register(lambda: json.dump(dict(counts), open(os.environ["ROUTES_JSON"], "w"), indent=1))
sys.exit(cli.main(sys.argv[1:]))
