"""The module_db runner: each ModuleInfo's float32 inputs (generated on CPU) build a module on
CPU; a deep copy moves to tpu; outputs, buffers after forward (e.g. running stats), and
gradients of a weighted output sum w.r.t. parameters and inputs are compared with CPU."""
import copy
import time
import warnings

import torch
from torch.utils import _pytree as pytree

from torch_tpu.opinfo.common import (
    DEV, Mismatch, Progress, SkipSample, Timeout, classify, compare, compare_random, convert,
    fallback_count, seed, sync_quietly, time_limit,
)
from torch_tpu.opinfo.ops import _summarize

# Modules with random outputs: compared by shape, dtype and distribution.
RANDOM_MODULES = {
    "nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d", "nn.AlphaDropout",
    "nn.FeatureAlphaDropout", "nn.RReLU", "nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d",
}

FAST_MODULES = ("nn.Linear", "nn.ReLU", "nn.GELU", "nn.LayerNorm", "nn.MSELoss", "nn.Softmax")


def module_name(mi):
    return mi.name


def select(names=None, fast=False):
    from torch.testing._internal.common_modules import module_db

    if fast:
        names = list(FAST_MODULES) + list(names or ())
    if not names:
        return list(module_db)
    want = set(names)
    picked = [mi for mi in module_db if module_name(mi) in want]
    unknown = sorted(want - {module_name(mi) for mi in module_db})
    if unknown:
        raise ValueError(f"[opinfo] unknown module_db entries: {', '.join(unknown)}")
    return picked


def _check(name, actual, expected, what):
    if name in RANDOM_MODULES:
        compare_random(actual, expected, False, what)
    else:
        compare(actual, expected, what)


def _side(mi, m_cpu, fi, device, training):
    seed(7)
    m = copy.deepcopy(m_cpu).to(device)
    m.train(training)
    memo = {}
    args = convert(fi.args, device, memo)
    kwargs = convert(fi.kwargs, device, memo)
    out = m(*args, **kwargs)
    leaves = [t for _, t in memo.values() if t.requires_grad]
    return m, out, leaves


def run_input(mi, name, inp, grad, training=True):
    """Returns (forward_ok, backward judged?) for one ModuleInput; raises on tpu failure."""
    ci, fi = inp.constructor_input, inp.forward_input
    if fi is None:
        raise SkipSample("no forward input")
    seed(0)
    try:
        m_cpu = mi.module_cls(*ci.args, **ci.kwargs)
        if any(torch.nn.parameter.is_lazy(p) for p in m_cpu.parameters()):
            # Lazy modules draw their weights at the first forward: do it once on CPU, so both
            # sides start from the same weights (tpu's generator is its own, as CUDA's).
            with torch.no_grad():
                m_cpu(*fi.args, **fi.kwargs)
        m_c, out_c, leaves_c = _side(mi, m_cpu, fi, "cpu", training)
    except Exception as e:
        raise SkipSample(f"CPU raised {type(e).__name__}") from None
    m_t, out_t, leaves_t = _side(mi, m_cpu, fi, DEV, training)
    _check(name, out_t, out_c, "output")
    compare(dict(m_t.named_buffers()), dict(m_c.named_buffers()), "buffers")
    if not grad:
        return False
    outs_c = [o for o in pytree.tree_leaves(out_c) if isinstance(o, torch.Tensor)]
    outs_t = [o for o in pytree.tree_leaves(out_t) if isinstance(o, torch.Tensor)]
    picked = [i for i, o in enumerate(outs_c) if o.requires_grad and o.is_floating_point()]
    params_c = [p for p in m_c.parameters() if p.requires_grad]
    params_t = [p for p in m_t.parameters() if p.requires_grad]
    wrt_c, wrt_t = params_c + leaves_c, params_t + leaves_t
    if not picked or not wrt_c:
        return False
    gen = torch.Generator().manual_seed(1)
    weights = [torch.randn(outs_c[i].shape, generator=gen, dtype=outs_c[i].dtype) for i in picked]
    try:
        c_grads = torch.autograd.grad(sum((outs_c[i] * w).sum() for i, w in zip(picked, weights)),
                                      wrt_c, allow_unused=True)
    except Exception:
        return False
    if len(outs_t) != len(outs_c) or not all(outs_t[i].requires_grad for i in picked):
        raise Mismatch("differentiable outputs differ from CPU")
    t_grads = torch.autograd.grad(sum((outs_t[i] * w.to(DEV)).sum() for i, w in zip(picked, weights)),
                                  wrt_t, allow_unused=True)
    for k, (tg, cg, leaf) in enumerate(zip(t_grads, c_grads, wrt_c)):
        cg = torch.zeros_like(leaf) if cg is None else cg
        tg = torch.zeros_like(leaf, device=DEV) if tg is None else tg
        if name in RANDOM_MODULES:
            compare_random(tg, cg, True, f"grad[{k}]")
        else:
            compare(tg, cg, f"grad[{k}]")
    return True


