"""The op_db runner: each OpInfo entry's samples run on CPU and on tpu (functional, out= and
in-place variants, plus a non-contiguous copy of the first sample) and are compared; float32
gradients of a weighted sum of the outputs are compared for autograd-capable entries.

Judging rules (docs: README "Conformance"):
- An entry passes forward when every judged dtype it supports on CPU passes all samples.
  Judged dtypes: float32, int64, int32, uint8, int8, int16, bool. float64, complex and
  float16 are not judged (no TPU hardware path; bf16 can be run with --dtypes bfloat16).
- An entry passes backward when float32 gradients match CPU for all samples.
- Random ops compare shape, dtype and distribution; uninitialized ones shape and dtype.
- Singular and eigen vectors are unique up to each column's sign: their absolute values are
  compared (SIGN_FREE; XLA's SVD and eigh pick other signs than LAPACK's).
- Samples come from CPU; the CPU fallback is off, so a pass means the op ran on tpu.
"""
import time
import warnings

import torch
from torch.utils import _pytree as pytree

from torch_tpu.opinfo.common import (
    DEV, Mismatch, Progress, SkipSample, Timeout, classify, compare, compare_random, convert,
    convert_kwargs, fallback_count, samples as sample_list, seed, sync_quietly, time_limit, to_device, worst,
)

JUDGED_DTYPES = (torch.float32, torch.int64, torch.int32, torch.uint8, torch.int8, torch.int16, torch.bool)

# Ops whose values are random or uninitialized: compared by shape, dtype (and distribution).
UNINITIALIZED = {
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
}
RANDOM = UNINITIALIZED | {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randn", "randn_like",
    "randint", "randint_like", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "svd_lowrank", "pca_lowrank",
}

# Heavy-tailed distributions: no finite moments to compare, so shape and dtype only.
NO_MOMENTS = UNINITIALIZED | {"cauchy"}

# The CI subset (`--fast`): common ops across the families, about 60 entries.
FAST_OPS = (
    "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding", "true_divide", "pow",
    "remainder", "fmod", "maximum", "minimum", "eq", "ne", "lt", "ge", "logical_and",
    "bitwise_and", "where", "clamp", "abs", "neg", "exp", "log", "log1p", "sqrt", "rsqrt",
    "sin", "cos", "tanh", "sigmoid", "floor", "round", "trunc", "sign", "reciprocal", "erf",
    "lerp", "addcmul", "addcdiv", "sum", "mean", "prod", "amax", "amin", "argmax", "var",
    "std", "softmax", "log_softmax", "mm", "bmm", "matmul", "addmm", "nn.functional.linear",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    "nn.functional.layer_norm", "nn.functional.mse_loss", "nn.functional.cross_entropy",
    "zeros_like", "ones_like", "full_like", "randn", "empty_like", "fill",
    "asin", "lgamma", "digamma", "special.i0e", "xlogy", "gcd", "bitwise_left_shift",
    "nn.functional.elu", "nn.functional.softplus", "logaddexp",
)


# Outputs that are singular/eigen vectors (unique up to sign per column): compared by |x|.
SIGN_FREE = {"svd": (0, 2), "linalg.svd": (0, 2), "linalg.eigh": (1,)}


def _unsign(name, out):
    idx = SIGN_FREE.get(name)
    if idx is None or not isinstance(out, (tuple, list)):
        return out
    return tuple(o.abs() if i in idx and isinstance(o, torch.Tensor) else o for i, o in enumerate(out))


# Entries whose sample args are CPU tensors by contract (e.g. index lists): only the input moves.
CPU_ARGS = {"tensor_split"}


def entry_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def select(names=None, fast=False):
    """The op_db entries to run: `names` (entry or op names), the fast subset, or all."""
    from torch.testing._internal.common_methods_invocations import op_db

    if fast:
        names = list(FAST_OPS) + list(names or ())
    if not names:
        return list(op_db)
    want = set(names)
    picked = [op for op in op_db if entry_name(op) in want or op.name in want]
    known = {entry_name(op) for op in op_db} | {op.name for op in op_db}
    unknown = sorted(want - known)
    if unknown:
        raise ValueError(f"[opinfo] unknown op_db entries: {', '.join(unknown)}")
    return picked


