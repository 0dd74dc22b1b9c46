"""FlexAttention on tpu (torch_tpu/_internal/flex_attention.py): `flex_attention` with
`score_mod`, `mask_mod` / `create_block_mask(device="tpu")`, GQA and `return_lse`, forward
and backward, against a dense float64 reference on CPU (the mods evaluated on broadcast index
tensors, autograd for the gradients), eagerly in the strict, fused and debug modes and under
a plain `torch.compile` and `torch.compile(backend="tpu")`; matmuls at HIGHEST. Also: block
structure honoured as the Triton kernel does (a hand-made BlockMask), autocast, bad input."""
import math

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

import torch_tpu
from torch_tpu import EagerMode
from torch_tpu._internal import flex_attention as tpu_flex

torch.nn.attention.flex_attention._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = False
WINDOW = 24


def causal(b, h, q, kv):
    return q >= kv


def sliding(b, h, q, kv):
    return (q >= kv) & (q - kv <= WINDOW)


def alibi(score, b, h, q, kv):
    slope = torch.exp2(-(h + 1).to(torch.float32) * 0.5)
    return score - slope * (q - kv).abs()


def softcap(score, b, h, q, kv):
    return 20.0 * torch.tanh(score / 20.0)


def _doc_ids(S, device):
    ids = torch.zeros(S, dtype=torch.int64)
    for cut in (S // 5, S // 2, (4 * S) // 5):
        ids[cut:] += 1
    return ids.to(device)


def _document(device, S):
    docs = _doc_ids(S, device)

    def document(b, h, q, kv):
        return (docs[q] == docs[kv]) & (q >= kv)
    return document


CASES = {  # name -> (score_mod, mask_mod factory)
    "causal": (None, lambda dev, S: causal),
    "sliding": (None, lambda dev, S: sliding),
    "alibi": (alibi, lambda dev, S: causal),
    "softcap_full": (softcap, None),
    "document": (None, _document),
}


def _reference(q, k, v, do, score_mod, mask_mod, scale=None, gqa=False):
    """Dense float64 attention on CPU: out, lse (natural log) and q/k/v gradients."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    B, H, L, E = q.shape
    G = H // k.shape[1]
    kk = k.repeat_interleave(G, 1) if gqa else k
    vv = v.repeat_interleave(G, 1) if gqa else v
    s = q @ kk.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(E))
    b = torch.arange(B).view(-1, 1, 1, 1)
    h = torch.arange(H).view(1, -1, 1, 1)
    m = torch.arange(L).view(1, 1, -1, 1)
    n = torch.arange(k.shape[2]).view(1, 1, 1, -1)
    if score_mod is not None:
        s = score_mod(s, b, h, m, n)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, m, n).expand_as(s), -math.inf)
    lse = torch.logsumexp(s, -1)
    out = torch.softmax(s, -1).nan_to_num(0.0) @ vv
    out.backward(do.double())
    return out, lse, q.grad, k.grad, v.grad


def _inputs(B, H, Hkv, L, S, E, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, L, E, generator=g)
    k = torch.randn(B, Hkv, S, E, generator=g)
    v = torch.randn(B, Hkv, S, E, generator=g)
    do = torch.randn(B, H, L, E, generator=g)
    return q, k, v, do


def _tpu_run(fn, q, k, v, do, score_mod, block_mask, **kw):
    leaves = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    out, lse = fn(*leaves, score_mod=score_mod, block_mask=block_mask, return_lse=True, **kw)
    out.backward(do.to("tpu"))
    return [out.detach().cpu(), lse.detach().cpu()] + [t.grad.cpu() for t in leaves]


def _assert_matches(got, want):
    names = ["out", "lse", "dq", "dk", "dv"]
    for name, g, w in zip(names, got, want):
        w = w.detach().float()
        assert g.shape == w.shape, (name, g.shape, w.shape)
        if name == "lse":
            finite = torch.isfinite(w)
            assert torch.equal(torch.isfinite(g), finite), name
            g, w = g[finite], w[finite]
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4 * max(1.0, w.abs().max().item()), msg=name)


def _case(name, L, S, dev):
    score_mod, mask_factory = CASES[name]
    mask_mod = mask_factory(dev, S) if mask_factory else None
    return score_mod, mask_mod


MODES = {"strict": EagerMode.DEFER_NEVER, "fused": EagerMode.DEFER_AND_FUSE,
         "debug": EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("mode", list(MODES))
def test_eager_matches_float64_reference(name, mode):
    B, H, L, S, E = 2, 2, 80, 80, 16
    q, k, v, do = _inputs(B, H, H, L, S, E)
    score_mod, mask_cpu = _case(name, L, S, "cpu")
    _, mask_tpu = _case(name, L, S, "tpu")
    want = _reference(q, k, v, do, score_mod, mask_cpu)
    before = tpu_flex.stats()
    with torch_tpu.eager_mode(MODES[mode]), torch_tpu.precision("highest"):
        bm = create_block_mask(mask_tpu, B, H, L, S, device="tpu", BLOCK_SIZE=32) if mask_tpu else None
        got = _tpu_run(flex_attention, q, k, v, do, score_mod, bm)
    _assert_matches(got, want)
    after = tpu_flex.stats()
    assert after["forward"] > before["forward"] and after["backward"] > before["backward"]


@pytest.mark.parametrize("name", ["causal", "alibi", "document"])
@pytest.mark.parametrize("how", ["plain", "tpu"])
def test_compiled_matches_float64_reference(name, how):
    torch._dynamo.reset()
    B, H, L, S, E = 1, 2, 64, 64, 16
    q, k, v, do = _inputs(B, H, H, L, S, E, seed=1)
    score_mod, mask_cpu = _case(name, L, S, "cpu")
    _, mask_tpu = _case(name, L, S, "tpu")
    want = _reference(q, k, v, do, score_mod, mask_cpu)
    fn = torch.compile(flex_attention) if how == "plain" else torch.compile(flex_attention, backend="tpu")
    from torch_tpu._internal import compile as tpu_compile

    before, calls = tpu_compile.stats(), tpu_flex.stats()
    with torch_tpu.precision("highest"):
        bm = create_block_mask(mask_tpu, B, H, L, S, device="tpu", BLOCK_SIZE=16)
        got = _tpu_run(fn, q, k, v, do, score_mod, bm)
    _assert_matches(got, want)
    after = tpu_compile.stats()
    # our backend captured the forward and the backward graph, the mods inside the IR graph,
    # whatever the call site asked for (AOTAutograd's graphs may come from the disk cache)
    assert after["captures"] >= before["captures"] + 2, (before, after)
    assert tpu_flex.stats()["forward"] > calls["forward"] and tpu_flex.stats()["backward"] > calls["backward"]


def test_compiled_module_inside_model():
    """flex_attention inside a compiled module, the way TorchTitan's attention calls it."""
    torch._dynamo.reset()

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(32, 96)

        def forward(self, x, bm):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, 2, 16).permute(2, 0, 3, 1, 4)
            return flex_attention(q, k, v, block_mask=bm).transpose(1, 2).reshape(B, T, 32)

    torch.manual_seed(0)
    m = Attn()
    x = torch.randn(2, 48, 32)
    mt = Attn().to("tpu")
    mt.load_state_dict(m.state_dict())
    with torch_tpu.precision("highest"):
        bm = create_block_mask(causal, None, None, 48, 48, device="tpu", BLOCK_SIZE=16)
        y = torch.compile(mt, backend="tpu")(x.to("tpu"), bm)
        y.sum().backward()
    # reference: the same module on CPU through sdpa's causal path
    B, T, _ = x.shape
    q, k, v = m.qkv(x).view(B, T, 3, 2, 16).permute(2, 0, 3, 1, 4)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, 32)
    ref.sum().backward()
    torch.testing.assert_close(y.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mt.qkv.weight.grad.cpu(), m.qkv.weight.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv_batch", [2, 1])
def test_gqa(kv_batch):
    B, H, Hkv, L, S, E = 2, 4, 2, 40, 56, 8
    q, k, v, do = _inputs(B, H, Hkv, L, S, E, seed=3)
    k, v = k[:kv_batch], v[:kv_batch]
    bm_cpu = None
    want = _reference(q, k.expand(B, -1, -1, -1), v.expand(B, -1, -1, -1), do, alibi, causal, gqa=True)
    with torch_tpu.precision("highest"):
        bm = create_block_mask(causal, B, H, L, S, device="tpu", BLOCK_SIZE=8)
        got = _tpu_run(flex_attention, q, k, v, do, alibi, bm, enable_gqa=True)
    if kv_batch == 1:  # gradients of broadcast k/v are summed over the batch
        want = list(want[:3]) + [want[3].sum(0, keepdim=True), want[4].sum(0, keepdim=True)]
    _assert_matches(got, want)
    del bm_cpu


def test_no_mask_no_score_mod_and_scale():
    B, H, L, S, E = 1, 3, 33, 47, 8
    q, k, v, do = _inputs(B, H, H, L, S, E, seed=4)
    want = _reference(q, k, v, do, None, None, scale=0.3)
    with torch_tpu.precision("highest"):
        got = _tpu_run(flex_attention, q, k, v, do, None, None, scale=0.3)
    _assert_matches(got, want)


def test_block_structure_is_honoured():
    """A hand-made BlockMask: key block 1 of query block 1 is not listed (skipped although its
    mask_mod allows it), key block 0 of query block 1 is a full block (mask_mod not applied
    there, as in the Triton kernel)."""
    L = S = 16
    B, H, E = 1, 1, 8
    q, k, v, do = _inputs(B, H, H, L, S, E, seed=5)
    kv_num = torch.tensor([[[1, 0]]], dtype=torch.int32)
    kv_idx = torch.tensor([[[0, 1], [0, 1]]], dtype=torch.int32).view(1, 1, 2, 2)
    full_num = torch.tensor([[[0, 1]]], dtype=torch.int32)
    full_idx = torch.tensor([[[1, 0], [0, 1]]], dtype=torch.int32).view(1, 1, 2, 2)

    def never(b, h, q_, kv):
        return q_ < 0  # would mask everything: only the listed partial block (0, 0) calls it

    def make(dev):
        return BlockMask.from_kv_blocks(kv_num.to(dev), kv_idx.to(dev), full_num.to(dev), full_idx.to(dev),
                                        BLOCK_SIZE=8, mask_mod=never, seq_lengths=(L, S))

    def mask_ref(b, h, m, n):  # what the block mask means element by element
        return (m >= 8) & (n < 8)

    want = _reference(q, k, v, do, None, mask_ref)
    with torch_tpu.precision("highest"):
        got = _tpu_run(flex_attention, q, k, v, do, None, make("tpu"))
    _assert_matches(got, want)  # rows 0..7 are fully masked: out 0, lse -inf, no gradient


def test_bf16_autocast_close_to_cpu():
    B, H, L, E = 1, 2, 32, 16
    q, k, v, _ = _inputs(B, H, H, L, L, E, seed=6)
    bm = create_block_mask(causal, B, H, L, L, device="tpu", BLOCK_SIZE=16)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), block_mask=bm)
    assert out.dtype == torch.bfloat16
    want = _reference(q, k, v, torch.zeros_like(q), None, causal)[0].float()
    torch.testing.assert_close(out.float().cpu(), want, rtol=3e-2, atol=3e-2)