def run_entry(mi, grad=True, limit_s=60.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run_entry(mi, grad, limit_s)


def _run_entry(mi, grad, limit_s):
    name = module_name(mi)
    res = {}
    fwd = {"status": "pass", "samples": 0}
    bwd = {"status": "pass", "samples": 0}
    t0 = time.time()
    if torch.float32 not in mi.supported_dtypes("cpu"):
        res["forward"] = {"status": "skipped", "reason": "no float32"}
        return name, res
    try:
        with time_limit(limit_s):
            seed(0)
            inputs = mi.module_inputs_func(mi, device="cpu", dtype=torch.float32, requires_grad=True, training=True)
            for i, inp in enumerate(inputs):
                before = fallback_count()
                try:
                    judged_grad = run_input(mi, name, inp, grad and bwd["status"] == "pass")
                    fwd["samples"] += 1
                    bwd["samples"] += int(judged_grad)
                except SkipSample:
                    pass
                except Mismatch as e:
                    # A mismatch in gradients only fails backward; forward compares first.
                    status, detail, _ = classify(e)
                    target = bwd if str(e).startswith("grad") or "differentiable" in str(e) else fwd
                    target.update(status=status, detail=f"input {i}: {detail}")
                    if target is fwd:
                        break
                except Exception as e:
                    status, detail, missing = classify(e)
                    sync_quietly()
                    fwd.update(status=status, detail=f"input {i}: {detail}", missing=missing)
                    break
                assert fallback_count() == before, f"[opinfo] {name} used the CPU fallback"
    except Timeout:
        sync_quietly()
        fwd.update(status="timeout", detail=f"over {limit_s:g} s")
    except Exception as e:  # the inputs function itself failed
        fwd.update(status="skipped", detail=f"module_inputs_func failed: {type(e).__name__}")
    if fwd["status"] == "pass" and fwd["samples"] == 0:
        fwd.update(status="skipped", detail="no input ran on CPU")
    res["forward"] = _summarize({"float32": fwd}, "float32")
    if grad:
        if fwd["status"] != "pass" and fwd["status"] != "skipped":
            bwd = {"status": fwd["status"], "detail": "forward failed: " + fwd.get("detail", ""),
                   "missing": fwd.get("missing")}
        elif bwd["status"] == "pass" and bwd["samples"] == 0:
            bwd = {"status": "skipped", "detail": "nothing differentiable"}
        res["backward"] = _summarize({"float32": bwd}, "float32")
    res["elapsed_s"] = round(time.time() - t0, 2)
    return name, res


def run(names=None, fast=False, grad=True, limit_s=60.0, progress=True):
    import torch_tpu
    from torch_tpu import _C
    from torch_tpu.opinfo.ops import summary

    mods = select(names, fast)
    report = {"kind": "module_db", "entries": {}}
    prev_fb = _C._set_cpu_fallback(False)
    prev_prec = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("highest")
    bar = Progress(len(mods), progress, "moduledb")
    t0 = time.time()
    try:
        for i, mi in enumerate(mods):
            bar.update(i, module_name(mi))
            name, res = run_entry(mi, grad, limit_s)
            report["entries"][name] = res
            bar.update(i + 1, name, res["forward"]["status"])
    finally:
        bar.done()
        _C._set_cpu_fallback(prev_fb)
        torch_tpu.set_matmul_precision(prev_prec)
    report["elapsed_s"] = round(time.time() - t0, 1)
    report["summary"] = summary(report)
    return report


def summary_line(report):
    s = report["summary"]
    return f"moduledb: {s['forward_pass']} forward pass, {s['backward_pass']} backward pass, of {s['entries']} entries"
