"""The foundation's end-to-end check: an MLP (Linear, LayerNorm, GELU, ReLU, Dropout,
cross-entropy, AdamW) trains on tpu with CPU's losses."""
import copy

import pytest
import torch

import torch_tpu

import example_loader

mlp = example_loader.load("mlp")


def _run(precision, steps=50, p_drop=0.0):
    torch.manual_seed(0)
    model = mlp.MLP(p_drop=p_drop)
    x, y = mlp.make_data()
    with torch_tpu.precision(precision):
        tpu = mlp.train(copy.deepcopy(model), x, y, "tpu", steps)
    cpu = mlp.train(copy.deepcopy(model), x, y, "cpu", steps)
    return torch.tensor(tpu), torch.tensor(cpu)


def test_mlp_highest_matches_cpu():
    tpu, cpu = _run(torch_tpu.Precision.HIGHEST)
    rel = ((tpu - cpu).abs() / cpu.abs()).max().item()
    assert rel < 1e-4, f"max relative loss difference {rel:.2e}"
    assert tpu[-5:].mean() < 0.6 * tpu[:5].mean()


def test_mlp_default_precision_falls_within_bf16_tolerance():
    tpu, cpu = _run(torch_tpu.Precision.DEFAULT)
    assert tpu[-5:].mean() < 0.6 * tpu[:5].mean()
    rel = ((tpu - cpu).abs() / cpu.abs()).max().item()
    assert rel < 3e-2, f"max relative loss difference {rel:.2e}"


def test_mlp_with_dropout_trains_and_is_reproducible():
    a, _ = _run(torch_tpu.Precision.DEFAULT, steps=20, p_drop=0.2)
    b, _ = _run(torch_tpu.Precision.DEFAULT, steps=20, p_drop=0.2)
    assert torch.equal(a, b)  # torch.manual_seed makes tpu dropout reproducible
    assert a[-5:].mean() < a[:5].mean()


def test_mlp_runs_without_cpu_fallback():
    torch_tpu._C._reset_fallback_counts()
    _run(torch_tpu.Precision.DEFAULT, steps=3)
    assert torch_tpu.metrics()["fallbacks"] == {}
