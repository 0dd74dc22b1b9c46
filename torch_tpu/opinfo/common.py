"""Shared pieces of the conformance runner: moving samples to tpu (keeping strides), comparing
results with PyTorch's cross-device tolerances, per-entry time limits and the progress line.

Import order matters: torch_tpu must be imported before torch.testing._internal.common_device_type
(docs: /work/shared/notes/privateuse1.md section 5), so this module imports it first.
"""
import contextlib
import re
import signal
import sys
import time

import torch
from torch.utils import _pytree as pytree

import torch_tpu

DEV = "tpu"

# Tolerances (atol, rtol) for float outputs. float32 follows test_ops.py::test_compare_cpu
# (PyTorch's own device-vs-CPU check, 1e-3/1e-3); bf16/f16 are looser, as OpInfo's defaults.
# Integer and bool outputs compare exactly.
TOLERANCES = {
    torch.float32: (1e-3, 1e-3),
    torch.float64: (1e-5, 1e-5),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.float16: (1e-2, 1e-2),
    # Complex results (FFTs, polar, ... of float32 inputs) compare as their real type does.
    torch.complex64: (1e-3, 1e-3),
    torch.complex128: (1e-5, 1e-5),
    torch.complex32: (1e-2, 1e-2),
}

STATUS_ORDER = ("pass", "skipped", "mismatch", "error", "timeout", "not-implemented")


class Mismatch(Exception):
    """The tpu result differs from CPU."""


class Timeout(BaseException):
    """The entry ran past its time limit (BaseException: op code can't swallow it)."""


class SkipSample(Exception):
    """The sample can't be judged (CPU raised, unsupported input kind)."""


def _on_alarm(signum, frame):
    raise Timeout()


@contextlib.contextmanager
def time_limit(seconds):
    """Raises Timeout in the main thread after `seconds` (checked between Python bytecodes)."""
    if not seconds or seconds <= 0:
        yield
        return
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def to_device(t, device=DEV, requires_grad=None):
    """A copy of CPU tensor `t` on `device` with the same sizes, strides, storage offset and
    storage size (so non-contiguous and overlapping samples stay so, and as_strided / set_ see
    the same storage). The result
    is a leaf; requires_grad defaults to t's."""
    rg = t.requires_grad if requires_grad is None else requires_grad
    t = t.detach()
    if t.layout != torch.strided:
        raise SkipSample(f"layout {t.layout}")
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size():
        r = t.to(device, copy=True)
    else:
        st = t.untyped_storage()
        n = st.nbytes() // t.element_size()
        base = torch.empty(0, dtype=t.dtype).set_(st, 0, (n,), (1,))
        r = base.to(device, copy=True).as_strided(t.size(), t.stride(), t.storage_offset()).detach()
    if rg and (t.is_floating_point() or t.is_complex()):
        r.requires_grad_(True)
    return r


def convert(tree, device, memo=None):
    """Maps every tensor in a nested args/kwargs structure to a fresh leaf on `device` (one
    copy per distinct tensor, so aliasing inside a sample is kept); `device=` kwargs follow."""
    memo = {} if memo is None else memo

    def conv(x):
        if isinstance(x, torch.Tensor):
            key = id(x)
            if key not in memo:
                memo[key] = (x, to_device(x, device))  # keep x alive so ids stay unique
            return memo[key][1]
        if isinstance(x, torch.Generator):
            raise SkipSample("sample passes a torch.Generator")
        if device != "cpu" and (isinstance(x, torch.device) and x.type == "cpu" or isinstance(x, str) and x == "cpu"):
            return device  # a device argument (to, arange(..., device=), ...)
        return x

    return pytree.tree_map(conv, tree)


def convert_kwargs(kwargs, device, memo):
    out = convert(kwargs, device, memo)  # device="cpu" becomes `device`
    if "device" in out and out["device"] is not None:
        out["device"] = device
    return out


def seed(n):
    """Seeds the CPU generator only (torch.manual_seed also seeds tpu generators, recording a
    stack trace each time while they are lazily initialized: 15 ms a call)."""
    torch.random.default_generator.manual_seed(n)


def samples(op, dtype, requires_grad=False):
    """op's SampleInputs on CPU as a list. Calls sample_inputs_func directly: OpInfo's
    sample_inputs() wraps it in a TrackedInputIter that inspects the call stack (0.3 s)."""
    seed(0)
    return list(op.sample_inputs_func(op, "cpu", dtype, requires_grad))


def tolerance(dtype):
    return TOLERANCES.get(dtype, (0.0, 0.0))


