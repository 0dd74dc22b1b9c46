"""Bounded dynamism in torch.compile(backend="tpu") (issue 19 step 2, TORCH_TPU_BUCKETS): a
dynamic sequence dim is padded to a bucket and masked; every result equals PyTorch CPU on the
unpadded inputs, forward and backward; one capture serves every size of a bucket; a graph
with an op that has no masking rule refuses and runs per size, still correct."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu._internal import buckets
from torch_tpu._internal import compile as tc

import example_loader
from dynamic_families import FAMILIES

HIGHEST = torch_tpu.Precision.HIGHEST

gpt = example_loader.load("gpt")


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_CACHE_DIR", str(tmp_path / "tpu_cache"))
    monkeypatch.setenv("TORCH_TPU_BUCKETS", "pow2")
    torch._dynamo.reset()
    tc.reset_stats()
    yield
    torch._dynamo.reset()


def _misses():
    s = torch.tpu._get_cache_stats()
    return s["num_cache_reqs"] - s["num_cache_hits"]


def _bucketed():
    return [g for g in buckets.report()]


def test_parse_buckets():
    assert buckets.parse_buckets(None) is None
    assert buckets.parse_buckets("off") is None
    assert buckets.parse_buckets("pow2") == "pow2"
    assert buckets.parse_buckets(" 64,32 ,128") == [32, 64, 128]
    with pytest.raises(ValueError, match=r"\[TORCH_TPU_BUCKETS\].*got 'x,32'"):
        buckets.parse_buckets("x,32")
    with pytest.raises(ValueError, match="positive"):
        buckets.parse_buckets("0,8")
    assert [buckets.bucket_for(n, "pow2") for n in (1, 2, 17, 32, 33)] == [1, 2, 32, 32, 64]
    assert [buckets.bucket_for(n, [24, 48]) for n in (1, 24, 25, 49)] == [24, 24, 48, None]


def _check(fn, shapes_at, lengths, *, int_inputs=(), grad=True, atol=1e-5):
    """fn compiled with the sequence dim (1) of every input marked dynamic; forward and input
    gradients equal CPU at each length."""
    cf = torch.compile(fn, backend="tpu")
    for T in lengths:
        torch.manual_seed(T)
        ins = []
        for i, shp in enumerate(shapes_at(T)):
            if i in int_inputs:
                ins.append(torch.randint(0, shp[-1] if len(shp) > 2 else 5, shp[:2]))
            else:
                ins.append(torch.randn(shp, requires_grad=grad))
        ref = fn(*ins)
        dev = [x.detach().to("tpu").requires_grad_(x.requires_grad) for x in ins]
        for d in dev:
            torch._dynamo.mark_dynamic(d, 1)
        with torch_tpu.precision(HIGHEST):
            out = cf(*dev)
        torch.testing.assert_close(out.cpu(), ref.detach(), atol=atol, rtol=1e-5)
        if grad:
            gref = torch.autograd.grad(ref.square().sum(), [x for x in ins if x.requires_grad])
            with torch_tpu.precision(HIGHEST):
                gdev = torch.autograd.grad(out.square().sum(), [x for x in dev if x.requires_grad])
            for a, b in zip(gdev, gref):
                assert a.shape == b.shape
                torch.testing.assert_close(a.cpu(), b, atol=atol, rtol=1e-5)
    rep = _bucketed()
    assert rep and not rep[-1]["refused"], rep
    return rep[-1]


@pytest.mark.parametrize("name,fn", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_masked_reductions(name, fn):
    rep = _check(fn, lambda T: [(3, T, 5)], [9, 13, 16])
    assert list(rep["buckets"]) == [16] and rep["buckets"][16]["variants"] == 1
    assert rep["buckets"][16]["compilations"] == 2  # one forward and one backward capture


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_mean_and_ignore_index(smoothing):
    def fn(logits, tg):
        # Targets 0 are the user's own ignore_index: the mean's denominator excludes them too.
        return F.cross_entropy(logits.reshape(-1, 7), tg.reshape(-1), ignore_index=0,
                               label_smoothing=smoothing)

    _check(fn, lambda T: [(2, T, 7), (2, T, 7)], [5, 7, 8], int_inputs=(1,))


def test_shifted_lm_loss():
    """HF-style: logits[:, :-1] against labels[:, 1:] (both T - 1 long), mean over real rows."""
    def fn(logits, tg):
        return F.cross_entropy(logits[:, :-1].reshape(-1, 7), tg[:, 1:].reshape(-1))

    _check(fn, lambda T: [(2, T, 7), (2, T, 7)], [5, 7, 8], int_inputs=(1,))


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa(causal):
    def fn(x):  # self-attention: q, k, v share the (padded) length
        q, k, v = x * 1.5, x * 0.5 + 1, x.square()
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=causal).transpose(1, 2)

    # Attention's sums over keys are ordered differently at the padded length: float rounding.
    _check(fn, lambda T: [(2, T, 2, 4)], [10, 13, 16], atol=5e-5)


def test_unknown_op_refuses_and_stays_correct():
    fn = lambda x: torch.sort(x, dim=1).values.sum(-1)  # noqa: E731  (no rule for sort)
    cf = torch.compile(fn, backend="tpu")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for T in (9, 11):
            x = torch.randn(2, T, 3)
            xd = x.to("tpu")
            torch._dynamo.mark_dynamic(xd, 1)
            torch.testing.assert_close(cf(xd).cpu(), fn(x), atol=1e-6, rtol=1e-6)
    assert any("runs one capture per size" in str(m.message) for m in w)
    rep = _bucketed()[-1]
    assert "sort" in rep["refused"] and rep["fallback_calls"] == 2 and not rep["buckets"]
    assert tc.stats()["captures"] == 2  # one per size, as without buckets


def test_off_by_default(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_BUCKETS")
    cf = torch.compile(lambda x: x.sum(1), backend="tpu", dynamic=True)
    for T in (9, 11):
        cf(torch.randn(2, T).to("tpu"))
    assert tc.stats()["captures"] == 2  # one per size


def _grads(m):
    return {n: p.grad.detach().cpu() for n, p in m.named_parameters() if p.grad is not None}


def test_gpt_train_loop_over_lengths():
    """GPT (examples/gpt.py, tiny) trained one SGD step per length over 40 lengths (17..56):
    loss and every gradient equal CPU at each step; 2 buckets (32, 64): 4 captures, and past
    the first step new programs only when a new bucket is met."""
    torch.manual_seed(0)
    cfg = gpt.Config(vocab=16, ctx=64, width=16, layers=2, heads=2)
    ref = gpt.GPT(cfg)
    m = copy.deepcopy(ref).to("tpu")
    cm = torch.compile(m, backend="tpu", dynamic=True)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_m = torch.optim.SGD(m.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    lengths = list(range(17, 57))
    data = []
    for T in lengths:
        x = torch.randint(0, 16, (3, T), generator=gen)
        y = torch.randint(0, 16, (3, T), generator=gen)
        y[0, :2] = -1  # ignore_index in the model's loss
        data.append((x, y, x.to("tpu"), y.to("tpu")))
    captures0 = tc.stats()["captures"]
    misses_after_first = None
    with torch_tpu.precision(HIGHEST):
        for i, (x, y, xd, yd) in enumerate(data):
            logits_r, loss_r = ref(x, y)
            loss_r.backward()
            logits, loss = cm(xd, yd)
            loss.backward()
            assert logits.shape == logits_r.shape
            torch.testing.assert_close(loss.cpu(), loss_r.detach(), atol=2e-6, rtol=1e-5)
            torch.testing.assert_close(logits.cpu(), logits_r.detach(), atol=2e-5, rtol=1e-5)
            gr, gm = _grads(ref), _grads(m)
            assert gr.keys() == gm.keys()
            for k in gr:
                scale = gr[k].abs().max().item()
                torch.testing.assert_close(gm[k], gr[k], atol=1e-5 * scale + 1e-9, rtol=1e-4,
                                           msg=lambda s, k=k, T=x.shape[1]: f"grad of {k} at length {T}: {s}")
            opt_r.step()
            opt_m.step()
            opt_r.zero_grad(set_to_none=True)
            opt_m.zero_grad(set_to_none=True)
            if i == 0:
                misses_after_first = _misses()
    new_misses = _misses() - misses_after_first
    rep = _bucketed()[-1]
    assert not rep["refused"] and sorted(rep["buckets"]) == [32, 64], rep
    assert all(b["compilations"] == 2 for b in rep["buckets"].values()), rep
    assert tc.stats()["captures"] - captures0 == 4
    # Per-size captures would be 39 new lengths x (forward + backward) at least.
    assert new_misses <= 8, new_misses
    b32 = rep["buckets"][32]
    assert b32["calls"] == 16 and 0 < b32["waste"] < 1
