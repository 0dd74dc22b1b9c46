"""Bounded dynamism for torch.compile(backend="tpu") (issue 19 step 2): a Dynamo graph whose
sequence-like size is symbolic runs padded to a bucket, with masks, so that one capture serves
every size of the bucket.

Opt-in: `TORCH_TPU_BUCKETS` ("pow2", or sizes such as "32,64,128"; unset or "off": per-size
captures as before). The Dynamo FX graph (torch-level ops, symbolic sizes in each node's
`example_value`) is interpreted once per bucket with padded inputs and the true size `n` as a
0-dim int64 tpu tensor; each op either has a rule here that keeps every real position exact
whatever the padded positions hold (masks by torch.where, so padded positions get exactly zero
gradient) or the graph *refuses* and runs per size as before. The interpretation is traced by
AOTAutograd like any graph, so the backward comes from the masked forward. Every node's
padded dims are checked against Dynamo's symbolic sizes: a rule that loses track refuses.

The rules and the interpreter: pad_rules.py.
"""
from __future__ import annotations

import os
import threading
import weakref

import torch

from torch_tpu._internal.pad_rules import PT, Lin, PadInterpreter, Refuse, _BakedScalar, _Ctx  # noqa: F401


def parse_buckets(spec: str | None) -> list[int] | str | None:
    """TORCH_TPU_BUCKETS: None/"", "off" -> None; "pow2" -> "pow2"; "32,64,128" -> sorted ints."""
    if spec is None or spec.strip().lower() in ("", "off", "0", "none", "false"):
        return None
    spec = spec.strip().lower()
    if spec in ("pow2", "1", "on", "true"):
        return "pow2"
    try:
        sizes = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"[TORCH_TPU_BUCKETS] expected 'pow2' or sizes such as '32,64,128'; got {spec!r}") from None
    if not sizes or sizes[0] < 1:
        raise ValueError(f"[TORCH_TPU_BUCKETS] sizes must be positive integers; got {spec!r}")
    return sizes


def bucket_for(n: int, buckets) -> int | None:
    """The smallest bucket >= n (None: larger than every listed bucket)."""
    if buckets == "pow2":
        return 1 << max(0, (n - 1).bit_length())
    for b in buckets:
        if b >= n:
            return b
    return None


def enabled():
    return parse_buckets(os.environ.get("TORCH_TPU_BUCKETS"))


# ----------------------------------------------------------------------------- padded values


# ----------------------------------------------------------------------------- the graph


