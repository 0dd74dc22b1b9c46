"""scaled_dot_product_attention's fused tpu op (csrc/lowering/from_aten/attention.cpp; the host
kernel runtime/host/attention.cpp, on pjrt its StableHLO expansion): forward and backward
against PyTorch CPU in the strict, fused and debug eager modes and under torch.compile (GQA too: k and
v heads expanded in the graph); the problems it does not take (masks, dropout, f64,
sdpa_kernel(MATH)) take the math path and stay correct."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import profile

import torch_tpu
from torch_tpu import EagerMode

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
FUSED_BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


def _ops(fn):
    with profile() as p:
        fn()
        torch.tpu.synchronize()
    return {e.name for e in p.events()}


def _inputs(B, H, L, S, E, Ev, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, L, H, E, generator=g).transpose(1, 2)  # a view, as a model's heads are
    k = torch.randn(B, H, S, E, generator=g)
    v = torch.randn(B, H, S, Ev, generator=g)
    do = torch.randn(B, H, L, Ev, generator=g)
    return [t.to(dtype) for t in (q, k, v, do)]


def _run(q, k, v, do, dev, **kw):
    leaves = [t.detach().to(dev).requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, **kw)
    out.backward(do.to(dev))
    return [out] + [t.grad for t in leaves]


SHAPES = [(2, 4, 128, 128, 32, 32), (1, 2, 70, 100, 16, 24), (2, 1, 100, 70, 8, 8), (1, 1, 1, 5, 4, 4),
          (1, 3, 65, 65, 8, 8)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_matches_cpu_at_highest(shape, causal):
    q, k, v, do = _inputs(*shape)
    want = _run(q, k, v, do, "cpu", is_causal=causal)
    with torch_tpu.precision("highest"):
        names = _ops(lambda: got.extend(_run(q, k, v, do, "tpu", is_causal=causal)))
    assert FUSED in names and FUSED_BWD in names
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, atol=2e-5, rtol=2e-5)


got = []


@pytest.fixture(autouse=True)
def _clear():
    got.clear()
    yield
    got.clear()


def test_output_and_grads_keep_the_query_layout():
    q, k, v, do = _inputs(2, 4, 16, 16, 8, 8)
    out, dq, dk, dv = _run(q, k, v, do, "tpu", is_causal=True)
    assert out.stride() == q.transpose(1, 2).contiguous().transpose(1, 2).stride()  # heads-inner, as q
    assert dq.stride() == out.stride() and dk.is_contiguous() and dv.is_contiguous()
    # a model's next op views the heads back: needs those strides
    assert out.transpose(1, 2).view(2, 16, 32).shape == (2, 16, 32)


@pytest.mark.parametrize("dtype,prec,tol", [(torch.float32, "default", 3e-2), (torch.bfloat16, "highest", 8e-2)],
                         ids=["f32-default", "bf16"])
def test_default_precision_and_bf16_within_bf16_error(dtype, prec, tol):
    q, k, v, do = _inputs(2, 4, 96, 96, 16, 16)
    want = _run(q, k, v, do, "cpu", is_causal=True)
    with torch_tpu.precision(prec):
        names = _ops(lambda: got.extend(_run(q.to(dtype), k.to(dtype), v.to(dtype), do.to(dtype), "tpu", is_causal=True)))
    assert FUSED in names
    for g, w in zip(got, want):
        assert g.dtype == dtype
        torch.testing.assert_close(g.float().cpu(), w, atol=tol, rtol=tol)


@pytest.mark.parametrize("mode", [EagerMode.DEFER_AND_FUSE, EagerMode.DEFER_NEVER], ids=["fused", "debug-or-strict"])
def test_eager_modes(mode):
    q, k, v, do = _inputs(2, 2, 40, 40, 8, 8)
    want = _run(q, k, v, do, "cpu", is_causal=True)
    with torch_tpu.precision("highest"), torch_tpu.eager_mode(mode):
        out = _run(q, k, v, do, "tpu", is_causal=True)
    for g, w in zip(out, want):
        torch.testing.assert_close(g.cpu(), w, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("mode", [EagerMode.DEFER_NEVER, EagerMode.DEFER_AND_FUSE], ids=["strict", "fused"])
@pytest.mark.parametrize("layout", ["heads-inner", "heads-outer"])
def test_gqa_takes_the_kernel(layout, mode, causal):
    """enable_gqa with 6 query heads over 2 key/value heads (each serves 3, repeat_interleave's
    order): the kernel, not the math path; k and v gradients summed over the heads they served."""
    g = torch.Generator().manual_seed(3)
    B, L, S, E = 2, 9, 13, 8
    if layout == "heads-inner":  # as a model's projections split into heads
        q = torch.randn(B, L, 6, E, generator=g).transpose(1, 2)
        k, v = (torch.randn(B, S, 2, E, generator=g).transpose(1, 2) for _ in range(2))
    else:
        q = torch.randn(B, 6, L, E, generator=g)
        k, v = (torch.randn(B, 2, S, E, generator=g) for _ in range(2))
    do = torch.randn(B, 6, L, E, generator=g)
    want = _run(q, k, v, do, "cpu", is_causal=causal, enable_gqa=True)
    with torch_tpu.precision("highest"), torch_tpu.eager_mode(mode):
        names = _ops(lambda: got.extend(_run(q, k, v, do, "tpu", is_causal=causal, enable_gqa=True)))
    assert FUSED in names and FUSED_BWD in names
    for a, w in zip(got, want):
        assert a.shape == w.shape
        torch.testing.assert_close(a.cpu(), w, atol=2e-5, rtol=2e-5)


def test_gqa_compiled():
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 7, 8, generator=g)
    k, v = (torch.randn(1, 2, 7, 8, generator=g) for _ in range(2))
    do = torch.randn(1, 4, 7, 8, generator=g)
    want = _run(q, k, v, do, "cpu", is_causal=True, enable_gqa=True)
    f = torch.compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True, enable_gqa=True),
                      backend="tpu")
    leaves = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    with torch_tpu.precision("highest"):
        out = f(*leaves)
        out.backward(do.to("tpu"))
    for a, w in zip([out] + [t.grad for t in leaves], want):
        torch.testing.assert_close(a.cpu(), w, atol=2e-5, rtol=2e-5)


def test_compiled_train_step_uses_the_kernel():
    import torch_tpu._internal.compile as tc

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(16, 48)

        def forward(self, x):
            b, t, w = x.shape
            q, k, v = self.qkv(x).split(w, dim=2)  # q, k, v not dense: strided views of one output
            q, k, v = (z.view(b, t, 2, 8).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).contiguous().view(b, t, w)

    torch.manual_seed(0)
    ref = Attn()
    m = Attn().to("tpu")
    m.load_state_dict(ref.state_dict())
    cm = torch.compile(m, backend="tpu")
    x = torch.randn(3, 24, 16)
    stats0 = tc.stats()
    with torch_tpu.precision("highest"):
        for _ in range(2):
            m.zero_grad()
            ref.zero_grad()
            out = cm(x.to("tpu"))
            out.square().sum().backward()
            want = ref(x)
            want.square().sum().backward()
            torch.testing.assert_close(out.cpu(), want, atol=2e-5, rtol=2e-5)
            torch.testing.assert_close(m.qkv.weight.grad.cpu(), ref.qkv.weight.grad, atol=1e-4, rtol=1e-4)
        names = _ops(lambda: cm(x.to("tpu")).sum().backward())
    assert tc.stats()["eager_calls"] == stats0["eager_calls"]  # captured graphs ran, not eager FX code
    # the captured graphs replay as one command each: the aten op is not dispatched again
    assert FUSED not in names


def test_compiled_graph_holds_the_fused_op():
    from torch._functorch.aot_autograd import aot_function

    graphs = []

    def keep(gm, _):
        graphs.append(str(gm.code))
        return gm

    from torch_tpu._internal.compile import _decompositions

    f = aot_function(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), fw_compiler=keep,
                     bw_compiler=keep, decompositions=_decompositions())
    q = torch.randn(1, 2, 8, 4, device="tpu", requires_grad=True)
    f(q, q, q).sum().backward()
    assert "_scaled_dot_product_fused_attention_overrideable" in graphs[0]
    assert "_scaled_dot_product_fused_attention_overrideable_backward" in graphs[1]


def _math_case(name):
    q, k, v, do = _inputs(1, 4, 12, 10, 8, 8, dtype=torch.float64 if name == "f64" else torch.float32)
    kw = {}
    if name == "mask":
        kw["attn_mask"] = torch.randn(12, 10) > 0
    if name == "float-mask":
        kw["attn_mask"] = torch.randn(1, 1, 12, 10)
    return q, k, v, do, kw


@pytest.mark.parametrize("name", ["mask", "float-mask", "f64", "sdpa_kernel-math"])
def test_other_problems_take_the_math_path(name):
    q, k, v, do, kw = _math_case(name)
    want = _run(q, k, v, do, "cpu", **kw)
    kw_dev = {a: (b.to("tpu") if isinstance(b, torch.Tensor) else b) for a, b in kw.items()}
    with torch_tpu.precision("highest"):
        if name == "sdpa_kernel-math":
            with sdpa_kernel([SDPBackend.MATH]):
                names = _ops(lambda: got.extend(_run(q, k, v, do, "tpu", **kw_dev)))
        else:
            names = _ops(lambda: got.extend(_run(q, k, v, do, "tpu", **kw_dev)))
    assert FUSED not in names
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu().to(w.dtype), w, atol=2e-5, rtol=2e-5)


def test_dropout_takes_the_math_path():
    q, k, v, _ = _inputs(1, 2, 8, 8, 4, 4)
    names = _ops(lambda: F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), dropout_p=0.5))
    assert FUSED not in names


def test_only_overrideable_enabled_raises_for_a_mask():
    q, k, v, _ = _inputs(1, 2, 8, 8, 4, 4)
    m = torch.ones(8, 8, dtype=torch.bool, device="tpu")
    with sdpa_kernel([SDPBackend.OVERRIDEABLE]), pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), attn_mask=m)


def test_capture_of_inputs_sharing_a_storage():
    """A compiled graph whose inputs view one storage (q, k, v saved from one projection) is
    captured; a call whose inputs share differently is captured again, and both are right
    (b's elements read here also lie inside a's view: replayed against two storages, the
    first capture would read them from a's)."""
    import torch_tpu._internal.compile as tc

    f = torch.compile(lambda a, b: a[:1, :2] * 2 + b[:1, :2], backend="tpu")
    base, other = torch.randn(3, 8), torch.randn(3, 8)
    bd, od = base.to("tpu"), other.to("tpu")
    s0 = tc.stats()
    torch.testing.assert_close(f(bd[:, :6], bd[:, 2:]).cpu(), base[:1, :2] * 2 + base[:1, 2:4])
    assert tc.stats()["captures"] == s0["captures"] + 1
    # the same layouts (offsets 0 and 2 of [3, 8] storages), now two storages
    torch.testing.assert_close(f(bd[:, :6], od[:, 2:]).cpu(), base[:1, :2] * 2 + other[:1, 2:4])
    assert tc.stats()["captures"] == s0["captures"] + 2
    torch.testing.assert_close(f(bd[:, :6], bd[:, 2:]).cpu(), base[:1, :2] * 2 + base[:1, 2:4])
    assert tc.stats()["eager_calls"] == s0["eager_calls"]


@pytest.mark.parametrize("case", ["bool-mask", "dynamic"])
def test_compiled_problems_the_kernel_does_not_take(case):
    """Under torch.compile the backend choice runs on fake tensors: a mask, or symbolic sizes
    (dynamic=True), must still take the math path (the overrideable op would refuse a mask)."""
    q, k, v, _ = _inputs(1, 2, 12, 12, 4, 4)
    mask = torch.rand(12, 12, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[:, 0] = True  # every row sees a key
    if case == "bool-mask":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.device))  # noqa: E731
        cf = torch.compile(fn, backend="tpu")
        args = [(q, k, v)]
    else:
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        cf = torch.compile(fn, backend="tpu", dynamic=True)
        args = [(q, k, v), (q[:, :, :9], k[:, :, :9], v[:, :, :9])]
    with torch_tpu.precision("highest"):
        for a in args:
            torch.testing.assert_close(cf(*[t.to("tpu") for t in a]).cpu(), fn(*a), atol=2e-5, rtol=2e-5)
