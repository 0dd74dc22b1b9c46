"""The op harness's mode axis: each op table case runs in the eager mode its id names (so a
mode cannot drop out of the op suite silently), and fused cases record forward and backward
into one window."""
import torch

import torch_tpu
from op_harness import MODE_VARIANTS, MODES, VARIANTS, OpSpec, cases, check_case

EXP = OpSpec("exp", torch.exp, variants=("contig", "noncontig", "0dim", "empty", "broadcast"),
             broadcast=((3, 4),))


def _delta(before, after):
    return {k: after[k] - before[k] for k in after}


def test_cases_cover_every_mode_with_the_mode_in_the_id():
    ids = {p.id for p in cases([EXP])}
    for mode, variants in MODE_VARIANTS.items():
        for v in EXP.variants:
            assert (f"exp-float32-{v}-{mode}" in ids) == (v in variants), (mode, v)
    assert set(MODE_VARIANTS) == set(MODES) and MODE_VARIANTS["strict"] == VARIANTS  # strict: all


def test_each_mode_runs_its_ops_in_that_mode():
    for mode in MODES:
        before = torch_tpu.metrics()["ops_executed"]
        check_case(EXP, torch.float32, "contig", mode)
        ran = _delta(before, torch_tpu.metrics()["ops_executed"])
        assert ran[mode] > 0 and all(n == 0 for m, n in ran.items() if m != mode), (mode, ran)


def test_fused_forward_and_backward_are_one_window():
    before = torch_tpu.metrics()["fused"]
    check_case(EXP, torch.float32, "contig", "fused")
    d = _delta(before, torch_tpu.metrics()["fused"])
    assert d["flushes"] == 1 and d["deferred_ops"] >= 3, d  # transfer, exp, backward's mul
