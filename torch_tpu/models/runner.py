"""Runs one family in each mode against CPU: forward (eval outputs), backward (train-mode loss,
every parameter's gradient) and, for generative kinds, greedy generate (token equality).

The CPU model is built once with a fixed seed; each mode deep-copies it and moves the copy to
tpu. Matmuls run at Precision.HIGHEST and the CPU fallback is off, so a pass means every op ran
on tpu with fp32-faithful numerics. Modes: strict (the default eager mode), fused
(EagerMode.DEFER_AND_FUSE), compile (the model's forward under torch.compile(backend="tpu"));
the runtime is the process's (host, or pjrt with TORCH_TPU_RUNTIME=pjrt)."""
import contextlib
import copy
import time
import warnings

import torch
from torch.utils import _pytree as pytree

import torch_tpu
from torch_tpu.models.kinds import KINDS, NEW_TOKENS
from torch_tpu.models.registry import COMPILED_REFERENCE, EVAL_BACKWARD
from torch_tpu.opinfo.common import Mismatch, Timeout, classify, fallback_count, sync_quietly, time_limit

DEV = "tpu"
MODES = ("strict", "fused", "compile")
PHASES = ("forward", "backward", "generate")
FAILURES = ("mismatch", "error", "timeout", "not-implemented")

# float32 at HIGHEST: tpu and CPU differ only in summation order, so errors are ~1e-6 of the
# values' scale. A tensor passes when |tpu - cpu| <= ATOL * max|cpu| + RTOL * |cpu| everywhere.
ATOL = 1e-4
RTOL = 1e-4
GRAD_FLOOR = 1e-3


def _seed(n):
    torch.random.default_generator.manual_seed(n)


def _to(tree, device):
    return pytree.tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, tree)


def max_error(a, e):
    """(max abs error, error relative to CPU's max abs value)."""
    a, e = a.detach().cpu().double(), e.detach().double()
    if a.numel() == 0:
        return 0.0, 0.0
    err = (a - e).abs().max().item()
    return err, err / max(e.abs().max().item(), 1e-30)


def compare(a, e, what, floor=0.0):
    """Raises Mismatch unless tensor `a` (tpu) matches `e` (CPU); returns the error relative to
    max(max |e|, floor). `floor` is the scale of a gradient that is zero in exact arithmetic
    (an attention key's bias: softmax ignores it), where both sides hold rounding noise."""
    if not isinstance(a, torch.Tensor):
        raise Mismatch(f"{what}: got {type(a).__name__}, expected a tensor")
    if a.device.type != DEV:
        raise Mismatch(f"{what}: on {a.device}, expected on {DEV}")
    if a.shape != e.shape or a.dtype != e.dtype:
        raise Mismatch(f"{what}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}")
    ac, ec = a.detach().cpu(), e.detach()
    if ec.numel() == 0:
        return 0.0
    if not ec.is_floating_point():
        if not torch.equal(ac, ec):
            raise Mismatch(f"{what}: {int((ac != ec).sum())} of {ec.numel()} elements differ")
        return 0.0
    if bool((ac.isnan() != ec.isnan()).any()):
        raise Mismatch(f"{what}: NaNs where CPU has {'none' if not ec.isnan().any() else 'others'}")
    ac, ec = ac.nan_to_num(0.0), ec.nan_to_num(0.0)
    err, _ = max_error(ac, ec)
    scale = max(ec.abs().max().item(), floor)
    rel = err / max(scale, 1e-30)
    bad = (ac.double() - ec.double()).abs() > ATOL * scale + RTOL * ec.double().abs() + 1e-30
    if bool(bad.any()):
        raise Mismatch(f"{what}: max abs error {err:.3g} (relative to max |cpu| {rel:.3g}, scale {scale:.3g}), "
                       f"{int(bad.sum())} of {ec.numel()} elements off")
    return rel


def _output(out, kind):
    if isinstance(out, torch.Tensor):
        return out
    v = getattr(out, kind.output, None)
    if v is None:
        v = out[0]
    return v


