"""torch.compile backend "tpu": Dynamo graphs through AOTAutograd into one IR graph each.

`torch.compile(model, backend="tpu")` (and a plain `torch.compile(model)` whose inputs are tpu
tensors, which Inductor would otherwise send to its Pallas code generator) traces the forward
and backward with AOTAutograd (core ATen decompositions for ops that have no tpu lowering).
Each FX graph is *captured*: run once through the eager lowerings with the device window in
capture mode, so every op is recorded into one IR graph instead of running; the graph is
compiled once (the compile cache shared with eager) and later calls replay it with one
command: no per-op dispatch, no Python per op. Captures are keyed by the inputs' sizes,
strides, offsets and dtypes (and the graph's non-tensor arguments), so the same shapes never
recapture; `dynamic=True` works the same way, one capture per concrete shape.

A graph that cannot be replayed (a sync point inside, such as `.item()` or `nonzero`, or
inputs that are not tpu tensors) runs its FX graph eagerly on every call; Dynamo's own
graph breaks already run the broken part eagerly. Input mutation (optimizer state, BatchNorm
running stats) is functionalized by AOTAutograd and written back by the replay.

On-disk cache: AOTAutograd's result for each Dynamo graph (the traced, partitioned and
decomposed forward/backward FX graphs and their runtime metadata) is kept on disk through
PyTorch's AOTAutogradCache, bundled (our `TpuOutputCode` pickles its FX graph), in
`$TORCH_TPU_CACHE_DIR/aot-<torch_tpu version>-<runtime>-<digest of the ops AOTAutograd
decomposes>` (default `~/.cache/torch_tpu`;
`TORCH_TPU_CACHE_DIR=off` disables it). The entry key is AOTAutograd's hash of the Dynamo
graph, its inputs and the configs; the directory name adds the runtime and version. A warm
process skips AOTAutograd's tracing and partitioning; the IR capture (milliseconds) is redone.

Options (`torch.compile(..., options={...})`): TorchTPU's "async_compile" and
"serializable" are accepted; the host runtime compiles in milliseconds, synchronously, so
both are no-ops here.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import os
import pickle
import threading
import time
import warnings
import weakref
from typing import Any

import torch

from torch_tpu import _C

_KNOWN_OPTIONS = {"async_compile", "serializable"}
_FUSED = 0  # EagerMode.DEFER_AND_FUSE

_stats_lock = threading.Lock()
_stats = {"graphs": 0, "captures": 0, "replays": 0, "eager_calls": 0, "capture_seconds": 0.0, "disk_loads": 0}


def stats() -> dict:
    """Counters of the compile backend: graphs compiled by Dynamo/AOTAutograd, captures (IR
    graphs recorded; one per graph and input layout), replays, eager (uncapturable) calls."""
    with _stats_lock:
        return dict(_stats)


def reset_stats() -> None:
    with _stats_lock:
        for k in _stats:
            _stats[k] = 0.0 if isinstance(_stats[k], float) else 0


def _bump(key: str, v=1) -> None:
    with _stats_lock:
        _stats[key] += v


@functools.cache
def _decompositions() -> dict:
    """Core ATen decompositions of the ops that have no tpu kernel of their own."""
    from torch._decomp import core_aten_decompositions

    table = {}
    for op, fn in core_aten_decompositions().items():
        name = op.name()
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"):
            table[op] = fn
    # scaled_dot_product_attention traces through its own CompositeImplicit kernel instead,
    # which asks the backend choice: tpu's fused attention (kept whole, as in eager) or the
    # math path (decomposed by that kernel). The table's entry would always take the math path.
    table.pop(torch.ops.aten.scaled_dot_product_attention.default, None)
    return table


def _layout_key(args) -> tuple:
    """Per argument its layout; for tensors also the first argument viewing the same storage
    (a capture reads inputs that share a storage through one of them: a call whose inputs
    share differently is another capture)."""
    key, first = [], {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            shared = first.setdefault(a.untyped_storage().data_ptr(), i) if a.numel() else i
            key.append((a.device.type, a.dtype, tuple(a.shape), a.stride(), a.storage_offset(), shared))
        else:
            key.append(a)
    return tuple(key)


class _Capture:
    """One capture of a graph for one input layout."""

    __slots__ = ("program", "tensor_pos", "others", "out_spec", "why")

    def __init__(self, program, tensor_pos, others, out_spec, why=""):
        self.program = program  # None: run the FX graph eagerly
        self.tensor_pos = tensor_pos
        self.others = others  # non-tensor args as captured
        self.out_spec = out_spec  # per output: int (program output index) or ("const", value)
        self.why = why


class CapturedGraph:
    """A callable running an FX graph by replaying its captures. Boxed (AOTAutograd's calling
    convention: one list of arguments); an instance attribute, so that the wrappers Dynamo
    puts around it (functools.wraps copies __dict__) keep it."""

    def __init__(self, gm: torch.fx.GraphModule, name: str):
        self.gm = gm
        self.name = name
        self.captures: dict[tuple, _Capture] = {}
        self.last: _Capture | None = None
        self._boxed_call = True
        self.id = _next_graph_id()
        self.warned = False
        _GRAPHS[self.id] = self

    def _matches(self, c: _Capture, args) -> bool:
        if len(args) != len(c.tensor_pos) + len(c.others):
            return False
        for i, v in c.others:
            if args[i] != v:
                return False
        return c.program is not None and _C._program_matches(c.program, [args[i] for i in c.tensor_pos])

    def __call__(self, boxed):
        args = list(boxed)
        if isinstance(boxed, list):
            boxed.clear()  # the boxed convention: the caller's references die with ours
        c = self.last
        if c is None or not self._matches(c, args):
            key = _layout_key(args)
            c = self.captures.get(key)
            if c is not None and not self._matches(c, args) and c.program is not None:
                # Same layout, but a storage too small for what the program reads around a
                # strided input (whole rows of its storage): a capture of its own.
                key += (tuple(a.untyped_storage().nbytes() for a in args if isinstance(a, torch.Tensor)),)
                c = self.captures.get(key)
            if c is None:
                return self._capture(args, key)
            self.last = c
        if c.program is None:
            _bump("eager_calls")
            return list(self.gm(*args))
        _bump("replays")
        res = _C._program_run(c.program, [args[i] for i in c.tensor_pos])
        return [res[s] if isinstance(s, int) else s[1] for s in c.out_spec]

    def _capture(self, args, key):
        tensor_pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        others = [(i, a) for i, a in enumerate(args) if not isinstance(a, torch.Tensor)]
        tensors = [args[i] for i in tensor_pos]
        if any(t.device.type != "tpu" for t in tensors):
            c = _Capture(None, tensor_pos, others, None, "an input is not a tpu tensor")
            self.captures[key] = self.last = c
            _bump("eager_calls")
            return list(self.gm(*args))
        dev = tensors[0].device.index if tensors else torch.tpu.current_device()
        t0 = time.perf_counter()
        _C._capture_begin(dev, tensors)
        _C._push_thread_eager_mode(_FUSED)
        try:
            outs = list(self.gm(*args))
        except BaseException:
            _C._pop_thread_eager_mode()
            _C._capture_end(dev, tensors, [])
            raise
        _C._pop_thread_eager_mode()
        out_tensors, spec = [], []
        bad = ""
        consts = self._constant_ids()
        for o in outs:
            if isinstance(o, torch.Tensor) and id(o) in consts:
                spec.append(("const", o))  # a get_attr constant: eager returns that very tensor too
            elif isinstance(o, torch.Tensor):
                if o.device.type != "tpu":
                    bad = "an output is not a tpu tensor"
                spec.append(len(out_tensors))
                out_tensors.append(o)
            else:
                spec.append(("const", o))
        program, why = _C._capture_end(dev, tensors, [] if bad else out_tensors)
        why = bad or why
        if why:
            program = None
        self.captures[key] = self.last = _Capture(program, tensor_pos, others, spec, why)
        _bump("captures")
        _bump("capture_seconds", time.perf_counter() - t0)
        self._maybe_warn()
        return outs

    def _constant_ids(self) -> set:
        """ids of the tensors the graph's get_attr nodes read (lifted constants such as a folded
        arange): an output that is one of them is returned as it is, not computed."""
        ids = set()
        for node in self.gm.graph.nodes:
            if node.op == "get_attr":
                obj = self.gm
                for part in node.target.split("."):
                    obj = getattr(obj, part, None)
                if isinstance(obj, torch.Tensor):
                    ids.add(id(obj))
        return ids

    def origin(self) -> str:
        """Where the graph comes from: the first user frame of its nodes' stack traces."""
        for node in self.gm.graph.nodes:
            st = node.meta.get("stack_trace")
            if st:
                lines = [ln.strip() for ln in st.strip().splitlines() if ln.strip().startswith("File ")]
                if lines:
                    return lines[-1].replace("File ", "", 1)
        return ""

    def changing_inputs(self) -> dict:
        """{"input I dim D" or "input I": sorted distinct values} over this graph's captures:
        the input sizes (and non-tensor arguments, such as Dynamo's symbolic sizes) that took
        more than one value, i.e. why it was captured again."""
        seen: dict[str, set] = {}
        for key in self.captures:
            for i, k in enumerate(key):
                if isinstance(k, tuple) and len(k) == 5 and isinstance(k[2], tuple):
                    for d, n in enumerate(k[2]):
                        seen.setdefault(f"input {i} dim {d}", set()).add(n)
                elif isinstance(k, (int, float, bool)):
                    seen.setdefault(f"input {i}", set()).add(k)
        return {k: sorted(v) for k, v in seen.items() if len(v) > 1}

    def _maybe_warn(self) -> None:
        n = len(self.captures)
        limit = _recompile_warn_after()
        if self.warned or limit <= 0 or n <= limit:
            return
        self.warned = True
        changing = self.changing_inputs()
        # Dynamo's symbolic sizes (int inputs) first: they name the dimension at its source.
        items = sorted(changing.items(), key=lambda kv: "dim" in kv[0])
        what = "; ".join(f"{k}: {_fmt_values(v)}" for k, v in items[:3]) or "input strides or offsets"
        if len(items) > 3:
            what += f"; and {len(items) - 3} more input dims"
        import warnings

        warnings.warn(
            f"[torch.compile tpu] {self.name} graph #{self.id}{' (' + self.origin() + ')' if self.origin() else ''} "
            f"was captured {n} times (TORCH_TPU_RECOMPILE_WARN={limit}), once per input shape; changing: "
            f"{what}. Each capture is a new compiled program (seconds each on a TPU): pad these "
            "dimensions to a few sizes. torch_tpu.metrics()['compile'] lists every graph.",
            stacklevel=2)

    def report(self) -> dict:
        return {"id": self.id, "kind": self.name, "origin": self.origin(), "captures": len(self.captures),
                "eager": sum(1 for c in self.captures.values() if c.program is None),
                "eager_why": sorted({c.why for c in self.captures.values() if c.program is None and c.why}),
                "changing": {k: _fmt_values(v) for k, v in self.changing_inputs().items()}}

    def stablehlo(self) -> str:
        """The last capture's graph as StableHLO text ("" when it runs eagerly)."""
        return _C._program_stablehlo(self.last.program) if self.last and self.last.program else ""