class BucketedGraph:
    """The callable Dynamo gets for a graph with one padded size symbol: per bucket (and values
    of the other symbols and scalar inputs) an AOTAutograd compile of the padded interpretation;
    refused graphs (and sizes past the last bucket) call `fallback` (today's per-size path)."""

    def __init__(self, gm, example_inputs, sym, plan, fallback, compile_padded, buckets):
        self.gm, self.sym, self.plan = gm, sym, plan
        self.fallback, self.compile_padded, self.buckets = fallback, compile_padded, buckets
        self.variants: dict[tuple, tuple] = {}
        self.refused = ""
        self.stats: dict[int, dict] = {}
        self.calls_fallback = 0
        self.id = _next_id()
        self.origin = ""
        for node in gm.graph.nodes:
            st = node.meta.get("stack_trace")
            if st:
                lines = [ln.strip() for ln in st.strip().splitlines() if ln.strip().startswith("File ")]
                if lines:
                    self.origin = lines[-1].replace("File ", "", 1)
                    break
        _BUCKETED[self.id] = self
        self._lock = threading.Lock()

    def _true_size(self, args) -> int:
        kind, i, d = self.plan["size_from"]
        return int(args[i]) if kind == "int" else int(args[i].shape[d])

    def __call__(self, *args):
        if self.refused:
            return self._fallback(args)
        n = self._true_size(args)
        B = bucket_for(n, self.buckets)
        if B is None:
            return self._fallback(args)
        key, others, baked = self._key(args, B)
        with self._lock:
            v = self.variants.get(key)
            if v is None:
                try:
                    v = self._build(args, B, others, baked)
                except Exception as e:  # AOTAutograd wraps what the interpretation raised
                    cause = e
                    while cause is not None and not isinstance(cause, Refuse):
                        cause = cause.__cause__ or cause.__context__
                    # Anything else (a rule's own bug, a data-dependent op): per-size capture is
                    # always right; the warning names the error.
                    e = cause or f"{type(e).__name__}: {e}"
                    self.refused = str(e)
                    import warnings

                    warnings.warn(f"[torch.compile tpu] dynamic graph #{self.id} runs one capture per size: "
                                  f"no padding rule for {e}", stacklevel=2)
                    return self._fallback(args)
                self.variants[key] = v
                st = self.stats.setdefault(B, {"variants": 0, "calls": 0, "real": 0, "padded": 0})
                st["variants"] += 1
        fn, tensor_pos, specs = v
        st = self.stats[B]
        st["calls"] += 1
        padded_in = []
        dev = None
        for i in tensor_pos:
            a = args[i]
            dims = self.plan["pad_dims"].get(i, ())
            if dims:
                a = _pad_input(a, dims, B, n)
            if dims:
                st["real"] += args[i].numel()
                st["padded"] += a.numel()
                dev = a.device
            padded_in.append(a)
        nt = torch.tensor(n, dtype=torch.int64, device=dev)
        outs = fn(*padded_in, nt)
        res = []
        for o, spec in zip(outs, specs):
            res.append(_unpad(o, spec, n) if spec else o)
        return res

    def _fallback(self, args):
        self.calls_fallback += 1
        # aot_module_simplified's function is unboxed (its _boxed_call is copied from the
        # boxed function it wraps).
        return self.fallback(*args)

    def _key(self, args, B):
        others, baked = {}, {}
        key = [B]
        for i, a in enumerate(args):
            k = self.plan["kinds"][i]
            if k == "other_sym":
                others[self.plan["syms"][i]] = int(a)
                key.append(int(a))
            elif k == "scalar":
                baked[i] = a.item()
                key.append(baked[i])
            elif k == "tensor":
                key.append((a.dtype, a.requires_grad, a.device))
            elif k == "const":
                key.append(a)
        return tuple(key), others, baked

    def _build(self, args, B, others, baked):
        """Interpret the graph under AOTAutograd's tracing, at bucket size B."""
        plan = self.plan
        tensor_pos = [i for i, k in enumerate(plan["kinds"]) if k == "tensor"]
        out_specs = []

        def padded_fn(*flat):
            n = flat[-1]
            tens = dict(zip(tensor_pos, flat[:-1]))
            ctx = _Ctx(n, n.device, B)
            inputs = []
            for i, k in enumerate(plan["kinds"]):
                if k == "tensor":
                    t = tens[i]
                    dims = plan["pad_dims"].get(i, ())
                    inputs.append(PT(t, {d: ((B, Lin(1, 0)),) for d in dims}) if dims else t)
                elif k == "pad_sym":
                    inputs.append(Lin(1, 0))
                elif k == "other_sym":
                    inputs.append(others[plan["syms"][i]])
                elif k == "scalar":
                    inputs.append(_BakedScalar(baked[i]))
                else:
                    inputs.append(args[i])
            res = PadInterpreter(self.gm, self.sym, ctx, others).run(inputs)
            flat_out = list(res) if isinstance(res, (tuple, list)) else [res]
            out_specs.clear()
            outs = []
            for o in flat_out:
                if isinstance(o, Lin):
                    raise Refuse("a symbolic size as graph output")
                if isinstance(o, PT):
                    for f in o.pads.values():
                        if sum(1 for _, lin in f if lin is not None) > 1:
                            raise Refuse("an output dim merging two padded dims")
                    out_specs.append({d: f for d, f in o.pads.items()})
                    outs.append(o.t)
                else:
                    out_specs.append(None)
                    outs.append(o)
            return tuple(outs)

        example = []
        for i in tensor_pos:
            a = args[i]
            dims = plan["pad_dims"].get(i, ())
            if dims:  # zeros made on the host and uploaded: no zero-fill program per bucket
                shape = list(a.shape)
                for d in dims:
                    shape[d] = B
                a = torch.zeros(shape, dtype=a.dtype).to(a.device)
            example.append(a.detach().requires_grad_(args[i].requires_grad))
        dev = next((e.device for e in example if isinstance(e, torch.Tensor) and e.device.type == "tpu"), None)
        example.append(torch.tensor(min(B, 1), dtype=torch.int64, device=dev))
        fn = self.compile_padded(padded_fn, example, B, self)
        return fn, tensor_pos, list(out_specs)

    def report(self) -> dict:
        out = {"id": self.id, "origin": self.origin, "refused": self.refused, "fallback_calls": self.calls_fallback,
               "buckets": {}}
        for B, st in sorted(self.stats.items()):
            out["buckets"][B] = {**st, "compilations": _compilations(self, B),
                                 "waste": round((st["padded"] - st["real"]) / st["real"], 4) if st["real"] else 0.0}
        return out


