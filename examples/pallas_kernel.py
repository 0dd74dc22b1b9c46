"""Pallas kernels as tpu ops: a fused RMSNorm, a tiled matmul and a flash-attention-style
kernel written with jax.experimental.pallas (interpret=True: they lower to plain StableHLO,
which torch_tpu imports), used in a small model's forward and backward on tpu, compared with
the same model in PyTorch on CPU, eagerly and through torch.compile(backend="tpu"), and timed
next to the equivalent PyTorch ops on tpu.

    make jax && tools/in-env python3 examples/pallas_kernel.py [--bench]
"""
from __future__ import annotations

import argparse
import functools
import time

import torch

import torch_tpu
from torch_tpu import kernel

jax = kernel._import_jax()  # raises with the install hint (`make jax`) when JAX is missing
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

EPS = 1e-6


# ---- RMSNorm: one row block per grid step; backward is a Pallas kernel too --------------------
def _rms_fwd_kernel(x_ref, w_ref, o_ref):
    x = x_ref[...]
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)
    o_ref[...] = x * r * w_ref[...]


def _rms_bwd_kernel(x_ref, w_ref, g_ref, dx_ref, dw_ref):
    x, w, g = x_ref[...], w_ref[...], g_ref[...]
    r = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)
    gw = g * w
    dx_ref[...] = r * gw - x * (r ** 3) * jnp.mean(gw * x, axis=-1, keepdims=True)
    dw_ref[...] = jnp.sum(g * x * r, axis=0, keepdims=True)  # this block's share of dw


def _row_spec(br, d):
    return pl.BlockSpec((br, d), lambda i: (i, 0))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def rmsnorm(x, w, block_rows=8):
    n, d = x.shape
    return pl.pallas_call(_rms_fwd_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(n // block_rows,),
                          in_specs=[_row_spec(block_rows, d), pl.BlockSpec((d,), lambda i: (0,))],
                          out_specs=_row_spec(block_rows, d), interpret=True)(x, w)


def _rms_vjp_fwd(x, w, block_rows):
    return rmsnorm(x, w, block_rows), (x, w)


def _rms_vjp_bwd(block_rows, res, g):
    x, w = res
    n, d = x.shape
    nb = n // block_rows
    dx, dw = pl.pallas_call(
        _rms_bwd_kernel,
        out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((nb, d), x.dtype)),
        grid=(nb,),
        in_specs=[_row_spec(block_rows, d), pl.BlockSpec((d,), lambda i: (0,)), _row_spec(block_rows, d)],
        out_specs=(_row_spec(block_rows, d), pl.BlockSpec((1, d), lambda i: (i, 0))),
        interpret=True)(x, w, g)
    return dx, dw.sum(0)


rmsnorm.defvjp(_rms_vjp_fwd, _rms_vjp_bwd)


# ---- Tiled matmul: (bm, bk) x (bk, bn) tiles accumulated over k in the output block ----------
def _mm_kernel(a_ref, b_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)


