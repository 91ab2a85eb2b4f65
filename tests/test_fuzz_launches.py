"""Compile-aware campaigns (flashproof/fuzz/launches.py, warm.py): a campaign draws only from its
few launch specialisations, which together switch on every family the kernel takes and rotate
with the seed; lengths stay adversarial inside a launch; the warm phase runs each launch's
smallest problem in worker processes; fuzz-bench reports the warm phase and the timed part apart."""
import argparse

import pytest
import torch
from hypothesis import given, settings

from flashproof.fuzz import targets
from flashproof.fuzz.campaign import PROFILES, _plan, _strategy, run_campaign, specimens
from flashproof.fuzz.launches import LAUNCH_FAMILIES, choose, int_class, launch_of, length_class, side_class, tile_class
from flashproof.fuzz.warm import warm_up

GPU = PROFILES["gpu"]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _on(launch, family):
    return {"causal": launch.causal, "window": launch.window is not None, "varlen": launch.seqlens is not None,
            "mask": launch.mask, "empty_rows": launch.mask, "poison": launch.poison, "noncontig": launch.noncontig,
            "gqa": launch.heads_q > launch.heads_kv, "dv": launch.dv != launch.d, "batch": launch.batch > 1,
            "sparse": launch.sparse is not None}[family]


def test_classes_follow_tritons_integer_specialisation():
    """An int is specialised as 1, divisible by 16, or neither; a product of lengths, heads and
    head dims is divisible by 16 exactly when its factors' powers of 2 add up to 4."""
    assert length_class(65) == length_class(1025) and length_class(63) == length_class(129)
    assert len({length_class(n) for n in (1, 2, 63, 64, 65, 127)}) == 6
    assert [side_class(w) for w in (0, 1, 2, 16, 17, 32)] == ["div16", "one", "other", "div16", "other", "div16"]
    for a in range(1, 70):
        for b in (1, 2, 3, 8, 64, 80):
            v2 = min(int_class(a)[1] + int_class(b)[1], 4)
            assert ((a * b) % 16 == 0) == (v2 == 4), (a, b)


@pytest.mark.parametrize("name", ["triton", "sdpa-flash"])
@pytest.mark.parametrize("seed", range(4))
def test_a_campaigns_launches_cover_every_family_the_kernel_takes(name, seed):
    target = targets.get(name)
    p = _plan(target, "cuda", dict(GPU), seed)
    assert len(p.launches) == GPU["launches"]
    for fam in LAUNCH_FAMILIES:
        if fam in p.families:
            assert any(_on(l, fam) for l in p.launches), (name, seed, fam)
        else:
            assert not any(_on(l, fam) for l in p.launches), (name, seed, fam)
    if name == "sdpa-flash":  # its causal flag is top-left: causal problems stay square
        assert all(l.square for l in p.launches if l.causal)


def test_the_launches_rotate_with_the_seed():
    sets = [_plan(targets.get("triton"), "cuda", dict(GPU), seed).launches for seed in range(4)]
    assert len(set(sets)) == 4
    assert sets[0] == _plan(targets.get("triton"), "cuda", dict(GPU), 0).launches  # deterministic


@settings(max_examples=200, database=None, deadline=None)
@given(_strategy(targets.get("triton"), "cuda", dict(GPU), 0))
def test_every_problem_of_a_campaign_is_in_one_of_its_launches(spec):
    launches = _plan(targets.get("triton"), "cuda", dict(GPU), 0).launches
    assert launch_of(spec) in launches


def test_lengths_stay_adversarial_inside_the_launches():
    """Over a few campaigns every special length is drawn, for queries and for keys."""
    seen_q, seen_k = set(), set()
    for seed in range(4):
        @settings(max_examples=150, database=None, deadline=None)
        @given(_strategy(targets.get("triton"), "cuda", dict(GPU), seed))
        def draw(spec):
            if spec.seqlens is None:
                seen_q.add(spec.n_q)
                seen_k.add(spec.n_k)
        draw()
    assert seen_q >= set(GPU["lengths"]) and seen_k >= set(GPU["lengths"]), (seen_q, seen_k)