def _untie_routers(model):
    """Router weights that transformers initializes to zero (afmoe, ernie4_5_moe) give every
    expert the same score, so top-k picks by its tie order, which is implementation-defined
    (CPU's comes from a partial sort; tpu's takes the lowest index first, as a stable sort).
    Random small values make routing depend on the data, as in a trained model."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            routerish = "router" in name or name.endswith("mlp.gate.weight")
            if routerish and p.dim() == 2 and p.numel() > 0 and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


class Reference:
    """The CPU side of a family: model, inputs and results of each phase (computed lazily)."""

    def __init__(self, fam):
        self.fam, self.kind = fam, KINDS[fam.kind]
        self.config = fam.build_config()
        _seed(0)
        self.model = fam.build_model(self.config).float()
        _untie_routers(self.model)
        self.params = sum(p.numel() for p in self.model.parameters())
        self.train = fam.name not in EVAL_BACKWARD
        self._cache = {}

    def phases(self):
        return PHASES if self.kind.generative else PHASES[:2]

    def inputs(self, phase):
        return self.kind.inputs(self.config, phase)

    def result(self, phase, mode="strict"):
        """The CPU result of `phase`; for compile mode of a COMPILED_REFERENCE family, the CPU
        model's under torch.compile(backend="aot_eager") (the same traced program)."""
        compiled = mode == "compile" and self.fam.name in COMPILED_REFERENCE
        key = (phase, compiled)
        if key not in self._cache:
            m = copy.deepcopy(self.model)
            if compiled:
                torch._dynamo.reset()
                m.forward = torch.compile(m.forward, backend="aot_eager")
                try:
                    self._cache[key] = run_phase(phase, m, self.kind, self.inputs(phase), self.train)
                except Exception as e:  # kept: the phase reports it
                    self._cache[key] = RuntimeError(
                        f"the CPU reference under torch.compile(backend='aot_eager') fails: "
                        f"{type(e).__name__}: {' '.join(str(e).split())[:200]}")
                torch._dynamo.reset()
            else:
                self._cache[key] = run_phase(phase, m, self.kind, self.inputs(phase), self.train)
            if phase == "backward" and not compiled:
                self._check_deterministic(self._cache[key])
        if isinstance(self._cache[key], Exception):
            raise self._cache[key]
        return self._cache[key]

    def result64(self, phase):
        """`phase` computed in float64 on CPU, rounded to float32: the near-exact answer that
        breaks a tie when tpu and the float32 CPU reference differ by rounding noise (a gradient
        that is zero in exact arithmetic holds noise on both sides). None if it can't run."""
        key = (phase, "f64")
        if key not in self._cache:
            try:
                m = copy.deepcopy(self.model).double()
                inputs = {k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v
                          for k, v in self.inputs(phase).items()}
                r = run_phase(phase, m, self.kind, inputs, self.train)
                if phase == "backward":
                    loss, grads = r
                    r = loss.float(), {n: None if g is None else g.float() for n, g in grads.items()}
                elif phase == "forward":
                    r = r.float()
                self._cache[key] = r
            except Exception:
                self._cache[key] = None
        return self._cache[key]

    def _check_deterministic(self, first):
        """A second CPU training step under another seed must agree: otherwise something samples
        in training mode (a dropout the config left on, noise) and tpu can't be compared."""
        again = run_phase("backward", copy.deepcopy(self.model), self.kind, self.inputs("backward"), self.train, seed=1)
        try:
            judge("backward", _on_device(again), first)
        except Mismatch as e:
            raise RuntimeError(f"the CPU training step is random (dropout or sampling left on): {e}") from None


def _on_device(result):
    """A CPU backward result as judge() expects tpu results (a test of the reference itself)."""
    loss, grads = result
    return loss.to(DEV), {n: None if g is None else g.to(DEV) for n, g in grads.items()}


def run_phase(phase, model, kind, inputs, train=True, seed=0):
    """Runs `phase` on `model` (CPU or tpu); returns what is compared: a tensor (forward),
    (loss, {name: grad}) for backward, generated ids for generate."""
    if phase == "forward":
        model.eval()
        with torch.no_grad():
            return _output(model(**inputs), kind)
    if phase == "backward":
        model.train(train)
        _seed(seed)
        loss = model(**inputs).loss
        loss.backward()
        return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    model.eval()
    kw = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1)
    with torch.no_grad():
        return model.generate(**inputs, **kw)


