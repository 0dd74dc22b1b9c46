"""Bounded dynamism in eager mode (issue 19 step 4, `torch_tpu.mark_dynamic`): a marked dim is
padded to a bucket and every op on it masked; results equal PyTorch CPU on the unpadded inputs,
forward and backward, in fused and strict eager; every length of a bucket runs the programs the
first one compiled; ops without a padding rule fall back to true sizes, still correct."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu._internal import dynamic_eager as de

import example_loader
from dynamic_families import FAMILIES as COMMON_FAMILIES

HIGHEST = torch_tpu.Precision.HIGHEST
FUSED = torch_tpu.EagerMode.DEFER_AND_FUSE
STRICT = torch_tpu.EagerMode.DEFER_NEVER

gpt = example_loader.load("gpt")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_BUCKETS", raising=False)
    monkeypatch.setattr(de, "CHECK", True)  # every rule's shapes against PyTorch's meta kernels
    yield
    de.uninstall()


def _misses():
    s = torch.tpu._get_cache_stats()
    return s["num_cache_reqs"] - s["num_cache_hits"]


def _run(fn, shapes_at, lengths, mode, *, int_inputs=(), atol=1e-5):
    """fn over inputs whose dim 1 is marked dynamic, at each length: outputs equal CPU; the first
    length compiles, the others (same bucket) compile nothing. Returns the misses after the first."""
    new = 0
    for i, T in enumerate(lengths):
        torch.manual_seed(T)
        ins = []
        for k, shp in enumerate(shapes_at(T)):
            ins.append(torch.randint(0, shp[-1], shp[:2]) if k in int_inputs else torch.randn(shp))
        ref = fn(*ins)
        with torch_tpu.eager_mode(mode), torch_tpu.precision(HIGHEST):
            dev = [torch_tpu.mark_dynamic(x, 1).to("tpu") for x in ins]
            m0 = _misses()
            out = fn(*dev)
            got = out.cpu()
        if i:
            new += _misses() - m0
        assert not isinstance(got, de.DynamicTensor) and got.shape == ref.shape
        torch.testing.assert_close(got, ref, atol=atol, rtol=1e-5)
    return new


def _grads(fn, shapes_at, lengths, *, atol=1e-5):
    """Input gradients through fn equal CPU's (inputs that require grad: padded by torch.cat)."""
    for T in lengths:
        torch.manual_seed(T)
        ins = [torch.randn(s, requires_grad=True) for s in shapes_at(T)]
        ref = fn(*ins)
        gref = torch.autograd.grad(ref.square().sum(), ins)
        with torch_tpu.precision(HIGHEST):
            leaves = [x.detach().to("tpu").requires_grad_() for x in ins]
            out = fn(*[torch_tpu.mark_dynamic(x, 1) for x in leaves])
            g = torch.autograd.grad(out.square().sum(), leaves)
        for a, b in zip(g, gref):
            assert a.shape == b.shape
            torch.testing.assert_close(a.cpu(), b, atol=atol, rtol=1e-5)


FAMILIES = COMMON_FAMILIES + [
    ("layer_norm_rows", lambda x: F.layer_norm(x, (5,)).sum(1)),
    ("linear_gelu", lambda x: F.gelu(F.linear(x, torch.ones(4, 5, device=x.device) * 0.1)).mean(1)),
    ("arange_positions", lambda x: (x * torch.arange(x.shape[1], device=x.device)[None, :, None]).sum(1)),
]


