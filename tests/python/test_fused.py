"""Fused eager (DEFER_AND_FUSE): recording, flushing at sync points, aliasing, RNG, and the
same results as strict mode."""
import copy

import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode
from torch_tpu._internal import sync

FUSED = EagerMode.DEFER_AND_FUSE


def _stats():
    return torch_tpu._C._window_stats()


def test_ops_are_deferred_until_a_sync_point():
    a = torch.randn(64, 64)
    b = torch.randn(64, 64)
    c = torch.randn(64)
    ta, tb, tc = a.to("tpu"), b.to("tpu"), c.to("tpu")
    with torch_tpu.eager_mode(FUSED):
        flushes = _stats()["flushes"]
        y = (ta * tb + tc).relu().sum()
        assert sync.pending_ops() >= 3
        assert _stats()["flushes"] == flushes
        text = sync.computation_mlir(y)
        assert "stablehlo.multiply" in text and "stablehlo.reduce" in text
        val = y.item()  # sync point: flushes
        assert sync.pending_ops() == 0
    assert val == pytest.approx(((a * b + c).relu().sum()).item(), rel=1e-5)


@pytest.mark.parametrize("fn, clusters", [
    (lambda a, b, c: (a * b + c).relu().sum(), 1),
    (lambda a, b, c: torch.nn.functional.gelu(a * b + c), 1),
    (lambda a, b, c: (a @ b + c).relu(), 2),  # dot anchor + elementwise epilogue loop
])
def test_cluster_counts(fn, clusters):
    g = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(16, 16, generator=g) for _ in range(3))
    # HIGHEST: the DEFAULT (bf16) matmul of random data can miss 2e-2 (a flaky test before).
    with torch_tpu.eager_mode(FUSED), torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        y = fn(*(t.to("tpu") for t in (a, b, c)))
        assert sync.cluster_count(y) == clusters
        fused = y.cpu()
    torch.testing.assert_close(fused, fn(a, b, c), rtol=2e-2, atol=2e-2)


def test_dead_intermediates_are_never_written():
    x = torch.randn(1000).to("tpu")
    with torch_tpu.eager_mode(FUSED):
        before = _stats()["skipped_outputs"]
        y = ((x * 2).exp() + 1).log()  # temporaries die before the flush
        out = y.cpu()
        assert _stats()["skipped_outputs"] > before
    torch.testing.assert_close(out, ((x.cpu() * 2).exp() + 1).log())


def test_inplace_and_views_match_strict():
    def program(dev):
        torch.manual_seed(0)
        x = torch.arange(24, dtype=torch.float32).reshape(4, 6).to(dev)
        y = x * 2
        y.add_(1)                       # in-place on a window value
        v = y.view(6, 4)                # view of a window value
        w = v.t() + 1                   # transposed view read
        y[:, 1:3] = -1                  # slice assignment (partial write)
        z = y.sum(0) + w.sum(0)
        s = y[1:, ::2].clone()          # strided view after the partial write
        vv = y.view(-1)[2:10].view(2, 4)  # view of view
        vv.mul_(3)                      # writes through to y
        return [t.cpu() for t in (y, w, z, s, vv)]

    ref = program("cpu")
    strict = program("tpu")
    with torch_tpu.eager_mode(FUSED):
        fused = program("tpu")
    for r, s, f in zip(ref, strict, fused):
        torch.testing.assert_close(s, r)
        torch.testing.assert_close(f, r)


def test_random_ops_reproduce_strict_numbers():
    def draw():
        torch.manual_seed(123)
        a = torch.rand(100, device="tpu")
        b = torch.randn(10, 10, device="tpu")
        d = torch.nn.functional.dropout(torch.ones(200, device="tpu"), 0.5)
        return [t.cpu() for t in (a, b, d)]

    strict = draw()
    with torch_tpu.eager_mode(FUSED):
        fused = draw()
    for s, f in zip(strict, fused):
        assert torch.equal(s, f)


def test_cache_hits_in_a_loop():
    x = torch.randn(32, 32).to("tpu")
    with torch_tpu.eager_mode(FUSED):
        for _ in range(3):  # warm-up
            (x * 1.5 + 2).tanh().sum().item()
        s0 = torch.tpu._get_cache_stats()
        for i in range(5):
            (x * (1.5 + i) + 2).tanh().sum().item()  # scalar values change: same graph
        s1 = torch.tpu._get_cache_stats()
    reqs = s1["num_cache_reqs"] - s0["num_cache_reqs"]
    hits = s1["num_cache_hits"] - s0["num_cache_hits"]
    assert reqs >= 5 and hits == reqs