_last_graphs: list[CapturedGraph] = []
_GRAPHS: "weakref.WeakValueDictionary[int, CapturedGraph]" = weakref.WeakValueDictionary()
_graph_ids = itertools.count(1)


def _next_graph_id() -> int:
    return next(_graph_ids)


def _recompile_warn_after() -> int:
    """TORCH_TPU_RECOMPILE_WARN: warn once per graph past this many captures (0: never)."""
    try:
        return int(os.environ.get("TORCH_TPU_RECOMPILE_WARN", "8"))
    except ValueError:
        return 8


def _fmt_values(v: list) -> str:
    if len(v) <= 6:
        return f"{len(v)} values " + ", ".join(map(str, v))
    return f"{len(v)} values {v[0]}, {v[1]}, {v[2]}, ..., {v[-1]}"


def graphs_report() -> list[dict]:
    """One dict per live compiled graph: kind, origin, captures (compiled programs), eager
    (uncapturable layouts) and the inputs whose sizes changed between captures."""
    return [g.report() for _, g in sorted(_GRAPHS.items())]


def _remember(g: CapturedGraph) -> None:
    _last_graphs.append(g)
    del _last_graphs[:-16]


class _TpuOutputCodeMixin:
    """What AOTAutograd gets from our compilers: a boxed callable over a CapturedGraph, and an
    Inductor OutputCode so that AOTAutogradCache can bundle it on disk (the FX graph is pickled;
    captures are redone after loading)."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str):
        self._graph: CapturedGraph | None = CapturedGraph(gm, kind)
        self._kind = kind
        self._gm_bytes: bytes | None = None
        self._boxed_call = True

    @property
    def graph(self) -> CapturedGraph:
        return self._graph

    def __call__(self, inputs):
        return self._graph(inputs)

    def prepare_for_serialization(self) -> None:  # on a copy, before pickling
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        try:
            gm = self._graph.gm
            self._gm_bytes = pickle.dumps(gm.__reduce__())
        except Exception as e:  # tensor constants on the device, unpicklable targets
            raise BypassAOTAutogradCache(f"[torch.compile tpu] graph not serializable: {e}") from e
        self._graph = None

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self._graph is None:
            fn, args = pickle.loads(self._gm_bytes)
            self._graph = CapturedGraph(fn(*args), self._kind)
            _bump("disk_loads")
        _remember(self._graph)

    def set_triton_bundle(self, triton_bundle) -> None:
        pass


@functools.cache
def _output_code_type():
    """TpuOutputCode: the mixin over Inductor's OutputCode (a dataclass: its generated
    __init__/__eq__ are replaced; imported late, Inductor is heavy)."""
    from torch._inductor.output_code import OutputCode

    cls = type("TpuOutputCode", (_TpuOutputCodeMixin, OutputCode), {"__module__": __name__, "__qualname__": "TpuOutputCode"})
    cls.__init__ = _TpuOutputCodeMixin.__init__
    cls.__eq__ = object.__eq__
    cls.__hash__ = object.__hash__
    return cls


def __getattr__(name):  # TpuOutputCode, importable by pickle once Inductor is importable
    if name == "TpuOutputCode":
        return _output_code_type()
    raise AttributeError(name)


def cache_dir() -> str | None:
    """The on-disk cache's directory (None when TORCH_TPU_CACHE_DIR=off)."""
    root = os.environ.get("TORCH_TPU_CACHE_DIR", "")
    if root.lower() in ("off", "0", "none", "false"):
        return None
    root = root or os.path.join(os.path.expanduser("~"), ".cache", "torch_tpu")
    from torch_tpu import __version__

    return os.path.join(root, f"aot-{__version__}-host-{_decompositions_digest()}")


