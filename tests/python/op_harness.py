"""Op test harness: runs a function on PyTorch CPU and on tpu and compares outputs and,
for float dtypes, gradients. Op families describe their ops as `OpSpec` rows; `cases()`
expands the rows into pytest params (op x dtype x input variant x eager mode, ids
"name-dtype-variant-mode") and `check_case()` runs one.

Input variants (generated from the row's shapes):
  contig     the shapes as given
  noncontig  every tensor is a transposed, step-sliced view of a larger base tensor
  broadcast  different but broadcastable shapes (rows with `broadcast` shapes)
  0dim       every tensor is 0-dim
  empty      a zero-size dim
  pyscalar   trailing Scalar-able arguments are Python numbers (rows with `scalar_args`)
  cpu0dim    trailing Scalar-able arguments are 0-dim CPU tensors (mixed in as scalars)

Eager modes (the whole case -- transfers, forward, backward -- runs inside the mode):
  strict     DEFER_NEVER: asynchronous, in order (the default mode)
  debug      DEFER_NEVER_AND_LAUNCH_BLOCKING: each op finishes before the call returns
  fused      DEFER_AND_FUSE: the forward and the backward are recorded into one window
             (unless a view forces an earlier flush), flushed by the first comparison, so
             fusion, window outputs and view tracking are what is tested
MODE_VARIANTS fixes which variants each mode runs: strict runs every variant; debug and
fused run contig, noncontig, empty, pyscalar and cpu0dim -- the variants that change how
inputs enter a graph (views of a storage, zero-size tensors, scalar operands), which is where
the window (fused) and the blocking launch (debug) have code of their own. broadcast and 0dim
change only shapes inside the op's own graph, the same graph in every mode, so strict covers
them. Cost (the 7 files that use cases(), -n 2, 2 busy shared cores): host 4,219 tests 32 s
wall / 32 s CPU before, 10,349 tests 67 s / 58 s after (every variant in every mode: 11,867
tests, 54 s / 60 s: on the host the reduction saves little); pjrt (make test's subset),
test_ops_pointwise + test_ops_nn with a cold XLA cache (fused windows are new executables;
debug reuses strict's): 144 s before, 233 s after, 303 s for every variant (40 s with a warm
$TORCH_TPU_CACHE_DIR).

If CPU raises for a case, tpu must raise too (error parity) -- no crash, no silent result.
"""
import contextlib
import dataclasses
import zlib
from typing import Callable, Optional, Sequence

import pytest
import torch

import torch_tpu
from torch_tpu import EagerMode

DEV = "tpu"
F32, BF16 = torch.float32, torch.bfloat16
FLOATS = (F32, BF16)
INTS = (torch.int64, torch.int32, torch.uint8, torch.int8)
ALL = FLOATS + INTS + (torch.bool,)
NUMERIC = FLOATS + INTS

# Base tolerances per dtype; integer and bool compare exactly.
_TOL = {
    torch.float32: (1e-5, 1.3e-6),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.float16: (1e-3, 1e-3),
}
VARIANTS = ("contig", "noncontig", "broadcast", "0dim", "empty", "pyscalar", "cpu0dim")
MODES = {
    "strict": EagerMode.DEFER_NEVER,
    "debug": EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING,
    "fused": EagerMode.DEFER_AND_FUSE,
}
# The variants each mode runs (a row's own variant list still filters them); see the docstring.
_OWN_PATHS = ("contig", "noncontig", "empty", "pyscalar", "cpu0dim")
MODE_VARIANTS = {
    "strict": VARIANTS,
    "debug": _OWN_PATHS,
    "fused": _OWN_PATHS,
}


