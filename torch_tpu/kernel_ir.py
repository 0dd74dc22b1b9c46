"""IR kernels built in Python (`torch_tpu.kernel.ir`), for torch.library custom ops on tpu.

A kernel is a Python function from IR values to IR values, built once per input signature:

    from torch_tpu.kernel import ir

    @ir.kernel
    def swish(b, x):                       # b: the Builder, x: an ir.Value
        return x * b.logistic(x)

    @torch.library.custom_op("mylib::swish", mutates_args=())
    def swish_op(x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)        # the CPU implementation
    swish_op.register_kernel("tpu")(swish)  # tpu tensors in, tpu tensors out
    swish_op.register_fake(lambda x: torch.empty_like(x))

Ops are named as in StableHLO (our IR follows it; ir/ops.def): `b.exponential(x)`,
`b.dot_general(...)`, and `b.op("stablehlo.name", *xs, shape=..., dtype=..., attrs="...")`
for any other. Python operators on Values broadcast numpy-style and accept Python numbers.
The graph is written as StableHLO text and imported (csrc/ir/stablehlo_import.cpp), so it
runs as one tpu op in every eager mode, in torch.compile captures and on both runtimes.
"""
from __future__ import annotations

import threading
from typing import Callable, Sequence

import torch

from torch_tpu import _C

__all__ = ["Builder", "Value", "kernel", "IrKernel"]

_DT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
       torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "ui8",
       torch.bool: "i1"}
_UNARY = ["abs", "negate", "sign", "exponential", "exponential_minus_one", "log", "log_plus_one", "sqrt",
          "rsqrt", "cbrt", "tanh", "logistic", "sine", "cosine", "tan", "floor", "ceil", "round_nearest_even",
          "not"]
_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "power", "maximum", "minimum", "atan2",
           "and", "or", "xor"]