@functools.cache
def _decompositions_digest() -> str:
    """Which ops AOTAutograd decomposes (those without a tpu kernel) shapes the cached graphs."""
    import hashlib

    names = sorted(op.name() + "." + op._overloadname for op in _decompositions())
    return hashlib.sha1("\n".join(names).encode()).hexdigest()[:12]


@contextlib.contextmanager
def _disk_cache():
    """AOTAutogradCache, bundled, in our directory, for the compile of one Dynamo graph."""
    d = cache_dir()
    if d is None:
        with torch._functorch.config.patch(enable_autograd_cache=False):
            yield
        return
    import torch._inductor.codecache as codecache
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

    # The entry key hashes Inductor's state as well. Two parts of it cost 1.6 s per process and
    # say nothing about our backend: registering Inductor's code generators for every device
    # (imports, 1.3 s) to list their custom passes, and hashing Inductor's source (0.3 s); the
    # torch version stands for the latter. Patched only while our graph compiles.
    # Under one re-entrant lock, patched by the outermost entry only, so that concurrent or
    # nested compiles never save a patched value as the original.
    with _patch_lock:
        outermost = _patch_depth[0] == 0
        if outermost:
            patches = {"init_backend_registration": lambda: None, "torch_key": _torch_version_key}
            saved = {k: getattr(codecache, k) for k in patches if hasattr(codecache, k)}
            saved_dir = AOTAutogradCache.__dict__["_get_tmp_dir"]
            AOTAutogradCache._get_tmp_dir = classmethod(lambda cls: d)
            for k in saved:
                setattr(codecache, k, patches[k])
        _patch_depth[0] += 1
        try:
            with torch._functorch.config.patch(enable_autograd_cache=True, bundled_autograd_cache=True,
                                               force_non_lazy_backward_lowering=True):
                yield
        finally:
            _patch_depth[0] -= 1
            if outermost:
                AOTAutogradCache._get_tmp_dir = saved_dir
                for k, v in saved.items():
                    setattr(codecache, k, v)


