"""Poison (NaN / ±inf / 1e30 in Q rows that read nothing, K/V rows nobody reads, and the head-dim
padding of the inputs) must not reach any gradient: the gradients check runs on poisoned problems,
our kernels pass it, and a dense backward that multiplies zero probabilities by the poison is caught."""
import pytest
import torch

from flashproof.fuzz import targets
from flashproof.fuzz.checks import examine
from flashproof.fuzz.oracle import masked_attention
from flashproof.fuzz.problem import ProblemSpec, build

SPECS = [
    ProblemSpec(heads_q=2, heads_kv=1, n_q=5, n_k=40, d=3, dv=2, mask_kind="late_keys", empty_rows=True,
                poison="nan", seed=3),
    ProblemSpec(n_q=4, n_k=20, d=2, dv=3, seqlens=((0, 7), (3, 0), (1, 13)), causal=True, poison="inf", seed=5),
    ProblemSpec(batch=2, n_q=6, n_k=33, d=4, dv=4, window=(3, 1), noncontig=True, poison="1e30", seed=8),
    ProblemSpec(n_q=9, n_k=17, d=2, dv=2, causal=True, mask_kind="single_key", poison="-inf", seed=2),
]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # as the CLI does on the CPU: the tensors are tiny


def _grad_verdicts(name, spec, dtype="fp32"):
    ex = examine(targets.get(name), spec, dtype, "cpu", checks=("forward", "gradients"))
    return ex, {v.name for c, v in ex.verdicts if c == "gradients"}


def test_poison_is_planted_in_q_k_v():
    p = build(SPECS[1])  # the (3, 0) sequence's rows read nothing, the (0, 7) one's keys are read by nobody
    assert p.q.isinf().any() and p.k.isinf().any() and p.v.isinf().any()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.poison)
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])  # fp16: 1e30 overflows to inf (found on the H200)
def test_torch_kernel_gradients_on_poisoned_problems(spec, dtype):
    ex, names = _grad_verdicts("torch", spec, dtype)
    assert names == {"dq", "dk", "dv"}  # compared, not skipped
    assert not ex.deviations, [d.reproducer() for d in ex.deviations]


@pytest.mark.parametrize("spec", SPECS[:2], ids=lambda s: s.poison)
def test_triton_kernel_gradients_on_poisoned_problems(spec):
    why = targets.get("triton").unavailable("cpu")
    if why is not None:
        pytest.skip(why)
    ex, names = _grad_verdicts("triton", spec)
    assert names == {"dq", "dk", "dv"}
    assert not ex.deviations, [d.reproducer() for d in ex.deviations]


def _leaky(c, det):
    """Forward clean (unread V rows zeroed, scores masked), backward leaky: dQ = dS K multiplies the
    zero dS of masked pairs by the poisoned K rows."""
    g = c.q.shape[1] // c.k.shape[1]
    k, v = c.k.repeat_interleave(g, 1), c.v.repeat_interleave(g, 1)
    v = v.masked_fill(~c.allowed.any(2)[..., None], 0.0)
    out, lse = masked_attention(c.q, k, v, c.allowed, c.scale)
    return targets.KernelOut(out, lse)


def test_a_backward_that_lets_poison_through_is_caught():
    targets.register(targets.get("torch")._replace(name="broken:leaky-backward", run=_leaky, deterministic=""))
    ex, names = _grad_verdicts("broken:leaky-backward", SPECS[0])
    grads = [d for d in ex.deviations if d.check == "gradients"]
    assert grads and grads[0].reason in ("nan", "non-finite"), [d.reproducer() for d in ex.deviations]
    assert not [d for d in ex.deviations if d.check == "forward"]  # its forward is clean