def _check(name, actual, expected, what, on_device=True):
    actual, expected = _unsign(name, actual), _unsign(name, expected)
    if name in RANDOM:
        compare_random(actual, expected, name in NO_MOMENTS, what)
    else:
        compare(actual, expected, what, on_device)


def _empty_like_tree(expected, device):
    def mk(e):
        if isinstance(e, torch.Tensor):
            return torch.empty(e.shape, dtype=e.dtype, device=device)
        raise SkipSample("non-tensor output")

    if isinstance(expected, torch.Tensor):
        return mk(expected)
    if isinstance(expected, (tuple, list)) and all(isinstance(e, torch.Tensor) for e in expected):
        return tuple(mk(e) for e in expected)
    raise SkipSample("output is not a tensor or tuple of tensors")


def run_sample(op, name, s, variants=True):
    """Runs one SampleInput on CPU and tpu. Raises SkipSample when CPU rejects it, Mismatch
    or the tpu exception otherwise."""
    memo = {}
    t_in = convert(s.input, DEV, memo)
    t_args = s.args if name in CPU_ARGS else convert(s.args, DEV, memo)
    t_kwargs = convert_kwargs(s.kwargs, DEV, memo)
    try:
        expected = op(s.input, *s.args, **s.kwargs)
    except Exception as e:
        raise SkipSample(f"CPU raised {type(e).__name__}") from None
    actual = op(t_in, *t_args, **t_kwargs)
    _check(name, actual, expected, "output", bool(memo) or "device" in s.kwargs)
    if not variants:
        return
    if op.supports_out:
        try:
            c_out = _empty_like_tree(expected, "cpu")
            op.op(s.input, *s.args, **s.kwargs, out=c_out)
            ok = True
        except Exception:
            ok = False
        if ok:
            t_out = _empty_like_tree(expected, DEV)
            op.op(t_in, *t_args, **t_kwargs, out=t_out)
            _check(name, t_out, c_out, "out=")
    inplace = op.get_inplace()
    if inplace is not None and isinstance(s.input, torch.Tensor) and not s.broadcasts_input:
        c_self = s.input.detach().clone()
        try:
            inplace(c_self, *s.args, **s.kwargs)
            ok = True
        except Exception:
            ok = False
        if ok:
            t_self = to_device(s.input, requires_grad=False)
            inplace(t_self, *t_args, **t_kwargs)
            _check(name, t_self, c_self, "in-place")


def run_forward_dtype(op, name, dtype):
    """{status, detail, samples, missing} for one dtype."""
    try:
        samples = sample_list(op, dtype)
    except Exception as e:
        return {"status": "skipped", "detail": f"sample generation failed: {type(e).__name__}: {e}"[:200]}
    judged, skipped = 0, 0
    for i, s in enumerate(samples):
        cases = [(s, True)]
        if i == 0:
            try:
                cases.append((s.noncontiguous(), False))
            except Exception:
                pass
        for case, variants in cases:
            before = fallback_count()
            try:
                seed(1000 + i)
                run_sample(op, name, case, variants)
                judged += 1
            except SkipSample:
                skipped += 1
            except (Exception, Timeout) as e:
                status, detail, missing = classify(e)
                sync_quietly()
                if isinstance(e, Timeout):
                    raise
                return {"status": status, "detail": f"sample {i}: {detail}", "samples": judged,
                        "missing": missing}
            assert fallback_count() == before, f"[opinfo] {name} used the CPU fallback"
    if judged == 0:
        return {"status": "skipped", "detail": f"no sample ran on CPU ({skipped} rejected)", "samples": 0}
    return {"status": "pass", "samples": judged}


def _leaves(memo):
    return [t for _, t in memo.values() if t.requires_grad]


def _grad_side(op, name, s, device):
    memo = {}
    inp = convert(s.input, device, memo)
    args = s.args if name in CPU_ARGS else convert(s.args, device, memo)
    kwargs = convert_kwargs(s.kwargs, device, memo)
    leaves = _leaves(memo)
    out = s.output_process_fn_grad(op(inp, *args, **kwargs))
    outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    picked = [i for i, o in enumerate(outs) if o.requires_grad and o.is_floating_point()]
    return leaves, outs, picked


