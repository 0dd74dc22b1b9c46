"""Custom kernels: JAX / Pallas functions as tpu ops (torch_tpu.kernel.from_jax) and IR-built
torch.library ops (torch_tpu.kernel.ir), forward and backward against PyTorch on CPU, in every
eager mode and under torch.compile. The JAX tests skip without JAX (`make jax` installs it)."""
import functools
import importlib.util
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import kernel

needs_jax = pytest.mark.skipif(not kernel.jax_available(), reason=kernel.JAX_INSTALL_HINT)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {"debug": torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING,
         "strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE}


@functools.cache
def _example():
    spec = importlib.util.spec_from_file_location("pallas_kernel", os.path.join(ROOT, "examples", "pallas_kernel.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _close(got, want, rel=1e-5):
    got = got.detach().cpu()
    scale = max(want.abs().max().item(), 1.0)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert (got - want.detach()).abs().max().item() <= rel * scale, (got, want)


@needs_jax
@pytest.mark.parametrize("mode", sorted(MODES))
def test_jnp_function_forward_backward_matches_cpu(mode):
    import jax.numpy as jnp

    @kernel.from_jax
    def f(x, w):
        h = jnp.tanh(x @ w)
        return h.sum(0), (x * jnp.exp(-x), jnp.maximum(h, 0.1))

    torch.manual_seed(0)
    x, w = torch.randn(6, 5), torch.randn(5, 4)
    xd, wd = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
    with torch_tpu.eager_mode(MODES[mode]), torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        a, (b, c) = f(xd, wd)
        (a.sum() + (b * 2).sum() + (c * c).sum()).backward()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    h = torch.tanh(xc @ wc)
    ra, rb, rc = h.sum(0), xc * torch.exp(-xc), torch.maximum(h, torch.tensor(0.1))
    (ra.sum() + (rb * 2).sum() + (rc * rc).sum()).backward()
    for got, want in ((a, ra), (b, rb), (c, rc), (xd.grad, xc.grad), (wd.grad, wc.grad)):
        _close(got, want)


@needs_jax
def test_integer_inputs_bf16_and_retrace_per_signature():
    import jax.numpy as jnp

    k = kernel.from_jax(lambda x, i: (x.astype(jnp.float32) * i).astype(jnp.bfloat16), name="scale")
    x = torch.randn(3, 4).to(torch.bfloat16)
    i = torch.arange(4, dtype=torch.int32)
    _close(k(x.to("tpu"), i.to("tpu")), (x.float() * i).to(torch.bfloat16))
    x2 = torch.randn(2, 4).to(torch.bfloat16)
    _close(k(x2.to("tpu"), i.to("tpu")), (x2.float() * i).to(torch.bfloat16))
    assert len(k._cache) == 2  # one trace and import per signature
    xd = x.to("tpu").requires_grad_()
    k(xd, i.to("tpu")).float().sum().backward()  # the integer input gets no gradient
    _close(xd.grad, i.to(torch.bfloat16).expand(3, 4).contiguous())


@needs_jax
def test_user_backward():
    import jax.numpy as jnp

    # a deliberately different backward shows that it is the one used
    k = kernel.from_jax(lambda x: jnp.sin(x), backward=lambda x, g: g * 2.0, name="sin2")
    x = torch.randn(5)
    xd = x.to("tpu").requires_grad_()
    k(xd).sum().backward()
    _close(xd.grad, torch.full((5,), 2.0))


@needs_jax
def test_pallas_model_eager_and_compile_match_cpu():
    ex = _example()
    for compile_ in (False, True):
        errs = ex.check_model(compile_=compile_, n=32, d=32, hidden=64)
        assert errs["forward"] < 1e-5, errs
        for k, v in errs.items():  # weighted-sum gradients are O(100): 1e-5 relative
            assert v < 2e-3, (compile_, k, errs)


@needs_jax
def test_pallas_flash_attention_matches_cpu():
    errs = _example().check_attention(t=32, d=16)
    assert max(errs.values()) < 1e-5, errs


@needs_jax
def test_compile_keeps_the_kernel_in_one_graph():
    import jax.numpy as jnp

    k = kernel.from_jax(lambda x: jnp.cumsum(x * 2, axis=0), name="cs")
    x = torch.randn(8, 3, device="tpu")
    fn = lambda x: k(x.relu()) + 1  # noqa: E731
    explain = torch._dynamo.explain(fn)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    torch._dynamo.reset()
    _close(torch.compile(fn, backend="tpu")(x), torch.cumsum(x.cpu().relu() * 2, 0) + 1)


@needs_jax
def test_pallas_matmul_imports_as_static_tiles():
    ex = _example()
    a, b = torch.randn(128, 64), torch.randn(64, 128)
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        _close(ex.tpu_matmul(a.to("tpu"), b.to("tpu")), a @ b)
    text = ex.tpu_matmul.stablehlo(a.to("tpu"), b.to("tpu"))
    # the 2x2x1 grid unrolled into four 64x64x64 tile dots; no gathers, no loops
    assert text.count("stablehlo.dot_general") == 4
    assert "gather" not in text and "while" not in text


@needs_jax
def test_data_dependent_loop_is_a_clear_error():
    import jax

    k = kernel.from_jax(lambda x: jax.lax.while_loop(lambda c: c[0].sum() < 10, lambda c: (c[0] * 2,), (x,))[0],
                        name="loop")
    with pytest.raises(NotImplementedError, match=r"unsupported op 'stablehlo.while' at line \d+: its trip count"):
        k(torch.ones(3, device="tpu"))


@needs_jax
def test_wrong_argument_is_a_clear_error():
    import jax.numpy as jnp

    k = kernel.from_jax(lambda x: jnp.exp(x), name="e")
    with pytest.raises(TypeError, match="expected a tensor"):
        k(1.0)


def test_without_jax_from_jax_says_how_to_install():
    code = ("import sys; sys.modules['jax'] = None\n"
            "import torch_tpu.kernel as k; k.JAX_SITE = '/nonexistent'\n"
            "try:\n    k.from_jax(lambda x: x)\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "make jax" in out.stdout, out.stdout + out.stderr


# ---- torch.library custom ops with an IR implementation (no JAX needed) ----------------------
from torch_tpu.kernel import ir  # noqa: E402


@ir.kernel
def _swish_ir(b, x):
    return x * b.logistic(x)


@ir.kernel
def _swish_grad_ir(b, x, g):  # d/dx x s(x) = s(x) (1 + x (1 - s(x)))
    s = b.logistic(x)
    return g * s * (1.0 + x * (1.0 - s))


@ir.kernel
def _rownorm_ir(b, x, w):  # x / max(|x|) per row, times w; and the row maxima
    m = b.reduce(b.abs(x), [1], "maximum")
    y = x / b.reshape(m, [x.shape[0], 1]) * w
    return y, m


@torch.library.custom_op("torch_tpu_test::swish", mutates_args=())
def swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


@torch.library.custom_op("torch_tpu_test::swish_grad", mutates_args=())
def swish_grad(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return g * s * (1 + x * (1 - s))


swish.register_kernel("tpu")(_swish_ir)
swish_grad.register_kernel("tpu")(_swish_grad_ir)
swish.register_fake(lambda x: torch.empty_like(x))
swish_grad.register_fake(lambda x, g: torch.empty_like(x))


def _swish_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


swish.register_autograd(lambda ctx, g: swish_grad(ctx.saved_tensors[0], g), setup_context=_swish_setup)


@pytest.mark.parametrize("mode", sorted(MODES) + ["compile"])
def test_library_custom_op_with_ir_kernel(mode):
    torch.manual_seed(0)
    x = torch.randn(4, 7)
    xd = x.to("tpu").requires_grad_()
    f = (lambda t: swish(t * 2).sum(0))
    if mode == "compile":
        torch._dynamo.reset()
        y = torch.compile(f, backend="tpu")(xd)
    else:
        with torch_tpu.eager_mode(MODES[mode]):
            y = f(xd)
    (y * torch.arange(7.0, device="tpu")).sum().backward()
    xc = x.clone().requires_grad_()
    yc = f(xc)
    (yc * torch.arange(7.0)).sum().backward()
    _close(y, yc)
    _close(xd.grad, xc.grad)


def test_ir_kernel_reduce_broadcast_and_two_outputs():
    x, w = torch.randn(3, 5), torch.randn(5)
    y, m = _rownorm_ir(x.to("tpu"), w.to("tpu"))
    mc = x.abs().amax(1)
    _close(m, mc)
    _close(y, x / mc[:, None] * w)
    assert "stablehlo.reduce" in _rownorm_ir.stablehlo(x.to("tpu"), w.to("tpu"))


def test_ir_kernel_matmul_follows_precision():
    @ir.kernel
    def mm(b, a, c):
        return b.dot_general(a, c)

    a, c = torch.randn(8, 16), torch.randn(16, 4)
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        _close(mm(a.to("tpu"), c.to("tpu")), a @ c)


def test_ir_kernel_bad_op_is_a_clear_error():
    @ir.kernel
    def bad(b, x):
        return b.op("stablehlo.popcnt", x)

    with pytest.raises(NotImplementedError, match=r"unsupported op 'stablehlo.popcnt' at line \d+"):
        bad(torch.ones(3, device="tpu"))


@needs_jax
def test_jnp_indexing_imports_as_gather():
    import jax.numpy as jnp

    k = kernel.from_jax(lambda x, i, j: (x[i], jnp.take(x, j, axis=1)), name="index")
    x = torch.randn(10, 4)
    i = torch.tensor([[0, 9], [-1, 3], [5, 5]], dtype=torch.int32)
    j = torch.tensor([3, 0, 1], dtype=torch.int32)
    a, b = k(x.to("tpu"), i.to("tpu"), j.to("tpu"))
    _close(a, x[i.long()])
    _close(b, x[:, j.long()])


@pytest.mark.parametrize("mode", sorted(MODES) + ["compile"])
def test_optimization_barrier_is_the_identity_forward_and_backward(mode):
    """torch.tpu.ops.optimization_barrier (TorchTPU's name): values and gradients pass through,
    one tensor, several, or a list; the graph keeps the barrier (XLA must not fuse across it)."""
    ob = torch.tpu.ops.optimization_barrier
    torch.manual_seed(0)
    x, w = torch.randn(5, 6), torch.randn(6)

    def f(t, v):
        a = ob(t.exp())
        b, c = ob(a * v, t.sin())
        (d,) = ob([b + c])
        return (d * a).sum(1)

    xd, wd = x.to("tpu").requires_grad_(), w.to("tpu").requires_grad_()
    if mode == "compile":
        torch._dynamo.reset()
        y = torch.compile(f, backend="tpu")(xd, wd)
    else:
        with torch_tpu.eager_mode(MODES[mode]):
            y = f(xd, wd)
    y.sum().backward()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    yc = f(xc, wc)
    yc.sum().backward()
    _close(y, yc)
    _close(xd.grad, xc.grad)
    _close(wd.grad, wc.grad)
    if mode == "fused":
        with torch_tpu.eager_mode(MODES[mode]):
            z = ob(xd.detach().exp()) + 1
            assert torch_tpu._C._pending_stablehlo(0, [z]).count('"stablehlo.optimization_barrier"') == 1
            _close(z, x.exp() + 1)
    with pytest.raises(TypeError, match=r"\[optimization_barrier\] expects tensors"):
        ob(xd, 3)