def test_bad_input_names_flex_attention():
    q = torch.randn(1, 2, 16, 8, device="tpu")
    bm_cpu = create_block_mask(causal, 1, 2, 16, 16, device="cpu", BLOCK_SIZE=8)
    with pytest.raises(RuntimeError, match="block_mask"):
        flex_attention(q, q, q, block_mask=bm_cpu)
    bm = create_block_mask(causal, 1, 2, 32, 32, device="tpu", BLOCK_SIZE=8)
    with pytest.raises(RuntimeError, match="block_mask was created for a larger length"):
        flex_attention(q, q, q, block_mask=bm)  # a mask made for other sequence lengths
    with pytest.raises(ValueError, match="device"):
        flex_attention(q, q.cpu(), q.cpu())

    def untraceable(b, h, q_, kv):
        return bool(q_ > kv)  # data-dependent Python control flow

    with pytest.raises(RuntimeError, match=r"\[flex_attention\] create_block_mask could not evaluate mask_mod 'untraceable'"):
        create_block_mask(untraceable, 1, 2, 16, 16, device="tpu")

    def untraceable_score(s, b, h, q_, kv):
        return s if q_.item() > 3 else -s

    with pytest.raises(RuntimeError, match=r"\[flex_attention\] score_mod / mask_mod could not be traced"):
        flex_attention(q, q, q, score_mod=untraceable_score)
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]  # the device keeps working


