"""Creation ops on tpu: empty/zeros/ones/full/arange/*_like compared with CPU by value;
random ops (rand/randn/randint/normal_/uniform_/bernoulli_/random_) by shape, dtype, range,
moments and reproducibility under torch.manual_seed -- never by value."""
import pytest
import torch

import torch_tpu  # noqa: F401

DEV = "tpu"
DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.int8, torch.bool)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 5), (2, 1, 3)], ids=str)
def test_constant_factories(shape, dtype):
    for make in (torch.zeros, torch.ones):
        t = make(shape, dtype=dtype, device=DEV)
        assert t.device.type == DEV and t.dtype == dtype and t.shape == shape
        assert torch.equal(t.cpu(), make(shape, dtype=dtype))
    fill = True if dtype == torch.bool else 3
    t = torch.full(shape, fill, dtype=dtype, device=DEV)
    assert torch.equal(t.cpu(), torch.full(shape, fill, dtype=dtype))
    e = torch.empty(shape, dtype=dtype, device=DEV)
    assert e.shape == shape and e.dtype == dtype and e.device.type == DEV


def test_full_infers_dtype_and_like_ops():
    assert torch.full((2,), 1.5, device=DEV).dtype == torch.float32
    assert torch.full((2,), 7, device=DEV).dtype == torch.int64
    assert torch.full((2,), True, device=DEV).dtype == torch.bool
    base = torch.randn(2, 3).to(DEV).t()
    for fn, ref in ((torch.zeros_like, 0), (torch.ones_like, 1)):
        t = fn(base)
        assert t.shape == base.shape and t.device.type == DEV
        assert torch.equal(t.cpu(), torch.full((3, 2), float(ref)))
    assert torch.equal(torch.full_like(base, -2.5).cpu(), torch.full((3, 2), -2.5))
    assert torch.empty_like(base).shape == (3, 2)
    assert torch.zeros_like(base, dtype=torch.int32).dtype == torch.int32
    assert torch.equal(base.new_ones(4).cpu(), torch.ones(4))
    assert torch.equal(base.new_zeros((2, 2)).cpu(), torch.zeros(2, 2))
    assert torch.equal(base.new_full((3,), 5.0).cpu(), torch.full((3,), 5.0))
    assert torch.equal(base.new_tensor([1.0, 2.0]).cpu(), torch.tensor([1.0, 2.0]))
    assert torch.equal(torch.tensor([[1, 2], [3, 4]], device=DEV).cpu(), torch.tensor([[1, 2], [3, 4]]))


@pytest.mark.parametrize("args,kw", [
    ((5,), {}), ((2, 9), {}), ((1, 10, 3), {}), ((10, 0, -2), {}), ((0,), {}),
    ((0.0, 1.0, 0.1), {}), ((-1.5, 2.3, 0.7), {}), ((5,), {"dtype": torch.float32}),
    ((0, 10, 3), {"dtype": torch.int32}), ((1, 4, 0.5), {"dtype": torch.bfloat16}),
    ((0, 200, 7), {"dtype": torch.uint8}), ((-5, 5), {"dtype": torch.int8}),
    ((0, 1, 1 / 3), {"dtype": torch.float64}), ((3, 1, -0.25), {}),
], ids=str)
def test_arange(args, kw):
    ref = torch.arange(*args, **kw)
    t = torch.arange(*args, **kw, device=DEV)
    assert t.dtype == ref.dtype and t.shape == ref.shape
    torch.testing.assert_close(t.cpu(), ref, atol=1e-6, rtol=1e-6)


def test_arange_out_and_errors():
    out = torch.empty(0, device=DEV)
    torch.arange(0, 4, out=out)
    assert torch.equal(out.cpu(), torch.arange(0.0, 4.0))
    with pytest.raises(RuntimeError):
        torch.arange(0, 5, 0, device=DEV)
    with pytest.raises(RuntimeError):
        torch.arange(5, 0, 1, device=DEV)


# --- random ops ---------------------------------------------------------------------------
N = 20000


def _stats(t):
    f = t.cpu().double()
    return f.mean().item(), f.std().item(), f.min().item(), f.max().item()


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_rand_and_uniform(dtype):
    t = torch.rand(N, dtype=dtype, device=DEV)
    assert t.shape == (N,) and t.dtype == dtype and t.device.type == DEV
    m, s, lo, hi = _stats(t)
    assert 0 <= lo and hi <= 1 and abs(m - 0.5) < 0.02 and abs(s - (1 / 12) ** 0.5) < 0.02
    u = torch.empty(N, dtype=dtype, device=DEV).uniform_(-2, 6)
    m, s, lo, hi = _stats(u)
    assert -2 <= lo and hi <= 6 and abs(m - 2) < 0.1 and abs(s - 8 / 12 ** 0.5) < 0.1


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_randn_and_normal(dtype):
    t = torch.randn(100, 200, dtype=dtype, device=DEV)
    assert t.shape == (100, 200) and t.dtype == dtype
    m, s, _, _ = _stats(t)
    assert abs(m) < 0.02 and abs(s - 1) < 0.02
    n = torch.empty(N, dtype=dtype, device=DEV).normal_(3.0, 0.5)
    m, s, _, _ = _stats(n)
    assert abs(m - 3) < 0.02 and abs(s - 0.5) < 0.02
    z = torch.normal(1.0, 2.0, (N,), device=DEV)
    m, s, _, _ = _stats(z)
    assert abs(m - 1) < 0.06 and abs(s - 2) < 0.06