def run_backward_sample(op, name, s, idx):
    try:
        c_leaves, c_outs, picked = _grad_side(op, name, s, "cpu")
    except Exception as e:
        raise SkipSample(f"CPU raised {type(e).__name__}") from None
    if not c_leaves or not picked:
        raise SkipSample("no differentiable output")
    gen = torch.Generator().manual_seed(idx)
    weights = [torch.randn(c_outs[i].shape, generator=gen, dtype=c_outs[i].dtype) for i in picked]
    try:
        loss = sum((c_outs[i] * w).sum() for i, w in zip(picked, weights))
        c_grads = torch.autograd.grad(loss, c_leaves, allow_unused=True)
    except Exception as e:
        raise SkipSample(f"CPU backward raised {type(e).__name__}") from None
    t_leaves, t_outs, t_picked = _grad_side(op, name, s, DEV)
    if t_picked != picked:
        raise Mismatch(f"differentiable outputs {t_picked}, expected {picked}")
    loss = sum((t_outs[i] * w.to(DEV)).sum() for i, w in zip(picked, weights))
    t_grads = torch.autograd.grad(loss, t_leaves, allow_unused=True)
    for k, (tg, cg, leaf) in enumerate(zip(t_grads, c_grads, c_leaves)):
        cg = torch.zeros_like(leaf) if cg is None else cg
        tg = torch.zeros_like(leaf, device=DEV) if tg is None else tg
        _check(name, tg, cg, f"grad[{k}]")


def run_backward(op, name):
    try:
        samples = sample_list(op, torch.float32, requires_grad=True)
    except Exception as e:
        return {"status": "skipped", "detail": f"sample generation failed: {type(e).__name__}"}
    judged = 0
    for i, s in enumerate(samples):
        before = fallback_count()
        try:
            seed(2000 + i)
            run_backward_sample(op, name, s, i)
            judged += 1
        except SkipSample:
            pass
        except (Exception, Timeout) as e:
            status, detail, missing = classify(e)
            sync_quietly()
            if isinstance(e, Timeout):
                raise
            return {"status": status, "detail": f"sample {i}: {detail}", "samples": judged, "missing": missing}
        assert fallback_count() == before, f"[opinfo] {name} used the CPU fallback"
    if judged == 0:
        return {"status": "skipped", "detail": "no differentiable sample ran on CPU", "samples": 0}
    return {"status": "pass", "samples": judged}


def _summarize(results, label):
    """The entry-level verdict from per-dtype results."""
    if not results:
        return {"status": "skipped", "reason": f"no {label} dtype supported on CPU"}
    failing = {d: r for d, r in results.items() if r["status"] not in ("pass", "skipped")}
    if not failing:
        if all(r["status"] == "skipped" for r in results.values()):
            first = next(iter(results.values()))
            return {"status": "skipped", "reason": first.get("detail", "")}
        return {"status": "pass"}
    status = worst([r["status"] for r in failing.values()])
    d, r = next((d, r) for d, r in failing.items() if r["status"] == status)
    out = {"status": status, "reason": f"{d}: {r.get('detail', '')}"}
    missing = sorted({r["missing"] for r in failing.values() if r.get("missing")})
    if missing:
        out["missing"] = missing
    return out