@pytest.mark.parametrize("block", [(16, 32), (32, 8)], ids=["q16-kv32", "q32-kv8"])
def test_rectangular_blocks_and_lengths(block):
    """Q and KV block sizes differ, L != S, lengths not multiples of the blocks; a mask with
    full, partial and empty blocks (sliding window on a shifted diagonal)."""
    B, H, L, S, E = 1, 2, 72, 100, 8
    q, k, v, do = _inputs(B, H, H, L, S, E, seed=7)

    def shifted_window(b, h, q_, kv):
        return (kv <= q_ + 20) & (kv >= q_ - 10)

    want = _reference(q, k, v, do, None, shifted_window)
    with torch_tpu.precision("highest"):
        bm = create_block_mask(shifted_window, B, H, L, S, device="tpu", BLOCK_SIZE=block)
        got = _tpu_run(flex_attention, q, k, v, do, None, bm)
    _assert_matches(got, want)


@pytest.mark.parametrize("how", ["eager", "compile"])
def test_score_mod_with_a_learned_bias_gets_its_gradient(how):
    """A score_mod reading a tensor that requires grad (a learned relative-position bias, as
    T5-style models add): its gradient comes back through the joint graph, as on CPU's math."""
    torch._dynamo.reset()
    B, H, L, E = 1, 2, 24, 8
    q, k, v, do = _inputs(B, H, H, L, L, E, seed=8)
    table = torch.randn(H, 2 * L - 1, generator=torch.Generator().manual_seed(9))

    def run(dev):
        bias = table.clone().to(dev).requires_grad_()

        def rel_bias(score, b, h, q_, kv):
            return score + bias[h, q_ - kv + L - 1]

        leaves = [t.detach().to(dev).requires_grad_() for t in (q, k, v)]
        if dev == "cpu":  # reference: dense float64 with the same bias
            hh = torch.arange(H).view(1, -1, 1, 1)
            m = torch.arange(L).view(1, 1, -1, 1)
            n = torch.arange(L).view(1, 1, 1, -1)
            qq, kk, vv = (t.double() for t in leaves)
            s = qq @ kk.transpose(-2, -1) / math.sqrt(E) + bias.double()[hh, m - n + L - 1]
            out = torch.softmax(s, -1) @ vv
        else:
            fn = torch.compile(flex_attention, backend="tpu") if how == "compile" else flex_attention
            out = fn(*leaves, score_mod=rel_bias)
        out.backward(do.to(dev).to(out.dtype))
        assert bias.grad is not None and all(t.grad is not None for t in leaves), (dev, bias.grad is None, [t.grad is None for t in leaves])
        return [out.detach().float().cpu(), bias.grad.float().cpu()] + [t.grad.float().cpu() for t in leaves]

    want = run("cpu")
    with torch_tpu.precision("highest"):
        got = run("tpu")
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
