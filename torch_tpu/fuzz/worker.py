"""One fuzz call: draw it from (seed, index), run it on CPU and on tpu, judge the pair.

Call i of seed s is a pure function of (s, i): `python -m torch_tpu.fuzz --seed s --call i`
replays it. The verdict is "ok" (equal within the OpInfo runner's tolerances, NaNs at the
same places; or both raised) or one of CATEGORIES."""
import contextlib
import random
import re
import warnings

import torch
from torch.utils import _pytree as pytree

import torch_tpu
from torch_tpu.fuzz.mutate import ORDER_SENSITIVE, _has, describe, mutate
from torch_tpu.fuzz.sources import OpDb, Tables
from torch_tpu.opinfo import common

CATEGORIES = ("crash", "hang", "wrong-values", "wrong-shape", "wrong-dtype", "cpu-raises", "tpu-raises")
# Not failures: tpu-raises-empty is tpu rejecting an input (a dtype, mostly) that CPU let
# through only because it was empty (CPU skips its checks when there is nothing to compute).
OTHER = ("ok", "both-raise", "not-implemented", "cpu-unsupported", "tpu-raises-empty", "skipped")


class Fuzzer:
    """Draws and runs calls; op sources load once per process."""

    def __init__(self, fused_fraction=0.2, sources=("opdb", "table")):
        self.sources = {}
        if "opdb" in sources:
            self.sources["opdb"] = OpDb()
        if "table" in sources:
            t = Tables()
            if t.rows:
                self.sources["table"] = t
        self.fused_fraction = fused_fraction
        torch_tpu._C._set_cpu_fallback(False)
        torch_tpu.set_matmul_precision("highest")  # judge semantics, as the OpInfo runner does

    def draw(self, seed, index):
        rng = random.Random(f"{seed}:{index}")
        gen = torch.Generator().manual_seed(rng.getrandbits(62))
        names = sorted(self.sources)
        call = None
        while call is None:
            call = self.sources[rng.choice(names)].draw(rng)
        tags = mutate(call, rng, gen)
        fused = rng.random() < self.fused_fraction
        mode = "fused" if fused else "strict"
        call.tags = tags
        call.mode = mode
        call.repro = (f"{call.source}:{call.name}({str(call.dtype)[6:]}) {call.variant} {mode} "
                      f"[{','.join(tags)}] args: {describe(call.args, call.kwargs)}")
        return call

    def run(self, call):
        """{"verdict", "detail", "names_op"?} for one drawn call."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return self._run(call)
            except common.SkipSample as e:
                return {"verdict": "skipped", "detail": str(e)}

    def _run(self, call):
        memo = {}
        if call.input_only:
            t_args = [common.convert(call.args[0], common.DEV, memo)] + list(call.args[1:])
        else:
            t_args = common.convert(call.args, common.DEV, memo)
        t_kwargs = common.convert_kwargs(call.kwargs, common.DEV, memo)
        original = _snapshot(call)
        try:
            with cpu_reference(call):
                expected = call.fn(*call.args, **call.kwargs)
            cpu_err = None
        except Exception as e:
            cpu_err = e
        tpu_err, actual = None, None
        try:
            if call.mode == "fused":
                with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
                    actual = _to_cpu(call.fn(*t_args, **t_kwargs))
            else:
                actual = _to_cpu(call.fn(*t_args, **t_kwargs))
            torch.tpu.synchronize()
        except Exception as e:
            tpu_err = e
            common.sync_quietly()
        if cpu_err is not None and tpu_err is not None:
            return {"verdict": "both-raise", "names_op": names_op(tpu_err, call),
                    "detail": f"{type(tpu_err).__name__}: {_short(tpu_err)}"}
        if isinstance(cpu_err, NotImplementedError):  # no CPU kernel for this dtype: no reference
            return {"verdict": "cpu-unsupported", "detail": f"CPU: {_short(cpu_err)}"}
        if cpu_err is not None:
            return {"verdict": "cpu-raises", "detail": f"CPU: {type(cpu_err).__name__}: {_short(cpu_err)}"}
        if tpu_err is not None:
            status, detail, _ = common.classify(tpu_err)
            verdict = "not-implemented" if status == "not-implemented" else "tpu-raises"
            if verdict == "tpu-raises" and _all_empty(expected):
                verdict = "tpu-raises-empty"  # CPU skipped its checks: there was nothing to compute
            return {"verdict": verdict, "detail": f"{type(tpu_err).__name__}: {_short(tpu_err)}"}
        ties = _has(call.name, ORDER_SENSITIVE) and _has_ties(call)
        t_in = [x.cpu() for x in pytree.tree_leaves((t_args, t_kwargs)) if isinstance(x, torch.Tensor)]
        c_in = [x for x in pytree.tree_leaves((call.args, call.kwargs)) if isinstance(x, torch.Tensor)]
        try:
            _judge(actual, t_in, expected, c_in, ties)
        except common.Mismatch as m:
            # bf16/f16: a CPU kernel that rounds intermediates to the low dtype is no better a
            # reference than the op computed in float32 and rounded once (CUDA's opmath); tpu
            # may match either.
            up = _upcast_reference(call, original, expected)
            try:
                if up is None:
                    raise
                _judge(actual, t_in, up[0], up[1], ties)
            except common.Mismatch:
                return {"verdict": mismatch_category(str(m)), "detail": _short(m)}
        return {"verdict": "ok"}


# SDPA's reference is PyTorch's math backend: CPU's default flash kernel misreads overlapping
# (stride-0) q/k/v views and turns rows with NaN/Inf scores into 0 where the math
# definition (and tpu) gives NaN.
SDPA = ("sdpa", "scaled_dot_product_attention")


def cpu_reference(call):
    if _has(call.name, SDPA):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.MATH)
    return contextlib.nullcontext()


def _judge(actual, t_in, expected, c_in, ties):
    if ties and isinstance(expected, tuple):
        actual, expected = actual[0], expected[0]  # which of equal elements comes first is unspecified
    common.compare(actual, expected, "output", on_device=False)
    # Inputs too: an op must not write into an argument CPU leaves alone (and an in-place op
    # must write the same values).
    common.compare(t_in, c_in, "input after the call", on_device=False)


def _snapshot(call):
    """Copies of the CPU arguments (same layouts) before CPU runs the call, or None when not needed."""
    low = (torch.bfloat16, torch.float16)
    if not any(isinstance(x, torch.Tensor) and x.dtype in low for x in pytree.tree_leaves((call.args, call.kwargs))):
        return None
    return pytree.tree_map(lambda x: common.to_device(x, "cpu", False) if isinstance(x, torch.Tensor) else x,
                           (call.args, call.kwargs))


def _upcast_reference(call, original, expected):
    """(outputs, inputs after the call) of the call run on CPU with bf16/f16 tensors as float32,
    converted back to their dtypes; None when it can't run."""
    if original is None:
        return None
    low = (torch.bfloat16, torch.float16)
    dts = [x.dtype for x in pytree.tree_leaves(original) if isinstance(x, torch.Tensor)]
    args, kwargs = pytree.tree_map(lambda x: x.float() if isinstance(x, torch.Tensor) and x.dtype in low else x,
                                   original)
    try:
        with warnings.catch_warnings(), cpu_reference(call):
            warnings.simplefilter("ignore")
            out = call.fn(*args, **kwargs)
    except Exception:
        return None
    o_leaves, spec = pytree.tree_flatten(out)
    e_leaves = pytree.tree_leaves(expected)
    if len(o_leaves) != len(e_leaves):
        return None
    back = pytree.tree_unflatten([o.to(e.dtype) if isinstance(o, torch.Tensor) and isinstance(e, torch.Tensor) else o
                                  for o, e in zip(o_leaves, e_leaves)], spec)
    ins = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    return back, [x.to(dt) for x, dt in zip(ins, dts)]


def _all_empty(out):
    leaves = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
    return bool(leaves) and all(x.numel() == 0 for x in leaves)


def _has_ties(call):
    for x in pytree.tree_leaves((call.args, call.kwargs)):
        if isinstance(x, torch.Tensor) and x.numel() > 1:
            if x.unique().numel() < x.numel() or (x.is_floating_point() and bool(x.isnan().any())):
                return True
    return False


def _to_cpu(out):
    return pytree.tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, out)


def mismatch_category(msg):
    if re.search(r": dtype ", msg):
        return "wrong-dtype"
    if re.search(r": shape |leaves, expected|got \w+, expected a tensor", msg):
        return "wrong-shape"
    return "wrong-values"


def names_op(err, call):
    """Whether tpu's message names the op (an [aten::...] / [op] prefix or the op's name)."""
    msg = str(err)
    base = call.name.split(".")[-1].split("[")[0]
    return bool(re.search(r"\[[\w:.]+\]", msg)) or base in msg


def _short(err, limit=300):
    s = " ".join(str(err).split())
    return s if len(s) <= limit else s[:limit] + "..."