@pytest.mark.parametrize("dtype", (torch.int64, torch.int32, torch.uint8, torch.int8, torch.float32), ids=str)
def test_randint_and_random_(dtype):
    t = torch.randint(-3 if dtype != torch.uint8 else 0, 7, (N,), dtype=dtype, device=DEV)
    assert t.dtype == dtype and t.shape == (N,)
    vals = t.cpu().long()
    lo = -3 if dtype != torch.uint8 else 0
    assert vals.min().item() == lo and vals.max().item() == 6
    counts = torch.bincount(vals - lo).double()
    assert (counts / N - 1 / (7 - lo)).abs().max() < 0.02  # roughly uniform
    r = torch.empty(N, dtype=dtype, device=DEV).random_(5)
    assert r.cpu().long().min() == 0 and r.cpu().long().max() == 4
    r = torch.empty(N, dtype=dtype, device=DEV).random_()
    assert r.cpu().double().min() >= 0


def test_random_bool():
    r = torch.empty(N, dtype=torch.bool, device=DEV).random_()
    assert abs(r.cpu().float().mean().item() - 0.5) < 0.03


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int64, torch.bool), ids=str)
def test_bernoulli(dtype):
    b = torch.empty(N, dtype=dtype, device=DEV).bernoulli_(0.3)
    assert b.dtype == dtype
    v = b.cpu().double()
    assert set(v.unique().tolist()) <= {0.0, 1.0}
    assert abs(v.mean().item() - 0.3) < 0.02
    if dtype.is_floating_point:
        p = torch.linspace(0, 1, N).to(dtype).to(DEV)
        s = torch.bernoulli(p).cpu().double()
        assert abs(s[: N // 4].mean().item() - 0.125) < 0.03 and abs(s[-N // 4:].mean().item() - 0.875) < 0.03
        q = torch.empty(N, dtype=dtype, device=DEV).bernoulli_(torch.full((N,), 0.8, device=DEV))
        assert abs(q.cpu().double().mean().item() - 0.8) < 0.02


def test_bernoulli_bad_p():
    with pytest.raises(RuntimeError):
        torch.empty(3, device=DEV).bernoulli_(1.5)


def _draw():
    return [torch.rand(7, device=DEV).cpu(), torch.randn(3, 3, device=DEV).cpu(),
            torch.randint(0, 100, (5,), device=DEV).cpu(), torch.empty(6, device=DEV).bernoulli_(0.5).cpu(),
            torch.empty(4, device=DEV).normal_(1, 2).cpu(), torch.empty(4, device=DEV).uniform_().cpu()]


def test_reproducible_under_manual_seed():
    torch.manual_seed(1234)
    a = _draw()
    torch.manual_seed(1234)
    b = _draw()
    c = _draw()
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y)
        assert not torch.equal(y, z)
    torch.manual_seed(99)
    assert not torch.equal(_draw()[0], a[0])


def test_generator_argument_and_fork_rng():
    g = torch.Generator(device=DEV)
    g.manual_seed(5)
    x = torch.rand(8, device=DEV, generator=g).cpu()
    g.manual_seed(5)
    assert torch.equal(torch.rand(8, device=DEV, generator=g).cpu(), x)
    state = torch.tpu.get_rng_state()
    y = torch.rand(8, device=DEV).cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(8, device=DEV).cpu(), y)


def test_random_empty_and_scalar_shapes():
    assert torch.rand(0, 3, device=DEV).shape == (0, 3)
    assert torch.randn((), device=DEV).shape == ()
    assert torch.randint(0, 2, (), device=DEV).dtype == torch.int64


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_randperm_is_a_seeded_permutation(dtype):
    torch.manual_seed(3)
    a = torch.randperm(50, device="tpu", dtype=dtype)
    assert a.device.type == "tpu" and a.dtype == dtype
    assert torch.equal(a.cpu().sort().values, torch.arange(50, dtype=dtype))
    torch.manual_seed(3)
    assert torch.equal(torch.randperm(50, device="tpu", dtype=dtype).cpu(), a.cpu())
    b = torch.randperm(50, device="tpu", dtype=dtype)
    assert not torch.equal(a.cpu(), b.cpu())
    assert torch.randperm(0, device="tpu").numel() == 0


def test_tril_triu_indices_with_a_zero_dim():
    """tril_indices(r, 0): PyTorch's decomposition divides an empty arange by col = 0, which
    must not raise ZeroDivisionError (found by the fuzzer)."""
    for r, c in [(0, 0), (20, 0), (0, 3), (3, 1)]:
        for f in (torch.tril_indices, torch.triu_indices):
            torch.testing.assert_close(f(r, c, device="tpu").cpu(), f(r, c))