@pytest.mark.parametrize("name,fn", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_op_families_fused(name, fn):
    assert _run(fn, lambda T: [(3, T, 5)], [9, 13, 16], FUSED) == 0


@pytest.mark.parametrize("name,fn", FAMILIES[:6], ids=[f[0] for f in FAMILIES[:6]])
def test_op_families_strict(name, fn):
    assert _run(fn, lambda T: [(3, T, 5)], [9, 13, 16], STRICT) == 0


@pytest.mark.parametrize("name,fn", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_op_families_grad(name, fn):
    _grads(fn, lambda T: [(3, T, 5)], [9, 16])


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_ignore_index(smoothing):
    def fn(logits, tg):  # targets 0 are the user's own ignore_index: out of the mean's count too
        return F.cross_entropy(logits.reshape(-1, 7), tg.reshape(-1), ignore_index=0, label_smoothing=smoothing)

    assert _run(fn, lambda T: [(2, T, 7), (2, T, 7)], [5, 7, 8], FUSED, int_inputs=(1,)) == 0


def test_shifted_lm_loss():
    def fn(logits, tg):
        return F.cross_entropy(logits[:, :-1].reshape(-1, 7), tg[:, 1:].reshape(-1))

    assert _run(fn, lambda T: [(2, T, 7), (2, T, 7)], [5, 7, 8], FUSED, int_inputs=(1,)) == 0


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa(causal):
    def fn(x):
        q, k, v = x * 1.5, x * 0.5 + 1, x.square()
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=causal).transpose(1, 2)

    assert _run(fn, lambda T: [(2, T, 2, 4)], [10, 13, 16], FUSED, atol=5e-5) == 0
    _grads(fn, lambda T: [(2, T, 2, 4)], [10, 16], atol=5e-5)


def test_sizes_are_true_and_remember_the_length():
    x = torch.randn(2, 11, 3)
    d = torch_tpu.mark_dynamic(x, 1).to("tpu")
    assert isinstance(d, de.DynamicTensor) and d._t.shape == (2, 16, 3)
    T = d.shape[1]
    assert isinstance(T, de.SymLen) and T == 11 and d.size(1) == 11 and d.size() == (2, 11, 3)
    assert d.numel() == 66 and len(d) == 2 and d.dim() == 3 and d.dtype == torch.float32
    assert isinstance(2 * T - 1, de.SymLen) and (2 * T - 1) == 21 and (2 * T - 1).lin.a == 2
    assert type(T // 3) is int and T // 3 == 3 and type(-T) is int and T / 2 == 5.5
    assert type(d.shape[0]) is int
    assert d.tolist() == x.tolist() and "tensor(" in repr(d)
    torch.testing.assert_close(d.cpu(), x)
    torch.testing.assert_close(d.sum(1).cpu(), x.sum(1))
    assert d[0, 3:5].shape == (2, 3)  # a constant slice of the padded dim: falls back, true size


def test_unknown_op_falls_back_correctly():
    x = torch.randn(2, 9, 3)
    d = torch_tpu.mark_dynamic(x, 1).to("tpu")
    before = torch_tpu.metrics()["dynamic"]["fallbacks"].get("sort", 0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = torch.sort(d, dim=1).values.sum(-1)
    assert any("[mark_dynamic] sort" in str(m.message) for m in w)
    assert not isinstance(r, de.DynamicTensor)
    torch.testing.assert_close(r.cpu(), torch.sort(x, dim=1).values.sum(-1))
    assert torch_tpu.metrics()["dynamic"]["fallbacks"]["sort"] == before + 1
    # Two different lengths in one op: both cut to their true sizes.
    e = torch_tpu.mark_dynamic(torch.randn(2, 9, 3)[:, :5].contiguous(), 1).to("tpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close((d[:, :5] + e).cpu() if False else torch.cat([d, e], 1).cpu(),
                                   torch.cat([x, e.cpu()], 1))


def test_in_place_raises():
    d = torch_tpu.mark_dynamic(torch.randn(2, 9), 1).to("tpu")
    with pytest.raises(RuntimeError, match=r"\[mark_dynamic\] in-place add_"):
        d.add_(1)
    with pytest.raises(RuntimeError, match=r"\[mark_dynamic\] in-place __setitem__"):
        d[0] = 1.0
    out = torch.zeros(2, 9, device="tpu")
    out.copy_(d)  # a dynamic source into a plain tensor: its true values
    torch.testing.assert_close(out.cpu(), d.cpu())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.add(d, 1, out=out)  # a plain out= keeps its true shape
    assert out.shape == (2, 9)
    torch.testing.assert_close(out.cpu(), d.cpu() + 1)
    with pytest.raises(RuntimeError, match=r"\[mark_dynamic\] in-place"):
        torch.add(out, 1, out=d)


def test_mark_dynamic_errors_and_buckets(monkeypatch):
    x = torch.randn(2, 20)
    with pytest.raises(IndexError, match=r"\[mark_dynamic\] dim out of range; got 2"):
        torch_tpu.mark_dynamic(x, 2)
    with pytest.raises(ValueError, match=r"got 20, expected 1 <= size <= 16"):
        torch_tpu.mark_dynamic(x, 1, max=16)
    with pytest.raises(ValueError, match="already dynamic"):
        torch_tpu.mark_dynamic(torch_tpu.mark_dynamic(x, 1), 1)
    assert torch_tpu.mark_dynamic(x, 1)._t.shape == (2, 32)
    assert torch_tpu.mark_dynamic(x, 1, max=24)._t.shape == (2, 24)
    monkeypatch.setenv("TORCH_TPU_BUCKETS", "24,48")
    assert torch_tpu.mark_dynamic(x, 1)._t.shape == (2, 24)
    assert torch_tpu.mark_dynamic(torch.randn(2, 50), 1)._t.shape == (2, 50)  # past the list: as is
    b = torch_tpu.metrics()["dynamic"]["buckets"][24]
    assert b["lengths"] >= 1 and b["waste"] == pytest.approx(0.2)


def test_requires_grad_input_gets_true_gradient():
    x = torch.randn(2, 6, 3, requires_grad=True)
    (x.softmax(1) * torch.arange(3.0)).sum().backward()
    xt = x.detach().to("tpu").requires_grad_()
    (torch_tpu.mark_dynamic(xt, 1).softmax(1) * torch.arange(3.0, device="tpu")).sum().backward()
    assert xt.grad.shape == x.shape
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-6, rtol=1e-5)


def test_compile_with_the_length_mode_installed():
    """torch.compile in a thread where mark_dynamic pushed its mode: plain graphs still compile
    and run (the mode passes calls without a length straight through)."""
    torch_tpu.mark_dynamic(torch.randn(2, 5), 1)
    torch._dynamo.reset()
    f = torch.compile(lambda a: (a * 2).sum(0), backend="tpu")
    x = torch.randn(3, 4)
    torch.testing.assert_close(f(x.to("tpu")).cpu(), (x * 2).sum(0))
    torch._dynamo.reset()


def test_hf_llama_trains_over_lengths_in_fused_mode():
    """A Hugging Face Llama (tiny config) with its own loss: rotary positions from
    arange(past, past + T), the KV cache's cat, the loss's F.pad of the labels, GQA SDPA all run
    padded (no fallback); loss, logits and every gradient equal CPU; one bucket, one program set."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    ref = transformers.AutoModelForCausalLM.from_config(cfg)
    m = copy.deepcopy(ref).to("tpu")
    fallbacks0 = dict(torch_tpu.metrics().get("dynamic", {}).get("fallbacks", {}))
    misses = []
    for T in (9, 12, 15):
        x = torch.randint(0, 64, (2, T))
        ref.zero_grad(set_to_none=True)
        m.zero_grad(set_to_none=True)
        out_r = ref(input_ids=x, labels=x)
        out_r.loss.backward()
        with torch_tpu.eager_mode(FUSED), torch_tpu.precision(HIGHEST):
            xd = torch_tpu.mark_dynamic(x, 1).to("tpu")
            m0 = _misses()
            out = m(input_ids=xd, labels=xd)
            out.loss.backward()
            lv = out.loss.item()
        misses.append(_misses() - m0)
        assert lv == pytest.approx(out_r.loss.item(), abs=2e-6, rel=1e-5)
        torch.testing.assert_close(out.logits.cpu(), out_r.logits.detach(), atol=2e-5, rtol=1e-5)
        for (k, p), q in zip(m.named_parameters(), ref.parameters()):
            if q.grad is not None:
                torch.testing.assert_close(p.grad.cpu(), q.grad, atol=1e-5 * q.grad.abs().max().item() + 1e-9,
                                           rtol=1e-4, msg=lambda s, k=k, T=T: f"grad of {k} at length {T}: {s}")
    assert misses[0] > 0 and misses[1:] == [0, 0], misses
    assert torch_tpu.metrics()["dynamic"]["fallbacks"] == fallbacks0


def _param_grads(m):
    return {n: p.grad.detach().cpu() for n, p in m.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("mode,lengths", [(FUSED, range(17, 117)), (STRICT, range(25, 49))], ids=["fused", "strict"])
def test_gpt_train_loop_over_lengths(mode, lengths):
    """GPT (examples/gpt.py, tiny) trained one SGD step per length (fused: the 100 lengths
    17..116) in eager with the batch marked dynamic: loss, logits and every gradient equal CPU at
    each step; programs are compiled only by the first step and the first step of a new bucket."""
    torch.manual_seed(0)
    cfg = gpt.Config(vocab=16, ctx=128, width=16, layers=2, heads=2)
    ref = gpt.GPT(cfg)
    m = copy.deepcopy(ref).to("tpu")
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_m = torch.optim.SGD(m.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    misses = []
    fallbacks0 = dict(torch_tpu.metrics()["dynamic"]["fallbacks"]) if "dynamic" in torch_tpu.metrics() else {}
    for T in lengths:
        x = torch.randint(0, 16, (3, T), generator=gen)
        y = torch.randint(0, 16, (3, T), generator=gen)
        y[0, :2] = -1  # ignore_index in the model's loss
        logits_r, loss_r = ref(x, y)
        loss_r.backward()
        m0 = _misses()
        with torch_tpu.eager_mode(mode), torch_tpu.precision(HIGHEST):
            xd, yd = (torch_tpu.mark_dynamic(v, 1).to("tpu") for v in (x, y))
            logits, loss = m(xd, yd)
            loss.backward()
            opt_m.step()
            lv = loss.item()
        misses.append(_misses() - m0)
        assert logits.shape == logits_r.shape
        assert lv == pytest.approx(loss_r.item(), abs=2e-6, rel=1e-5)
        torch.testing.assert_close(logits.cpu(), logits_r.detach(), atol=2e-5, rtol=1e-5)
        gr = _param_grads(ref)
        gm = {n: p.grad.detach().cpu() for n, p in m.named_parameters()}
        assert gr.keys() == gm.keys()
        for k in gr:
            scale = gr[k].abs().max().item()
            torch.testing.assert_close(gm[k], gr[k], atol=1e-5 * scale + 1e-9, rtol=1e-4,
                                       msg=lambda s, k=k, T=T: f"grad of {k} at length {T}: {s}")
        opt_r.step()
        opt_r.zero_grad(set_to_none=True)
        opt_m.zero_grad(set_to_none=True)
    firsts = [i for i, T in enumerate(lengths) if i == 0 or (T - 1) & (T - 2) == 0]  # T - 1: a power of two
    assert all(misses[i] > 0 for i in firsts), misses
    assert sum(v for i, v in enumerate(misses) if i not in firsts) == 0, misses
    if mode is FUSED:
        assert sum(misses) - misses[0] <= 24
    assert torch_tpu.metrics()["dynamic"]["fallbacks"] == fallbacks0