def tol(dtype: torch.dtype, scale: float = 1.0):
    """(atol, rtol) for comparing values of `dtype`; `scale` loosens floats."""
    if dtype not in _TOL:
        return 0.0, 0.0
    atol, rtol = _TOL[dtype]
    return atol * scale, rtol * scale


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def make(shape, dtype, gen: torch.Generator, low=-3.0, high=3.0, nonzero=False) -> torch.Tensor:
    """A CPU tensor with values in [low, high) (integers: [ceil(low), high); uint8 from 0)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low
        if nonzero:  # keep away from zero (divisors, poles)
            x = torch.where(x.abs() < 0.25, x.sign() * 0.25 + (x == 0) * 0.25, x)
        return x.to(dtype)
    lo = max(int(low), 0) if dtype == torch.uint8 else int(low)
    hi = max(int(high), lo + 1)
    x = torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64)
    if nonzero:
        x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype)


@dataclasses.dataclass
class Input:
    """A tensor argument: a CPU leaf `base` and a view of it taken on each device."""
    base: torch.Tensor
    view: Optional[Callable] = None

    def realize(self, device: str, grad: bool):
        b = self.base.detach().clone().to(device)
        if grad and b.dtype.is_floating_point:
            b.requires_grad_(True)
        return b, (self.view(b) if self.view else b)


@dataclasses.dataclass
class OpSpec:
    """One op row. `fn(*args)` gets tensors (or Python scalars for `scalar_args`)."""
    name: str
    fn: Callable
    dtypes: Sequence[torch.dtype] = FLOATS
    grad: bool = True
    shapes: Sequence[tuple] = ((3, 4),)
    broadcast: Optional[Sequence[tuple]] = None  # shapes for the "broadcast" variant
    variants: Sequence[str] = ("contig", "noncontig", "0dim", "empty")
    scalar_args: Sequence[int] = ()   # argument indices that may be Python scalars
    domain: tuple = (-3.0, 3.0)       # value range of generated inputs
    domains: Optional[dict] = None    # per-argument value range {index: (low, high)}
    nonzero: Sequence[int] = ()       # argument indices kept away from zero
    tol_scale: float = 1.0            # loosens float tolerances (transcendental ops)
    grad_tol_scale: Optional[float] = None
    xfail: Optional[dict] = None      # {(dtype|None, variant|None[, mode|None]): reason or mark}
    make_inputs: Optional[Callable] = None  # (variant, dtype, gen) -> [Input or scalar]

    def __post_init__(self):
        if self.broadcast and "broadcast" not in self.variants:
            self.variants = tuple(self.variants) + ("broadcast",)
        if self.scalar_args:
            extra = tuple(v for v in ("pyscalar", "cpu0dim") if v not in self.variants)
            self.variants = tuple(self.variants) + extra


def _noncontig(shape, dtype, gen, low, high, nonzero):
    """A view with `shape` that is transposed (rank >= 2) and step-sliced on dim 0."""
    if len(shape) == 0:
        return Input(make((2,), dtype, gen, low, high, nonzero), lambda b: b[1])
    if len(shape) == 1:
        return Input(make((2 * shape[0] + 1,), dtype, gen, low, high, nonzero), lambda b: b[1::2])
    base = list(shape)
    base[-1], base[-2] = base[-2], base[-1]
    base[-1] = 2 * base[-1]  # becomes the step-sliced dim 0 ... of the transposed view
    # view: transpose last two dims, then step-slice the (new) second-to-last dim.
    def view(b):
        return b.transpose(-1, -2)[..., ::2, :]
    return Input(make(tuple(base), dtype, gen, low, high, nonzero), view)


def _scalar(dtype, gen, low, high, nonzero):
    v = make((), dtype, gen, low, high, nonzero)
    return v.item() if dtype != torch.bool else bool(v.item())


def sample_inputs(spec: OpSpec, dtype, variant: str, seed: int):
    """The argument list for one case (Input objects and Python scalars)."""
    gen = torch.Generator().manual_seed(seed)
    if spec.make_inputs is not None:
        return spec.make_inputs(variant, dtype, gen)
    shapes = list(spec.shapes)
    if variant == "broadcast":
        shapes = list(spec.broadcast)
    elif variant == "0dim":
        shapes = [()] * len(shapes)
    elif variant == "empty":  # dim 0 of the highest-rank inputs becomes 0
        rank = max(len(sh) for sh in shapes)
        shapes = [(0,) + tuple(sh[1:]) if len(sh) == rank else sh for sh in shapes]
    args = []
    for i, sh in enumerate(shapes):
        low, high = (spec.domains or {}).get(i, spec.domain)
        nz = i in spec.nonzero
        if variant == "pyscalar" and i in spec.scalar_args:
            args.append(_scalar(dtype, gen, low, high, nz))
        elif variant == "cpu0dim" and i in spec.scalar_args:
            args.append(make((), dtype, gen, low, high, nz))  # stays on CPU
        elif variant == "noncontig":
            args.append(_noncontig(sh, dtype, gen, low, high, nz))
        else:
            args.append(Input(make(sh, dtype, gen, low, high, nz)))
    return args


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _flat(x)]
    return [out]


def _realize_all(args, device, grad):
    leaves, vals = [], []
    for a in args:
        if isinstance(a, Input):
            leaf, v = a.realize(device, grad)
            leaves.append(leaf)
            vals.append(v)
        else:
            leaves.append(None)
            vals.append(a)
    return leaves, vals


def assert_same(actual, expected, scale=1.0, what="output"):
    """Compares tpu results with CPU results (tensors, tuples, Python numbers)."""
    a_flat, e_flat = _flat(actual), _flat(expected)
    assert len(a_flat) == len(e_flat), f"{what}: {len(a_flat)} results, expected {len(e_flat)}"
    for i, (a, e) in enumerate(zip(a_flat, e_flat)):
        if not isinstance(e, torch.Tensor):
            assert a == e or (a != a and e != e), f"{what}[{i}]: got {a}, expected {e}"
            continue
        assert isinstance(a, torch.Tensor), f"{what}[{i}]: got {type(a)}, expected a tensor"
        assert a.device.type == DEV, f"{what}[{i}] is on {a.device}, expected tpu"
        atol, rtol = tol(e.dtype, scale)
        torch.testing.assert_close(a.cpu(), e, atol=atol, rtol=rtol, equal_nan=True,
                                   msg=lambda m: f"{what}[{i}]: {m}")


def _weights(outs, seed):
    """Fixed random weights for each differentiable output (None for the rest)."""
    gen = torch.Generator().manual_seed(seed)
    ws = []
    for o in outs:
        if isinstance(o, torch.Tensor) and o.requires_grad and o.dtype.is_floating_point:
            ws.append(make(o.shape, o.dtype, gen, -1.0, 1.0))
        else:
            ws.append(None)
    return ws


def _backward(outs, ws, device):
    terms = [(o * w.to(device)).sum() for o, w in zip(outs, ws) if w is not None]
    if not terms:
        return False
    total = terms[0]
    for t in terms[1:]:
        total = total + t.to(total.dtype)
    total.backward()
    return True


def in_mode(mode: Optional[str]):
    """The eager-mode block a case runs in: a key of MODES (None: the caller's mode)."""
    if mode is None:
        return contextlib.nullcontext()
    if mode not in MODES:
        raise ValueError(f"[op_harness] unknown mode {mode!r}; expected one of {list(MODES)}")
    return torch_tpu.eager_mode(MODES[mode])


def check(fn, args, *, grad=True, scale=1.0, grad_scale=None, cpu_args=None, seed=0, mode=None):
    """Runs fn(*args) on CPU and tpu and compares; then compares gradients of float inputs.

    `args`: Input objects and Python scalars. `cpu_args` (optional): the CPU reference
    inputs when they differ (e.g. bf16-rounded for DEFAULT matmul precision). `mode`: a key
    of MODES to run the tpu side in (None: the caller's mode). The tpu forward and backward
    both run before the first comparison, so in fused mode they are one window."""
    ref_args = cpu_args if cpu_args is not None else args
    cpu_leaves, cpu_vals = _realize_all(ref_args, "cpu", grad)
    try:
        expected = fn(*cpu_vals)
    except Exception as e:  # error parity: tpu must reject it too
        with in_mode(mode):
            _, tpu_vals = _realize_all(args, DEV, grad)
            with pytest.raises(Exception) as info:
                fn(*tpu_vals)
                torch.tpu.synchronize()
        assert not isinstance(info.value, (SystemError, MemoryError)), info.value
        return type(e)
    e_outs = _flat(expected)
    ws = _weights(e_outs, seed + 1) if grad else []
    has_grad = grad and _backward(e_outs, ws, "cpu")
    with in_mode(mode):
        tpu_leaves, tpu_vals = _realize_all(args, DEV, grad)
        actual = fn(*tpu_vals)
        if has_grad:
            assert _backward(_flat(actual), ws, DEV), "tpu outputs need no gradient; CPU's do"
        assert_same(actual, expected, scale)
        if has_grad:
            _compare_grads(cpu_leaves, tpu_leaves, grad_scale if grad_scale is not None else scale)
    return None


def _compare_grads(cpu_leaves, tpu_leaves, scale):
    for i, (c, t) in enumerate(zip(cpu_leaves, tpu_leaves)):
        if c is None or not c.requires_grad:
            continue
        if c.grad is None:
            assert t.grad is None, f"grad[{i}]: tpu has a gradient, CPU has none"
            continue
        assert t.grad is not None, f"grad[{i}]: missing on tpu"
        assert_same(t.grad, c.grad, scale, what=f"grad[{i}]")


# --- pytest glue ---------------------------------------------------------------------------
def missing(op: str):
    """xfail mark for a case that needs an op with no tpu lowering yet (strict: remove the
    mark once the lowering lands)."""
    return pytest.mark.xfail(strict=True, raises=NotImplementedError, reason=f"missing lowering: aten::{op}")


def _dtype_name(dt):
    return str(dt).replace("torch.", "")


def modes():
    """pytest params of the mode axis (ids: the mode) for tables that call check(mode=...)
    themselves, or compare inside `in_mode(mode)`, instead of using cases()."""
    return [pytest.param(m, id=m) for m in MODES]


def _xfail_marks(spec: OpSpec, dtype, variant: str, mode: str):
    marks = []
    for key, mark in (spec.xfail or {}).items():
        xd, xv, xm = (tuple(key) + (None,))[:3]
        if (xd is None or xd == dtype) and (xv is None or xv == variant) and (xm is None or xm == mode):
            marks.append(pytest.mark.xfail(strict=True, reason=mark) if isinstance(mark, str) else mark)
    return marks


def cases(specs: Sequence[OpSpec]):
    """pytest params (spec, dtype, variant, mode) with ids "name-dtype-variant-mode" and xfail
    marks; each mode runs the row's variants that MODE_VARIANTS lists for it."""
    out = []
    for spec in specs:
        for v in spec.variants:
            if v not in VARIANTS:
                raise ValueError(f"[op_harness] unknown variant {v!r} in {spec.name}")
        for dt in spec.dtypes:
            for mode, allowed in MODE_VARIANTS.items():
                for v in spec.variants:
                    if v not in allowed:
                        continue
                    out.append(pytest.param(spec, dt, v, mode, id=f"{spec.name}-{_dtype_name(dt)}-{v}-{mode}",
                                            marks=_xfail_marks(spec, dt, v, mode)))
    return out


def check_case(spec: OpSpec, dtype, variant: str, mode: Optional[str] = None):
    """Runs one case; the seed does not depend on the mode, so every mode sees the same inputs."""
    seed = _seed(spec.name, _dtype_name(dtype), variant)
    args = sample_inputs(spec, dtype, variant, seed)
    grad = spec.grad and dtype.is_floating_point
    return check(spec.fn, args, grad=grad, scale=spec.tol_scale, grad_scale=spec.grad_tol_scale, seed=seed,
                 mode=mode)