_patch_lock = threading.RLock()
_patch_depth = [0]


def _torch_version_key() -> bytes:
    return f"torch {torch.__version__} {torch.version.git_version}".encode()


def _graph_compiler(kind: str, sink: list | None = None):
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        _bump("graphs")
        out = _output_code_type()(gm, kind)
        _remember(out.graph)
        if sink is not None:
            sink.append(out.graph)
        return out

    return SerializableAOTDispatchCompiler(_output_code_type(), compile_graph)


def tpu_backend(gm: torch.fx.GraphModule, example_inputs, options: dict | None = None, mode: Any = None):
    """The Dynamo backend "tpu"."""
    unknown = set(options or {}) - _KNOWN_OPTIONS
    if unknown:
        raise ValueError(f"[torch.compile] unknown tpu backend option(s) {sorted(unknown)}; expected {sorted(_KNOWN_OPTIONS)}")
    from torch._dynamo.backends.common import aot_autograd

    with _disk_cache():
        compiled = aot_autograd(
            fw_compiler=_graph_compiler("forward"),
            bw_compiler=_graph_compiler("backward"),
            inference_compiler=_graph_compiler("inference"),
            decompositions=_decompositions(),
            keep_inference_input_mutations=True,
        )(gm, example_inputs)
    from torch_tpu._internal import buckets

    sizes = buckets.enabled()
    plan = buckets.plan_for(gm, example_inputs) if sizes else None
    if plan is None:
        return compiled
    sym, p = plan
    return buckets.BucketedGraph(gm, example_inputs, sym, p, compiled, _compile_padded, sizes)