def judge(phase, actual, expected):
    """Raises Mismatch; returns the largest relative error (0 for token equality)."""
    if phase == "forward":
        return compare(actual, expected, "output")
    if phase == "generate":
        if actual.shape != expected.shape or not torch.equal(actual.cpu(), expected):
            raise Mismatch(f"generated tokens differ: tpu {actual.cpu().tolist()}, cpu {expected.tolist()}")
        return 0.0
    loss_t, grads_t = actual
    loss_c, grads_c = expected
    worst = compare(loss_t, loss_c, "loss")
    extra = sorted(set(grads_t) - set(grads_c))
    if extra:
        raise Mismatch(f"tied weights untied by .to('tpu'): extra parameters {', '.join(extra)}")
    missing = sorted(set(grads_c) - set(grads_t))
    if missing:
        raise Mismatch(f"parameters missing on tpu: {', '.join(missing)}")
    # Rounding noise in a gradient scales with the gradients it is summed from: the floor of
    # each gradient's scale is GRAD_FLOOR times the largest gradient of the model.
    floor = GRAD_FLOOR * max((g.abs().max().item() for g in grads_c.values() if g is not None and g.numel()), default=0.0)
    for name, gc in grads_c.items():
        gt = grads_t[name]
        if (gc is None) != (gt is None):
            raise Mismatch(f"grad of {name}: {'None' if gt is None else 'a tensor'} on tpu, "
                           f"{'None' if gc is None else 'a tensor'} on CPU")
        if gc is not None:
            worst = max(worst, compare(gt, gc, f"grad of {name}", floor))
    return worst


@contextlib.contextmanager
def mode_context(mode):
    if mode == "fused":
        with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
            yield
    else:
        yield


def prepare(model, mode):
    """The tpu model of `mode`: under compile, its forward is torch.compile'd (generate and the
    loss call it through nn.Module.__call__)."""
    if mode == "compile":
        model.forward = torch.compile(model.forward, backend="tpu")
    return model


def run_family(fam, modes=MODES, limit_s=300.0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run_family(fam, modes, limit_s)


def _run_family(fam, modes, limit_s):
    res = {"kind": fam.kind, "modes": {}}
    t0 = time.time()
    try:
        ref = Reference(fam)
        res["params"] = ref.params
        for phase in ref.phases():
            ref.result(phase)
    except Exception as e:  # the tiny config or the inputs don't run on CPU: a registry bug
        res["status"] = "cpu-error"
        res["reason"] = f"{type(e).__name__}: {' '.join(str(e).split())[:240]}"
        return res
    res["cpu_s"] = round(time.time() - t0, 2)
    for mode in modes:
        res["modes"][mode] = _run_mode(ref, mode, limit_s)
    res["elapsed_s"] = round(time.time() - t0, 2)
    return res


def _run_mode(ref, mode, limit_s):
    out = {}
    if mode == "compile":
        for phase in ref.phases():  # CPU references first: some are compiled themselves
            try:
                ref.result(phase, mode)
            except RuntimeError:
                pass  # reported by the phase
        torch._dynamo.reset()
    try:
        with time_limit(limit_s):
            model = prepare(copy.deepcopy(ref.model).to(DEV), mode)
            for phase in ref.phases():
                out[phase] = _run_one(ref, model, mode, phase)
    except Timeout:
        sync_quietly()
        for phase in ref.phases():
            out.setdefault(phase, {"status": "timeout", "reason": f"over {limit_s:g} s"})
    except Exception as e:  # moving the model failed
        sync_quietly()
        status, detail, missing = classify(e)
        for phase in ref.phases():
            out.setdefault(phase, {"status": status, "reason": f"to(tpu): {detail}"})
    return out


def _run_one(ref, model, mode, phase):
    t0 = time.time()
    before = fallback_count()
    try:
        for p in model.parameters():
            p.grad = None
        with mode_context(mode):
            actual = run_phase(phase, model, ref.kind, _to(ref.inputs(phase), DEV), ref.train)
            torch.tpu.synchronize()
        try:
            rel = judge(phase, actual, ref.result(phase, mode))
            r = {"status": "pass", "max_rel_error": float(f"{rel:.3g}")}
        except Mismatch as first:
            # Within tolerance of the float64 answer: the float32 CPU reference's own rounding
            # made the difference. Otherwise the float32 comparison's mismatch stands.
            exact = ref.result64(phase) if phase in ("forward", "backward") else None
            try:
                if exact is None:
                    raise Mismatch(str(first))
                rel = judge(phase, actual, exact)
            except Mismatch:
                raise first from None
            r = {"status": "pass", "max_rel_error": float(f"{rel:.3g}"), "judged": "float64"}
    except Timeout:
        raise
    except Exception as e:
        sync_quietly()
        status, detail, missing = classify(e)
        r = {"status": status, "reason": detail}
        if missing:
            r["missing"] = [missing]
    if fallback_count() != before:
        r = {"status": "error", "reason": "used the CPU fallback"}
    r["elapsed_s"] = round(time.time() - t0, 2)
    return r