def _pallas_matmul(a, b, bm, bn, bk):
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = min(bm, m), min(bn, n), min(bk, k)
    return pl.pallas_call(_mm_kernel, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
                          grid=(m // bm, n // bn, k // bk),
                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                                    pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
                          interpret=True)(a, b)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def matmul(a, b, block=64):
    return _pallas_matmul(a, b, block, block, block)


def _mm_vjp_fwd(a, b, block):
    return matmul(a, b, block), (a, b)


def _mm_vjp_bwd(block, res, g):  # the same Pallas kernel on transposed operands
    a, b = res
    return _pallas_matmul(g, b.T, block, block, block), _pallas_matmul(a.T, g, block, block, block)


matmul.defvjp(_mm_vjp_fwd, _mm_vjp_bwd)


# ---- Flash attention (forward): online softmax over key blocks, one query block per step -----
def _flash_kernel(q_ref, k_ref, v_ref, o_ref, *, block_k, scale):
    q = q_ref[...] * scale
    n = k_ref.shape[0]
    m = jnp.full((q.shape[0], 1), -jnp.inf, jnp.float32)
    s = jnp.zeros((q.shape[0], 1), jnp.float32)
    acc = jnp.zeros(q.shape, jnp.float32)
    for j in range(n // block_k):  # static loop: unrolled at trace time
        k = k_ref[pl.ds(j * block_k, block_k), :]
        v = v_ref[pl.ds(j * block_k, block_k), :]
        logits = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
        m_new = jnp.maximum(m, logits.max(-1, keepdims=True))
        p = jnp.exp(logits - m_new)
        corr = jnp.exp(m - m_new)
        s = s * corr + p.sum(-1, keepdims=True)
        acc = acc * corr + jnp.dot(p, v, preferred_element_type=jnp.float32)
        m = m_new
    o_ref[...] = (acc / s).astype(o_ref.dtype)


def flash_attention(q, k, v, block_q=16, block_k=16):
    t, d = q.shape
    kern = functools.partial(_flash_kernel, block_k=block_k, scale=d ** -0.5)
    return pl.pallas_call(kern, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype), grid=(t // block_q,),
                          in_specs=[pl.BlockSpec((block_q, d), lambda i: (i, 0)),
                                    pl.BlockSpec(k.shape, lambda i: (0, 0)),
                                    pl.BlockSpec(v.shape, lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((block_q, d), lambda i: (i, 0)), interpret=True)(q, k, v)


# ---- The kernels as tpu ops, and a model using them --------------------------------------------
tpu_rmsnorm = kernel.from_jax(rmsnorm, name="rmsnorm")
tpu_matmul = kernel.from_jax(matmul, name="matmul")
# flash attention's gradient: jax.vjp of the plain-jnp reference (the Pallas kernel has no vjp)
tpu_flash = kernel.from_jax(
    flash_attention, name="flash_attention",
    backward=lambda q, k, v, g: jax.vjp(lambda q, k, v: jax.nn.softmax((q * q.shape[-1] ** -0.5) @ k.T) @ v,
                                        q, k, v)[1](g))


class Block(torch.nn.Module):
    """x + W2 gelu(W1 rmsnorm(x)), the norm and both matmuls as Pallas kernels (use_pallas)."""

    def __init__(self, d=64, hidden=128, use_pallas=True):
        super().__init__()
        self.w = torch.nn.Parameter(1 + 0.1 * torch.randn(d))
        self.w1 = torch.nn.Parameter(torch.randn(d, hidden) / d ** 0.5)
        self.w2 = torch.nn.Parameter(torch.randn(hidden, d) / hidden ** 0.5)
        self.use_pallas = use_pallas

    def forward(self, x):
        if self.use_pallas:
            h = tpu_matmul(torch.nn.functional.gelu(tpu_matmul(tpu_rmsnorm(x, self.w), self.w1)), self.w2)
        else:
            r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
            h = torch.nn.functional.gelu((x * r * self.w) @ self.w1) @ self.w2
        return x + h


def attention_reference(q, k, v):
    return torch.softmax((q * q.shape[-1] ** -0.5) @ k.T, -1) @ v


def check_model(compile_: bool = False, n=64, d=64, hidden=128, seed=0) -> dict:
    """Max abs errors of the Pallas model on tpu vs the PyTorch model on CPU (fwd, each grad)."""
    torch.manual_seed(seed)
    ref = Block(d, hidden, use_pallas=False)
    dev = Block(d, hidden, use_pallas=True)
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("tpu")
    x = torch.randn(n, d)
    xr, xd = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    fwd = torch.compile(dev, backend="tpu") if compile_ else dev
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):  # fp32 matmuls, as on CPU
        yd = fwd(xd)
        (yd * torch.arange(d, device="tpu")).sum().backward()
    yr = ref(xr)
    (yr * torch.arange(d)).sum().backward()
    errs = {"forward": (yd.detach().cpu() - yr.detach()).abs().max().item(),
            "grad x": (xd.grad.cpu() - xr.grad).abs().max().item()}
    for (name, p), (_, q) in zip(dev.named_parameters(), ref.named_parameters()):
        errs[f"grad {name}"] = (p.grad.cpu() - q.grad).abs().max().item()
    return errs


def check_attention(t=64, d=32, seed=0) -> dict:
    torch.manual_seed(seed)
    q, k, v = (torch.randn(t, d) for _ in range(3))
    ref = [a.clone().requires_grad_() for a in (q, k, v)]
    dev = [a.to("tpu").requires_grad_() for a in (q, k, v)]
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        yd = tpu_flash(*dev)
        yd.sum().backward()
    yr = attention_reference(*ref)
    yr.sum().backward()
    errs = {"forward": (yd.detach().cpu() - yr.detach()).abs().max().item()}
    for name, a, b in zip("qkv", dev, ref):
        errs[f"grad {name}"] = (a.grad.cpu() - b.grad).abs().max().item()
    return errs


def _time(fn, reps=20) -> float:
    fn()
    torch.tpu.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.tpu.synchronize()
    return (time.perf_counter() - t0) / reps


def bench(n=256, d=256, block=64) -> list[tuple[str, float, float]]:
    """(name, Pallas kernel seconds, PyTorch ops seconds) per kernel, forward only, on tpu."""
    torch.manual_seed(0)
    x, w = torch.randn(n, d, device="tpu"), torch.randn(d, device="tpu")
    a, b = torch.randn(n, d, device="tpu"), torch.randn(d, n, device="tpu")
    q, k, v = (torch.randn(n, 64, device="tpu") for _ in range(3))
    rows = [("rmsnorm", lambda: tpu_rmsnorm(x, w),
             lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w),
            ("matmul", lambda: tpu_matmul(a, b), lambda: a @ b),
            ("flash_attention", lambda: tpu_flash(q, k, v), lambda: attention_reference(q, k, v))]
    pal, ref = Block(d, 2 * d, use_pallas=True).to("tpu"), Block(d, 2 * d, use_pallas=False).to("tpu")
    xb = torch.randn(n, d, device="tpu", requires_grad=True)
    rows.append(("block fwd+bwd", lambda: pal(xb).sum().backward(), lambda: ref(xb).sum().backward()))
    return [(name, _time(f), _time(g)) for name, f, g in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", action="store_true", help="time the kernels next to PyTorch ops on tpu")
    args = ap.parse_args()
    for label, errs in (("eager", check_model()), ("torch.compile", check_model(compile_=True)),
                        ("flash attention", check_attention())):
        print(f"{label:16s} max abs error vs PyTorch CPU: " + ", ".join(f"{k} {v:.2e}" for k, v in errs.items()))
    if args.bench:
        for name, tk, tt in bench():
            print(f"{name:16s} Pallas kernel {tk * 1e3:8.3f} ms   PyTorch ops {tt * 1e3:8.3f} ms   ratio {tk / tt:5.2f}")


if __name__ == "__main__":
    main()