def run_entry(op, dtypes=JUDGED_DTYPES, grad=True, limit_s=60.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run_entry(op, dtypes, grad, limit_s)


def _run_entry(op, dtypes, grad, limit_s):
    name = entry_name(op)
    cpu_dtypes = op.supported_dtypes("cpu")
    res = {"dtypes": {}}
    t0 = time.time()
    try:
        with time_limit(limit_s):
            for dt in dtypes:
                if dt in cpu_dtypes:
                    res["dtypes"][str(dt).replace("torch.", "")] = run_forward_dtype(op, name, dt)
    except Timeout:
        sync_quietly()
        res["dtypes"]["timeout"] = {"status": "timeout", "detail": f"forward over {limit_s:g} s"}
    res["forward"] = _summarize(res["dtypes"], "judged")
    res["forward_s"] = round(time.time() - t0, 2)
    if grad:
        t0 = time.time()
        if not op.supports_autograd:
            res["backward"] = {"status": "skipped", "reason": "no autograd support"}
        elif torch.float32 not in cpu_dtypes:
            res["backward"] = {"status": "skipped", "reason": "no float32 on CPU"}
        else:
            try:
                with time_limit(limit_s):
                    g = run_backward(op, name)
            except Timeout:
                sync_quietly()
                g = {"status": "timeout", "detail": f"backward over {limit_s:g} s"}
            res["grad"] = g
            res["backward"] = _summarize({"float32": g}, "float32")
        res["backward_s"] = round(time.time() - t0, 2)
    return name, res


def _load_checkpoint(path):
    """{entry name: result} from a --checkpoint file (JSON lines; a torn last line is ignored)."""
    import json
    import os

    done = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                done[rec["name"]] = rec["result"]
    return done


def run(names=None, fast=False, dtypes=JUDGED_DTYPES, grad=True, limit_s=60.0, progress=True,
        checkpoint=None):
    """Runs op_db entries; returns the report dict (see README "Conformance"). With
    `checkpoint` (a file path), each finished entry is appended to it as a JSON line and the
    entries already there are not run again: a long run (pjrt: hours, one XLA compile per
    new shape) resumes where it stopped."""
    import json

    import torch_tpu
    from torch_tpu import _C

    ops = select(names, fast)
    report = {"kind": "op_db", "dtypes": [str(d) for d in dtypes], "entries": {}}
    done = _load_checkpoint(checkpoint)
    ckpt = open(checkpoint, "a") if checkpoint else None
    prev_fb = _C._set_cpu_fallback(False)
    prev_prec = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("highest")  # judge semantics; DEFAULT bf16 passes are a speed choice
    bar = Progress(len(ops), progress, "opinfo")
    t0 = time.time()
    try:
        for i, op in enumerate(ops):
            if entry_name(op) in done:
                report["entries"][entry_name(op)] = done[entry_name(op)]
                continue
            bar.update(i, entry_name(op))
            name, res = run_entry(op, dtypes, grad, limit_s)
            report["entries"][name] = res
            if ckpt:
                ckpt.write(json.dumps({"name": name, "result": res}, default=str) + "\n")
                ckpt.flush()
            bar.update(i + 1, name, res["forward"]["status"])
    finally:
        bar.done()
        if ckpt:
            ckpt.close()
        _C._set_cpu_fallback(prev_fb)
        torch_tpu.set_matmul_precision(prev_prec)
    report["elapsed_s"] = round(time.time() - t0, 1)
    report["summary"] = summary(report)
    return report


def summary(report):
    entries = report["entries"]
    fwd = sum(1 for r in entries.values() if r["forward"]["status"] == "pass")
    bwd = sum(1 for r in entries.values() if r.get("backward", {}).get("status") == "pass")
    missing = {}
    for name, r in entries.items():
        for phase in ("forward", "backward"):
            for m in r.get(phase, {}).get("missing", []):
                missing.setdefault(m, {"forward": 0, "backward": 0, "only_blocker": 0})[phase] += 1
                if len(r[phase]["missing"]) == 1 and phase == "forward":
                    missing[m]["only_blocker"] += 1
    by_status = {}
    for r in entries.values():
        for phase in ("forward", "backward"):
            st = r.get(phase, {}).get("status")
            if st:
                by_status.setdefault(phase, {}).setdefault(st, 0)
                by_status[phase][st] += 1
    return {
        "forward_pass": fwd, "backward_pass": bwd, "entries": len(entries), "by_status": by_status,
        "missing_ops": dict(sorted(missing.items(), key=lambda kv: -(kv[1]["forward"] + kv[1]["backward"]))),
    }


def summary_line(report):
    s = report["summary"]
    return f"opinfo: {s['forward_pass']} forward pass, {s['backward_pass']} backward pass, of {s['entries']} entries"