def test_specimens_are_the_smallest_problems_of_their_launches():
    launches = _plan(targets.get("triton"), "cuda", dict(GPU), 0).launches
    assert any(l.sparse for l in launches)  # a block-sparse launch: its lengths also keep their tile-count class
    for s, l in zip(specimens(targets.get("triton"), "cuda", dict(GPU), 0), launches):
        assert launch_of(s, l.square) == l

        def ok(n, cls, side):
            return length_class(n) == cls and (l.sparse is None or tile_class(n, l.sparse[0]) == l.sparse[side])
        assert s.seqlens is not None or (s.n_q, s.n_k) == (min(n for n in GPU["lengths"] if ok(n, l.n_q, 1)),
                                                           min(n for n in GPU["lengths"] if ok(n, l.n_k, 2)))


def test_bad_launch_counts_are_refused():
    with pytest.raises(ValueError, match=">= 1 launch"):
        choose(0, 0, lengths=(1,), dims=(8,), families=(), max_nq=1, max_nk=1, max_heads_kv=1, max_group=1,
               max_batch=1)


SMALL = dict(max_nq=17, max_nk=17, max_d=8, max_heads_kv=2, max_group=2, max_batch=2, lengths=(1, 2, 16, 17), dims=(8,),
             launches=2)


def test_the_warm_phase_runs_every_launch_in_worker_processes_and_reports_it():
    s = run_campaign("torch", device="cpu", dtypes=("fp32",), budget=4, rounds=1, profile=dict(SMALL), warm=True,
                     workers=2)
    w = s["warm"]
    assert (w["tasks"], w["workers"], w["failed"], w["cut"]) == (2, 2, 0, 0), w
    assert s["passed"] and len(s["specialisations"]) == 2
    assert (s["compiles"]["compiled"], s["compiles"]["cached"], s["compiles"]["examples"]) == (0, 0, [])
    assert 0 < s["timed_s"] <= s["elapsed_s"]


def test_a_warm_task_that_fails_in_its_worker_is_counted_not_hidden():
    """A kernel the worker cannot load (registered only in this process) fails there: counted and
    its error kept (the campaign itself still examines everything)."""
    spec = specimens(targets.get("torch"), "cpu", dict(SMALL), 0)[:1]
    w = warm_up("fake:not-in-the-worker", spec, ("fp32",), device="cpu", checks=("forward",), determinism_runs=2,
                tuning="first", workers=1)
    assert (w.tasks, w.failed) == (1, 1) and "cannot import module 'fake'" in w.errors[0], w


def test_fuzz_bench_reports_the_warm_phase_and_the_timed_part_apart(tmp_path, capsys):
    from flashproof.fuzz.bench import add_arguments, run

    p = argparse.ArgumentParser()
    add_arguments(p)
    rc = run(p.parse_args(["--device", "cpu", "--kernel", "torch", "--dtype", "fp32", "--profile", "ci",
                           "--seconds", "3", "--workers", "0", "--json", str(tmp_path / "b.json")]))
    out = capsys.readouterr().out
    assert rc == 0 and "warm_s" in out and "ex/min" in out and "paid once per Triton cache" in out
    import json
    (row,) = json.loads((tmp_path / "b.json").read_text())
    assert row["examples"] >= 1 and row["warm_s"] is None and row["timed_compiles"] == 0


def test_compilations_are_counted_through_tritons_listener_and_it_is_restored():
    triton = pytest.importorskip("triton")
    from flashproof.fuzz.warm import count_compiles

    knobs = triton.knobs.compilation
    before = knobs.listener
    with count_compiles() as n:
        for hit in (False, False, True):  # what triton's compiler calls on a compilation / a cache load
            knobs.listener(src=None, metadata=None, metadata_group=None, times=None, cache_hit=hit)
    assert (n["compiled"], n["cached"], len(n["kernels"])) == (2, 1, 2) and knobs.listener is before