def _compile_padded(fn, example, bucket: int, owner) -> Any:
    """AOTAutograd over `fn` (a padded interpretation of a Dynamo graph, static at `bucket`);
    its forward/backward graphs are captured like any other and counted per bucket."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch_tpu._internal import buckets

    sink = buckets._COMPILATIONS.setdefault((owner.id, bucket), [])
    gm = buckets.fn_as_graph_module(fn, len(example))
    with torch._functorch.config.patch(enable_autograd_cache=False):
        return aot_module_simplified(
            gm, example,
            fw_compiler=_graph_compiler("forward", sink),
            bw_compiler=_graph_compiler("backward", sink),
            inference_compiler=_graph_compiler("inference", sink),
            decompositions=_decompositions(),
            keep_inference_input_mutations=True,
        )


def _on_tpu(example_inputs) -> bool:
    return any(isinstance(x, torch.Tensor) and x.device.type == "tpu" for x in example_inputs)


def register_dynamo_backend(registry) -> None:
    """Registers "tpu" in torch._dynamo.backends.registry (`registry`)."""
    if "tpu" not in registry._COMPILER_FNS:
        registry.register_backend(tpu_backend, name="tpu")


def route_inductor(compile_fx_module) -> None:
    """A plain torch.compile(m) calls Inductor's compile_fx, whose code generator for "tpu" is
    Pallas (jax); graphs with tpu inputs go to the "tpu" backend instead."""
    orig = compile_fx_module.compile_fx
    if getattr(orig, "_torch_tpu_routed", False):
        return

    @functools.wraps(orig)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if _on_tpu(example_inputs_):
            _warn_inductor_options(kwargs.get("config_patches"))
            return tpu_backend(model_, example_inputs_)
        return orig(model_, example_inputs_, *args, **kwargs)

    compile_fx._torch_tpu_routed = True
    compile_fx_module.compile_fx = compile_fx


_warned_options: set = set()


def _warn_inductor_options(patches) -> None:
    """Inductor's options (torch.compile(..., options=...) without a backend, as TorchTitan's
    FlexAttention passes max_autotune) do not apply to the tpu backend: named once."""
    names = tuple(sorted(patches or {}))
    if names and names not in _warned_options:
        _warned_options.add(names)
        warnings.warn(f"[torch.compile tpu] graphs on tpu tensors compile with the tpu backend; Inductor "
                      f"options {list(names)} do not apply to them and are ignored", stacklevel=3)


class _NoInductorCodegen:
    """Inductor's code generator for device "tpu": refuses with a clear error. torch 2.14
    registers Pallas code generation (Google's torch_tpu._internal.pallas, JAX) for "tpu" when
    nothing else is registered; compile_fx sends tpu graphs to our backend before code
    generation, so only a caller that enters Inductor below compile_fx gets here."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "[torch.compile tpu] Inductor has no code generator for device tpu; got a graph on tpu tensors "
            "inside Inductor's code generation, expected torch.compile(..., backend=\"tpu\") (a plain "
            "torch.compile routes tpu graphs there)")


def refuse_inductor_codegen(common_module) -> None:
    """Registers _NoInductorCodegen for "tpu" in torch._inductor.codegen.common before
    Inductor's own registration can pick Pallas (it registers only where nothing is)."""
    if common_module.get_scheduling_for_device("tpu") is None:
        common_module.register_backend_for_device("tpu", _NoInductorCodegen, _NoInductorCodegen)