def _ttype(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + _DT[dtype] + ">"


class Value:
    """An IR value of a kernel being built: its name, shape and torch dtype."""

    def __init__(self, b: "Builder", name: str, shape: tuple, dtype: torch.dtype):
        self.b, self.name, self.shape, self.dtype = b, name, tuple(shape), dtype

    @property
    def type(self) -> str:
        return _ttype(self.shape, self.dtype)

    def _bin(self, other, op, rev=False):
        x, y = self.b._coerce(self, other)
        return getattr(self.b, op)(*((y, x) if rev else (x, y)))

    __add__ = lambda s, o: s._bin(o, "add")  # noqa: E731
    __radd__ = lambda s, o: s._bin(o, "add", True)  # noqa: E731
    __sub__ = lambda s, o: s._bin(o, "subtract")  # noqa: E731
    __rsub__ = lambda s, o: s._bin(o, "subtract", True)  # noqa: E731
    __mul__ = lambda s, o: s._bin(o, "multiply")  # noqa: E731
    __rmul__ = lambda s, o: s._bin(o, "multiply", True)  # noqa: E731
    __truediv__ = lambda s, o: s._bin(o, "divide")  # noqa: E731
    __rtruediv__ = lambda s, o: s._bin(o, "divide", True)  # noqa: E731
    __pow__ = lambda s, o: s._bin(o, "power")  # noqa: E731
    __neg__ = lambda s: s.b.negate(s)  # noqa: E731


class Builder:
    """Writes one kernel's ops as StableHLO; each method returns the result Value."""

    def __init__(self):
        self._lines: list[str] = []
        self._n = 0
        self.params: list[Value] = []

    def _new(self, shape, dtype) -> Value:
        self._n += 1
        return Value(self, f"%v{self._n}", shape, dtype)

    def param(self, shape, dtype) -> Value:
        v = Value(self, f"%arg{len(self.params)}", shape, dtype)
        self.params.append(v)
        return v

    def op(self, name: str, *xs: Value, shape=None, dtype=None, attrs: str = "", region: str = "") -> Value:
        """Any op by its StableHLO name (generic form); result shape/dtype default to xs[0]'s."""
        shape = xs[0].shape if shape is None else tuple(shape)
        dtype = xs[0].dtype if dtype is None else dtype
        r = self._new(shape, dtype)
        full = name if "." in name else f"stablehlo.{name}"
        ins = ", ".join(x.name for x in xs)
        tys = ", ".join(x.type for x in xs)
        reg = f" ({{\n{region}\n}})" if region else ""
        att = f" {{{attrs}}}" if attrs else ""
        self._lines.append(f'{r.name} = "{full}"({ins}){reg}{att} : ({tys}) -> {r.type}')
        return r

    # -- leaves and conversions -----------------------------------------------------------
    def constant(self, value, dtype=torch.float32, shape=()) -> Value:
        lit = ("true" if value else "false") if dtype == torch.bool else (
            repr(float(value)) if dtype.is_floating_point else str(int(value)))
        if lit in ("inf", "-inf", "nan"):
            lit = {"inf": "0x7F800000", "-inf": "0xFF800000", "nan": "0x7FC00000"}[lit] if dtype == torch.float32 \
                else {"inf": "1e400", "-inf": "-1e400"}.get(lit, lit)
        return self.op("constant", shape=shape, dtype=dtype, attrs=f"value = dense<{lit}> : {_ttype(shape, dtype)}")

    def iota(self, shape, dim: int, dtype=torch.int32) -> Value:
        return self.op("iota", shape=shape, dtype=dtype, attrs=f"iota_dimension = {dim} : i64")

    def convert(self, x: Value, dtype) -> Value:
        return x if x.dtype == dtype else self.op("convert", x, dtype=dtype)

    # -- shapes ---------------------------------------------------------------------------
    def broadcast_in_dim(self, x: Value, shape, dims) -> Value:
        return self.op("broadcast_in_dim", x, shape=shape, attrs=f"broadcast_dimensions = {_arr(dims)}")

    def broadcast_to(self, x: Value, shape) -> Value:
        shape = tuple(shape)
        if x.shape == shape:
            return x
        off = len(shape) - len(x.shape)
        dims = [off + i for i in range(len(x.shape))]
        if any(x.shape[i] not in (1, shape[off + i]) for i in range(len(x.shape))):
            raise ValueError(f"[kernel.ir] cannot broadcast {x.shape} to {shape}")
        keep = [i for i in range(len(x.shape)) if x.shape[i] == shape[off + i]]
        if len(keep) != len(x.shape):
            x = self.reshape(x, [x.shape[i] for i in keep])
            dims = [dims[i] for i in keep]
        return self.broadcast_in_dim(x, shape, dims)

    def reshape(self, x: Value, shape) -> Value:
        return self.op("reshape", x, shape=tuple(shape))

    def transpose(self, x: Value, perm) -> Value:
        return self.op("transpose", x, shape=[x.shape[p] for p in perm], attrs=f"permutation = {_arr(perm)}")

    def slice(self, x: Value, start, limit, strides=None) -> Value:
        strides = strides or [1] * len(start)
        shape = [max(0, -(-(lo_hi[1] - lo_hi[0]) // s)) for lo_hi, s in zip(zip(start, limit), strides)]
        return self.op("slice", x, shape=shape, attrs=f"start_indices = {_arr(start)}, limit_indices = "
                                                       f"{_arr(limit)}, strides = {_arr(strides)}")

    def concatenate(self, xs: Sequence[Value], dim: int) -> Value:
        shape = list(xs[0].shape)
        shape[dim] = sum(x.shape[dim] for x in xs)
        return self.op("concatenate", *xs, shape=shape, attrs=f"dimension = {dim} : i64")

    # -- compute --------------------------------------------------------------------------
    def compare(self, direction: str, x, y) -> Value:
        x, y = self._coerce(x, y)
        return self.op("compare", x, y, dtype=torch.bool,
                       attrs=f"comparison_direction = #stablehlo<comparison_direction {direction.upper()}>")

    def select(self, pred: Value, x, y) -> Value:
        x, y = self._coerce(x, y)
        pred, x = self._coerce(pred, x, convert=False)
        pred, y = self._coerce(pred, y, convert=False)
        return self.op("select", pred, x, y, dtype=x.dtype)

    def reduce(self, x: Value, dims, kind: str = "add") -> Value:
        """Reduces dims with kind in add / multiply / maximum / minimum / and / or."""
        init = {"add": 0, "multiply": 1, "maximum": float("-inf"), "minimum": float("inf"), "and": 1, "or": 0}[kind]
        if not x.dtype.is_floating_point and init in (float("-inf"), float("inf")):
            info = torch.iinfo(x.dtype) if x.dtype != torch.bool else None
            init = (info.min if init < 0 else info.max) if info else int(init > 0)
        c = self.constant(init, x.dtype)
        s = _ttype((), x.dtype)
        shape = [d for i, d in enumerate(x.shape) if i not in dims]
        region = (f"^bb0(%a: {s}, %b: {s}):\n  %r = \"stablehlo.{kind}\"(%a, %b) : ({s}, {s}) -> {s}\n"
                  f"  \"stablehlo.return\"(%r) : ({s}) -> ()")
        r = self._new(shape, x.dtype)
        self._lines.append(f'{r.name} = "stablehlo.reduce"({x.name}, {c.name}) ({{\n{region}\n}}) '
                           f'{{dimensions = {_arr(dims)}}} : ({x.type}, {s}) -> {r.type}')
        return r

    def dot_general(self, lhs: Value, rhs: Value, contracting=((1,), (0,)), batch=((), ()),
                    precision: str = "DEFAULT") -> Value:
        (lc, rc), (lb, rb) = contracting, batch
        shape = [lhs.shape[d] for d in lb] + [d for i, d in enumerate(lhs.shape) if i not in (*lb, *lc)] + \
                [d for i, d in enumerate(rhs.shape) if i not in (*rb, *rc)]
        dn = (f"#stablehlo.dot<lhs_batching_dimensions = {list(lb)}, rhs_batching_dimensions = {list(rb)}, "
              f"lhs_contracting_dimensions = {list(lc)}, rhs_contracting_dimensions = {list(rc)}>")
        prec = f"[#stablehlo<precision {precision}>, #stablehlo<precision {precision}>]"
        return self.op("dot_general", lhs, rhs, shape=shape,
                       attrs=f"dot_dimension_numbers = {dn}, precision_config = {prec}")

    def _coerce(self, x, y, convert=True):
        """Numbers -> constants of the other's dtype; shapes broadcast numpy-style."""
        if not isinstance(x, Value):
            x = self.constant(x, y.dtype)
        if not isinstance(y, Value):
            y = self.constant(y, x.dtype)
        shape = tuple(torch.broadcast_shapes(x.shape, y.shape))
        return self.broadcast_to(x, shape), self.broadcast_to(y, shape)

    def text(self, outs: Sequence[Value]) -> str:
        args = ", ".join(f"{p.name}: {p.type}" for p in self.params)
        res = ", ".join(o.type for o in outs)
        body = "\n".join("    " + line.replace("\n", "\n    ") for line in self._lines)
        ret = f'    "func.return"({", ".join(o.name for o in outs)}) : ({res}) -> ()'
        return f"module {{\n  func.func public @main({args}) -> ({res}) {{\n{body}\n{ret}\n  }}\n}}\n"


def _arr(v) -> str:
    v = list(v)
    return "array<i64>" if not v else "array<i64: " + ", ".join(str(int(i)) for i in v) + ">"


for _n in _UNARY:
    setattr(Builder, _n, (lambda n: lambda self, x: self.op(n, x))(_n))
for _n in _BINARY:
    setattr(Builder, _n, (lambda n: lambda self, x, y: self.op(n, *self._coerce(x, y)))(_n))


class IrKernel:
    """A kernel built by `fn(builder, *values)`, run on tpu tensors; one build per signature."""

    def __init__(self, fn: Callable, name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "ir_kernel")
        self._cache: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def build(self, specs: tuple):
        key = (specs, _C._get_matmul_precision())
        hit = self._cache.get(key)
        if hit is None:
            with self._lock:
                b = Builder()
                xs = [b.param(s, dt) for s, dt in specs]
                out = self.fn(b, *xs)
                single = isinstance(out, Value)
                outs = [out] if single else list(out)
                k = _C._import_stablehlo(b.text(outs), f"kernel.{self.name}")
                hit = self._cache[key] = (k, single)
        return hit

    def stablehlo(self, *xs: torch.Tensor) -> str:
        return self.build(tuple((tuple(x.shape), x.dtype) for x in xs))[0].stablehlo()

    def __call__(self, *xs: torch.Tensor):
        k, single = self.build(tuple((tuple(x.shape), x.dtype) for x in xs))
        dev = xs[0].device
        outs = _C._run_kernel(k, list(xs) + [c.to(dev) for c in k.constants()])
        return outs[0] if single else tuple(outs)


def kernel(fn: Callable | None = None, *, name: str | None = None):
    """Decorator: `fn(builder, *values) -> Value | tuple[Value]` as a kernel on tpu tensors."""
    if fn is None:
        return lambda f: IrKernel(f, name)
    return IrKernel(fn, name)
