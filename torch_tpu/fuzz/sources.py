"""Where fuzz calls come from: PyTorch's op_db (OpInfo samples) and our own op tables
(the OpSpec rows of tests/python/test_ops_*.py, when run from a checkout). Each source turns
a random draw into a base call on CPU: a function, its arguments and a label."""
import dataclasses
import glob
import importlib
import os
import sys
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from torch_tpu.opinfo import common, expected
from torch_tpu.opinfo.ops import CPU_ARGS, RANDOM, entry_name

# dtypes a call may run in (float64/complex have no TPU hardware path; the OpInfo runner
# does not judge them either).
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool)

# op_db entries never drawn: ones whose outputs are not a function of their inputs on any
# device (random, uninitialized, allocator-dependent) and ones the OpInfo runner already
# lists as failing forward (torch_tpu/opinfo/expected_failures.txt: known, tracked there).
SKIP_ENTRIES = {
    "nn.functional.multi_head_attention_forward",  # dropout inside
    "item", "tolist", "storage", "data_ptr",
    "sparse.sampled_addmm", "sparse.mm.reduce", "to_sparse",
    "nonzero_static", "torch._scaled_mm", "_refs.empty_permuted",
    "resize_", "resize_as_",  # the grown part is uninitialized memory
}


@dataclasses.dataclass
class BaseCall:
    """A call before mutation: fn(*args, **kwargs) on CPU values."""
    source: str            # "opdb" or "table"
    name: str              # op_db entry name or table row name
    dtype: torch.dtype
    fn: Callable
    args: list
    kwargs: dict
    input_only: bool = False   # only args[0] moves to tpu (CPU_ARGS entries)
    variant: str = "functional"
    meta: Any = None           # the OpInfo or OpSpec
    tags: list = dataclasses.field(default_factory=list)


class OpDb:
    def __init__(self):
        from torch.testing._internal.common_methods_invocations import op_db
        global UnaryUfuncInfo, BinaryUfuncInfo
        from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo
        failing = {e for (e, phase) in expected.load() if phase == "forward"}
        self.entries = []
        for op in op_db:
            name = entry_name(op)
            if name in RANDOM or name in SKIP_ENTRIES or name in failing or op.name in SKIP_ENTRIES:
                continue
            if name.startswith(("_refs.", "_prims.")):
                continue
            dts = [d for d in DTYPES if d in op.supported_dtypes("cpu")]
            if dts:
                self.entries.append((op, name, dts))
        self._cache = {}

    def samples(self, op, name, dtype):
        key = (name, dtype)
        if key not in self._cache:
            try:
                self._cache[key] = common.samples(op, dtype)
            except Exception:
                self._cache[key] = []
        return self._cache[key]

    def draw(self, rng):
        for _ in range(8):
            op, name, dts = rng.choice(self.entries)
            dtype = rng.choice(dts)
            ss = self.samples(op, name, dtype)
            if not ss:
                continue
            s = rng.choice(ss)
            args = [_clone(s.input)] + [_clone(a) for a in s.args]
            kwargs = {k: _clone(v) for k, v in s.kwargs.items()}
            variant, fn = "functional", op
            inplace = op.get_inplace()
            r = rng.random()
            if r < 0.15 and inplace is not None and isinstance(s.input, torch.Tensor) and not s.broadcasts_input:
                variant, fn = "inplace", inplace
            elif r < 0.25 and op.supports_out:
                variant, fn = "out", _with_out(op)
            tags = ["elementwise"] if isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo)) else []
            return BaseCall("opdb", name, dtype, fn, args, kwargs, name in CPU_ARGS, variant, op, tags)
        return None


def _with_out(op):
    """op.op(*args, out=<empty tensors shaped like a CPU run's result>), built per device."""
    def call(*args, **kwargs):
        leaves = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        dev = leaves[0].device if leaves else torch.device(kwargs.get("device") or "cpu")
        cpu_args, cpu_kwargs = pytree.tree_map(  # copies: the probe must not update running stats
            lambda x: x.detach().cpu().clone() if isinstance(x, torch.Tensor) else ("cpu" if x == dev.type else x),
            (args, kwargs))
        ref = op.op(*cpu_args, **cpu_kwargs)
        if isinstance(ref, torch.Tensor):
            out = torch.empty(ref.shape, dtype=ref.dtype, device=dev)
        elif isinstance(ref, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in ref):
            out = tuple(torch.empty(r.shape, dtype=r.dtype, device=dev) for r in ref)
        else:
            raise TypeError(f"[fuzz] {op.name}: no tensor result for out=")
        return op.op(*args, **kwargs, out=out)
    call.__name__ = f"{op.name}_out"
    return call


def _clone(x):
    """A CPU copy keeping sizes, strides and offset (cached samples are never mutated)."""
    if isinstance(x, torch.Tensor):
        return common.to_device(x, "cpu", requires_grad=False)
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x) if not hasattr(x, "_fields") else x
    return x


class Tables:
    """The OpSpec rows of tests/python/test_ops_*.py (empty outside a checkout)."""

    def __init__(self):
        self.rows = []
        here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "python")
        if not os.path.exists(os.path.join(here, "op_harness.py")):
            return
        if here not in sys.path:
            sys.path.insert(0, here)
        harness = importlib.import_module("op_harness")
        self.harness = harness
        seen = set()
        self.elementwise = set()
        for f in sorted(glob.glob(os.path.join(here, "test_ops_*.py"))):
            mod = importlib.import_module(os.path.basename(f)[:-3])
            for v in vars(mod).values():
                if isinstance(v, (list, tuple)) and v and all(isinstance(x, harness.OpSpec) for x in v):
                    for spec in v:
                        if id(spec) not in seen:
                            seen.add(id(spec))
                            self.rows.append(spec)
                            if mod.__name__ in ("test_ops_pointwise", "test_ops_unary"):
                                self.elementwise.add(id(spec))

    def draw(self, rng):
        if not self.rows:
            return None
        spec = rng.choice(self.rows)
        dtype = rng.choice(list(spec.dtypes))
        variant = rng.choice(list(spec.variants))
        seed = rng.getrandbits(31)
        h = self.harness
        args = []
        for a in h.sample_inputs(spec, dtype, variant, seed):
            if isinstance(a, h.Input):
                args.append(a.realize("cpu", False)[1])
            else:
                args.append(a)
        return BaseCall("table", spec.name, dtype, spec.fn, args, {}, False, "functional", spec,
                        [f"row:{variant}"] + (["elementwise"] if id(spec) in self.elementwise else []))