def compare(actual, expected, what="output", on_device=True):
    """Raises Mismatch unless the tpu `actual` matches the CPU `expected` (nested structures,
    tensors compared on CPU with TOLERANCES, NaNs equal). on_device: tensor results must be
    on tpu (false for samples with no tensor or device argument, e.g. arange(2))."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        raise Mismatch(f"{what}: {len(a_leaves)} leaves, expected {len(e_leaves)}")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"{what}[{i}]" if len(e_leaves) > 1 else what
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Mismatch(f"{where}: got {type(a).__name__}, expected a tensor")
            if on_device and a.device.type != DEV and a.numel() > 0:
                raise Mismatch(f"{where}: result on {a.device}, expected on {DEV}")
            if a.dtype != e.dtype:
                raise Mismatch(f"{where}: dtype {a.dtype}, expected {e.dtype}")
            if a.shape != e.shape:
                raise Mismatch(f"{where}: shape {tuple(a.shape)}, expected {tuple(e.shape)}")
            atol, rtol = tolerance(e.dtype)
            try:
                torch.testing.assert_close(a.detach().cpu(), e.detach(), atol=atol, rtol=rtol,
                                           equal_nan=True, check_device=False, check_stride=False)
            except AssertionError as err:
                raise Mismatch(f"{where}: {_short(err)}") from None
        elif isinstance(e, float) and isinstance(a, (float, int)):
            if not (abs(a - e) <= 1e-3 + 1e-3 * abs(e) or (a != a and e != e)):
                raise Mismatch(f"{where}: {a} != {e}")
        elif a != e:
            raise Mismatch(f"{where}: {a!r} != {e!r}")


def compare_random(actual, expected, shape_only, what="output"):
    """Random/uninitialized ops: same structure, shapes and dtypes; unless shape_only, outputs
    with >= 100 elements also agree in mean (5 sigma) and spread (std within 2x)."""
    a_leaves, _ = pytree.tree_flatten(actual)
    e_leaves, _ = pytree.tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        raise Mismatch(f"{what}: {len(a_leaves)} leaves, expected {len(e_leaves)}")
    for a, e in zip(a_leaves, e_leaves):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(a, torch.Tensor) or a.dtype != e.dtype or a.shape != e.shape:
            raise Mismatch(f"{what}: got {_meta(a)}, expected {_meta(e)}")
        if shape_only or e.numel() < 100:
            continue
        a64, e64 = a.detach().cpu().double(), e.detach().double()
        if not bool(e64.isfinite().all()):
            continue
        if not bool(a64.isfinite().all()):
            raise Mismatch(f"{what}: non-finite values where CPU has none")
        n = e64.numel()
        ma, me, sa, se = a64.mean().item(), e64.mean().item(), a64.std().item(), e64.std().item()
        if abs(ma - me) > 5 * ((sa * sa + se * se) / n) ** 0.5 + 1e-6:
            raise Mismatch(f"{what}: mean {ma:.4g}, CPU mean {me:.4g} (std {se:.4g}, n {n})")
        if se > 1e-6 and not (0.5 < sa / se < 2.0):
            raise Mismatch(f"{what}: std {sa:.4g}, CPU std {se:.4g}")


def _meta(x):
    if isinstance(x, torch.Tensor):
        return f"{x.dtype}{list(x.shape)}"
    return type(x).__name__


def _short(err, limit=300):
    s = " ".join(str(err).split())
    return s if len(s) <= limit else s[:limit] + "..."


_MISSING = re.compile(r"\[(aten::[\w.]+)\] has no tpu lowering")
_MISSING_OVERRIDEABLE = re.compile(r"(\w+_overrideable) not implemented")


def classify(err):
    """(status, detail, missing op or None) for an exception raised while running on tpu."""
    if isinstance(err, Timeout):
        return "timeout", "time limit", None
    if isinstance(err, Mismatch):
        return "mismatch", _short(err), None
    msg = str(err)
    m = _MISSING.search(msg)
    if m:
        return "not-implemented", m.group(1), m.group(1)
    m = _MISSING_OVERRIDEABLE.match(msg)
    if m:
        return "not-implemented", f"aten::{m.group(1)}", f"aten::{m.group(1)}"
    if isinstance(err, NotImplementedError):
        return "not-implemented", _short(err, 160), None
    return "error", f"{type(err).__name__}: {_short(err, 240)}", None


def fallback_count():
    return sum(torch_tpu._C._metrics().get("fallbacks", {}).values())


def sync_quietly():
    """Drains the tpu stream; an asynchronous error from an abandoned op is swallowed."""
    try:
        torch.tpu.synchronize()
    except Exception:
        pass


class Progress:
    """The runner's progress bar: tqdm on stderr when it is a terminal (torch_tpu._internal.
    progress); `enabled=False` (--quiet) or TORCH_TPU_PROGRESS=0 turns it off."""

    def __init__(self, total, enabled=True, label="opinfo"):
        from torch_tpu._internal import progress

        self.counts = {}
        self.done_n = 0
        self.bar = progress.bar(total, label, enabled)

    def update(self, i, name, status=None):
        if status:
            self.counts[status] = self.counts.get(status, 0) + 1
        if i > self.done_n:
            self.bar.update(i - self.done_n)
            self.done_n = i
        c = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        self.bar.set_postfix_str(f"{name[:36]} {c}")

    def done(self):
        self.bar.close()


def worst(statuses):
    return max(statuses, key=STATUS_ORDER.index) if statuses else "skipped"