def _pad_input(a, dims, B: int, n: int):
    """Zero-pads `a` along `dims` to B. A device op at the true size would compile once per
    size (the very thing buckets avoid), so inputs that need no gradient (token ids, targets)
    are padded on the host and copied to the device; differentiable ones are padded by torch.cat
    on the device (one eager program per size)."""
    if a.requires_grad and torch.is_grad_enabled():
        for d in dims:
            extra = list(a.shape)
            extra[d] = B - n
            if extra[d]:
                a = torch.cat([a, a.new_zeros(extra)], dim=d)
        return a
    shape = list(a.shape)
    for d in dims:
        shape[d] = B
    host = torch.zeros(shape, dtype=a.dtype)
    view = host
    for d in dims:
        view = view.narrow(d, 0, n)
    view.copy_(a.detach().cpu())
    return host.to(a.device)


def _unpad(o, pads, n):
    for d, f in sorted(pads.items()):
        if len(f) == 1:
            o = o.narrow(d, 0, f[0][1].at(n))
        else:
            sizes = [s for s, _ in f]
            shp = list(o.shape)
            o = o.reshape(shp[:d] + sizes + shp[d + 1:])
            for k, (s, lin) in enumerate(f):
                if lin is not None:
                    o = o.narrow(d + k, 0, lin.at(n))
            o = o.reshape(shp[:d] + [-1] + shp[d + 1:])
    return o


_BUCKETED: "weakref.WeakValueDictionary[int, BucketedGraph]" = weakref.WeakValueDictionary()
_ids = iter(range(1, 1 << 62))
_COMPILATIONS: dict[tuple, list] = {}


def _next_id() -> int:
    return next(_ids)


def _compilations(g, B) -> int:
    return sum(len(cg.captures) for cg in _COMPILATIONS.get((g.id, B), []) if cg is not None)


def report() -> list[dict]:
    return [g.report() for _, g in sorted(_BUCKETED.items())]


# ----------------------------------------------------------------------------- planning


def plan_for(gm, example_inputs) -> tuple | None:
    """(symbol, plan) when the graph has one size symbol to pad; None otherwise. The padded
    symbol: the only one used as a tensor input dim, or the only one never at dim 0 (batch)
    nor last (features) of an input; the other symbols are specialized per value."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(phs) != len(example_inputs):
        return None
    evs = [n.meta.get("example_value") for n in phs]
    at0, anywhere = set(), set()
    for ev in evs:
        if isinstance(ev, torch.Tensor):
            for d, s in enumerate(ev.shape):
                if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol:
                    anywhere.add(s.node.expr)
                    if d == 0:
                        at0.add(s.node.expr)
    cands = anywhere if len(anywhere) == 1 else anywhere - at0
    if len(cands) > 1:  # dynamic=True makes feature dims symbolic too: not the last dim either
        last = {ev.shape[-1].node.expr for ev in evs if isinstance(ev, torch.Tensor) and ev.dim()
                and isinstance(ev.shape[-1], torch.SymInt)}
        cands = cands - last
    if len(cands) != 1:
        return None
    sym = next(iter(cands))
    kinds, syms, pad_dims, size_from = [], {}, {}, None
    for i, ev in enumerate(evs):
        if isinstance(ev, torch.SymInt):
            e = ev.node.expr
            if not e.is_Symbol:
                return None
            kinds.append("pad_sym" if e == sym else "other_sym")
            syms[i] = e
            if e == sym and size_from is None:
                size_from = ("int", i, None)
        elif isinstance(ev, torch.Tensor):
            if ev.dim() == 0 and ev.device.type == "cpu":
                kinds.append("scalar")
                continue
            kinds.append("tensor")
            for d, s in enumerate(ev.shape):
                if isinstance(s, torch.SymInt) and sym in s.node.expr.free_symbols:
                    if s.node.expr != sym:
                        return None  # e.g. an input of length 2*s: not padded by this pass
                    pad_dims.setdefault(i, []).append(d)
                    if size_from is None:
                        size_from = ("tensor", i, d)
        elif isinstance(ev, (int, float, bool, str, type(None))):
            kinds.append("const")
        else:
            return None
    if size_from is None or not pad_dims:
        return None
    return sym, {"kinds": kinds, "syms": syms, "pad_dims": pad_dims, "size_from": size_from}


def fn_as_graph_module(fn, n_inputs: int):
    """A GraphModule calling `fn` on its inputs (AOTAutograd traces through it)."""
    g = torch.fx.Graph()
    phs = [g.placeholder(f"arg{i}") for i in range(n_inputs)]
    out = g.call_function(fn, tuple(phs))
    g.output(out)
    return torch.fx.GraphModule(torch.nn.Module(), g)