def test_env_selects_fused_mode():
    import os
    import subprocess
    import sys
    code = "import torch_tpu; print(torch_tpu.get_eager_mode())"
    env = dict(os.environ, TORCH_TPU_DEFER_AND_FUSE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "DEFER_AND_FUSE" in out.stdout, out.stderr


def test_row_chains_with_tile_local_values_match_cpu():
    """Layer norm + GELU and log-softmax row chains in one window, forward and backward: the
    values only a chain reads live in tile scratch (no memory); a planner that also released
    their never-allocated arena range let two chains share memory (loss 1.28 instead of 2.29)."""
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    fc1, norm, fc2 = nn.Linear(32, 128), nn.LayerNorm(128), nn.Linear(128, 10)
    x, y = torch.randn(64, 32), torch.randint(0, 10, (64,))

    def f(x):
        return fc2(F.gelu(norm(fc1(x))))

    mods = (fc1, norm, fc2)
    ref = F.cross_entropy(f(x), y)
    ref.backward()
    grads = [p.grad.clone() for m in mods for p in m.parameters()]
    for m in mods:
        m.to("tpu").zero_grad()
    with torch_tpu.eager_mode(FUSED), torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        loss = F.cross_entropy(f(x.to("tpu")), y.to("tpu"))
        loss.backward()
        assert loss.item() == pytest.approx(ref.item(), rel=1e-5)
    for p, g in zip([p for m in mods for p in m.parameters()], grads):
        torch.testing.assert_close(p.grad.cpu(), g, atol=1e-5, rtol=1e-4)


def test_mlp_training_same_in_fused_and_strict():
    import importlib.util
    import pathlib
    spec = importlib.util.spec_from_file_location(
        "mlp_example", pathlib.Path(__file__).resolve().parents[2] / "examples" / "mlp.py")
    mlp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mlp)
    torch.manual_seed(0)
    model = mlp.MLP(p_drop=0.1)
    x, y = mlp.make_data()
    torch.manual_seed(1)
    strict = mlp.train(copy.deepcopy(model), x, y, "tpu", 15)
    torch_tpu.set_eager_mode(FUSED)
    try:
        torch.manual_seed(1)
        fused = mlp.train(copy.deepcopy(model), x, y, "tpu", 15)
    finally:
        torch_tpu.set_eager_mode(EagerMode.DEFER_NEVER)
    torch.testing.assert_close(torch.tensor(fused), torch.tensor(strict), rtol=1e-5, atol=1e-6)


def test_views_of_permuted_results_stay_in_the_window():
    # A pointwise result of a transposed input is itself transposed (PyTorch's layout);
    # later views of it are derived inside the window, not flushed.
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 4, 5, generator=g)
    x = a.to("tpu")
    with torch_tpu.eager_mode(FUSED):
        flushes = _stats()["flushes"]
        y = x.permute(2, 0, 1) * 2  # strides follow the permutation
        z = y[1:, ::2] + y.reshape(5, 24)[:, :12].reshape(5, 6, 2)[1:, ::2, 0:1]
        w = z.contiguous().view(-1).sum()
        assert _stats()["flushes"] == flushes
        got = (y.cpu(), z.cpu(), w.cpu())
    ya = a.permute(2, 0, 1) * 2
    za = ya[1:, ::2] + ya.reshape(5, 24)[:, :12].reshape(5, 6, 2)[1:, ::2, 0:1]
    assert y.stride() == ya.stride()
    torch.testing.assert_close(got[0], ya)
    torch.testing.assert_close(got[1], za)
    torch.testing.assert_close(got[2], za.contiguous().view(-1).sum())


def test_window_recompiled_per_shape_warns_once():
    # The same deferred graph for new input sizes compiles again (seconds each on a TPU): past
    # TORCH_TPU_RECOMPILE_WARN (8) shape signatures, one warning names the changing dims.
    import warnings

    def step(n):
        x = torch.arange(3 * n, dtype=torch.float32).reshape(3, n).to("tpu")
        return ((x * 3).cumsum(-1).amax(-1) - 1.5).sum().item()

    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for n in range(40, 48):  # 8 shapes: no warning yet
                assert step(n) == pytest.approx(float(((torch.arange(3 * n, dtype=torch.float32).reshape(3, n) * 3)
                                                       .cumsum(-1).amax(-1) - 1.5).sum()))
            assert not [w for w in seen if "fused window" in str(w.message)]
            for n in range(48, 60):
                step(n)
            for n in range(40, 44):  # shapes seen before compile nothing new
                step(n)
    msgs = [str(w.message) for w in seen if "fused window" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert "compiled for 9 different input shapes" in msgs[0] and "dim 1" in msgs[0], msgs[0]


def test_window_recompiled_per_slice_bound_says_so():
    # Windows that differ only in attributes (the start of a slice of an intermediate), not in
    # input sizes: the warning says so instead of naming no changing dim.
    import warnings

    x = torch.arange(60, dtype=torch.float32).reshape(3, 20)
    xt = x.to("tpu")
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(12):
                got = (xt.cumsum(1)[:, i:i + 5] * 3).sum().item()
                assert got == float((x.cumsum(1)[:, i:i + 5] * 3).sum())
    msgs = [str(w.message) for w in seen if "fused window" in str(w.message)]
    assert len(msgs) == 1, msgs
    assert "compiled 9 times" in msgs[0] and "unchanged sizes" in msgs[0], msgs[0]
