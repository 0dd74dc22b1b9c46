"""The pjrt runtime (XLA through a PJRT plugin) next to the host runtime: a GPT train step on
pjrt equals the host's (HIGHEST precision), torch.compile and fused eager run on pjrt, and bad
plugins or programs XLA rejects are Python errors, never an abort. Each runtime runs in its own
process (the runtime is chosen once per process). Skipped when no plugin is installed
(tools/pjrt-plugin installs the pinned XLA CPU plugin; `make test` runs it)."""
import os
import pathlib
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGIN = os.environ.get("TORCH_TPU_PJRT_PLUGIN") or "/usr/local/lib/torch_tpu/pjrt_cpu_plugin.so"
pytestmark = pytest.mark.skipif(not os.path.exists(PLUGIN), reason=f"no PJRT plugin at {PLUGIN} (run tools/pjrt-plugin)")

_GPT_STEPS = r"""
import copy, importlib.util, pathlib, sys, torch, torch_tpu
spec = importlib.util.spec_from_file_location("gpt", pathlib.Path(sys.argv[1]) / "examples" / "gpt.py")
gpt = importlib.util.module_from_spec(spec); spec.loader.exec_module(gpt)
chars, data = gpt.load_data()
torch.manual_seed(0)
cfg = gpt.Config(vocab=len(chars.chars), ctx=32, layers=2, heads=4, width=64)
model = gpt.GPT(cfg).to("tpu")
gen = torch.Generator().manual_seed(1)
batches = [gpt.get_batch(data, 4, 32, gen) for _ in range(3)]
mode = sys.argv[3]
fwd = torch.compile(model, backend="tpu") if mode == "compiled" else model
eager = torch_tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" else torch_tpu.EagerMode.DEFER_NEVER
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # AdamW would amplify ~0 gradients' last bits
losses = []
with torch_tpu.precision(torch_tpu.Precision.HIGHEST), torch_tpu.eager_mode(eager):
    for x, y in batches:
        _, loss = fwd(x.to("tpu"), y.to("tpu"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grads = {n: p.grad.detach().cpu() for n, p in model.named_parameters()}
        opt.step()
        losses.append(loss.item())
torch.save({"runtime": torch_tpu.get_runtime(), "losses": losses, "grads": grads,
            "params": {n: p.detach().cpu() for n, p in model.named_parameters()}}, sys.argv[2])
"""


def _run(code, args=(), **env):
    full = dict(os.environ, **env)
    full.pop("TORCH_TPU_RUNTIME", None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code, *args], env=full, capture_output=True, text=True, timeout=600)


def _gpt(tmp_path, runtime, mode):
    out = tmp_path / f"{runtime}-{mode}.pt"
    r = _run(_GPT_STEPS, [str(ROOT), str(out), mode], TORCH_TPU_RUNTIME=runtime)
    assert r.returncode == 0, r.stderr[-3000:]
    res = torch.load(out)
    assert res["runtime"] == runtime
    return res


def _close(a, b):
    torch.testing.assert_close(a["losses"], b["losses"], atol=1e-5, rtol=1e-5)
    for name, ref in b["grads"].items():
        scale = ref.abs().max().item()
        torch.testing.assert_close(a["grads"][name], ref, atol=1e-5 * scale + 1e-8, rtol=1e-4,
                                   msg=lambda m, n=name: f"grad {n}: {m}")
    for name, ref in b["params"].items():
        torch.testing.assert_close(a["params"][name], ref, atol=1e-6, rtol=1e-5, msg=lambda m, n=name: f"param {n}: {m}")


def test_gpt_train_steps_on_pjrt_equal_host(tmp_path):
    _close(_gpt(tmp_path, "pjrt", "strict"), _gpt(tmp_path, "host", "strict"))


@pytest.mark.parametrize("mode", ["fused", "compiled"])
def test_gpt_fused_and_compiled_on_pjrt_equal_host(tmp_path, mode):
    _close(_gpt(tmp_path, "pjrt", mode), _gpt(tmp_path, "host", "strict"))


@pytest.mark.parametrize("path", ["/etc/hostname", "libm.so.6", "/nonexistent/plugin.so"])
def test_bad_plugin_is_a_python_error(path):
    r = _run("import torch, torch_tpu\ntorch.ones(2, device='tpu') + 1", TORCH_TPU_RUNTIME="pjrt",
             TORCH_TPU_PJRT_PLUGIN=path)
    assert r.returncode == 1, r.stderr[-2000:]  # a Python exception: the process did not abort
    assert "RuntimeError" in r.stderr and path in r.stderr and "tools/pjrt-plugin" in r.stderr


def test_rejected_program_names_op_and_dump(tmp_path):
    code = ("import torch, torch_tpu\n"
            "try:\n    torch.linalg.ldl_factor(torch.eye(3, device='tpu'))[0].cpu()\n"
            "except RuntimeError as e:\n    print('ERR', e)\n"
            "print('ALIVE', (torch.ones(2, device='tpu') + 1).sum().item())\n")
    r = _run(code, TORCH_TPU_RUNTIME="pjrt", TORCH_TPU_DUMP=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ERR [aten::linalg_ldl_factor_ex]" in r.stdout and "module dumped to " + str(tmp_path) in r.stdout
    assert "ALIVE 4.0" in r.stdout  # the device keeps working
    assert list(tmp_path.glob("module_*.mlir"))


_DISK = r"""
import json, torch, torch_tpu
g = torch.Generator().manual_seed(0)
x = torch.randn(16, 32, generator=g).to("tpu")
w = torch.randn(32, 8, generator=g).to("tpu")
y = ((x @ w).relu().sum(0) * 0.5).cpu()
s = torch.tpu._get_cache_stats()
print(json.dumps({"y": y.tolist(), **{k: v for k, v in s.items() if k.startswith("num_disk")}}))
"""


def _disk_run(cache_dir):
    r = _run(_DISK, TORCH_TPU_RUNTIME="pjrt", TORCH_TPU_CACHE_DIR=str(cache_dir))
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_executables_persist_on_disk(tmp_path):
    first = _disk_run(tmp_path)
    entries = sorted((tmp_path / "xla").glob("*.xla"))
    assert first["num_disk_writes"] == len(entries) > 0 and first["num_disk_hits"] == 0
    second = _disk_run(tmp_path)  # a new process loads what the first compiled
    assert second["num_disk_hits"] == len(entries) and second["num_disk_writes"] == 0
    assert second["y"] == first["y"]
    # Entries the plugin cannot load (damaged payload, valid framing) are recompiled and replaced.
    for e in entries:
        b = bytearray(e.read_bytes())
        key_len = int.from_bytes(b[8:16], "little")
        at = 16 + key_len + 8
        e.write_bytes(bytes(b[:at]) + b"not an executable")
    third = _disk_run(tmp_path)
    assert third["num_disk_errors"] == len(entries) and third["num_disk_writes"] == len(entries)
    assert third["y"] == first["y"]
    assert _disk_run(tmp_path)["num_disk_hits"] == len(entries)


def test_disk_cache_off(tmp_path):
    off = _run(_DISK, TORCH_TPU_RUNTIME="pjrt", TORCH_TPU_CACHE_DIR="off", HOME=str(tmp_path))
    assert off.returncode == 0, off.stderr[-2000:]
    assert '"num_disk_writes": 0' in off.stdout and not list(tmp_path.rglob("*.xla"))


_MOVING = r"""
import json, torch, torch_tpu
def compiles():
    torch.tpu.synchronize()  # executables compile when the stream runs them
    s = torch.tpu._get_cache_stats()
    return s["num_disk_misses"] + s["num_disk_hits"]
g = torch.Generator().manual_seed(0)
x = torch.zeros(24, 8); src = torch.randn(24, 8, generator=g)
xt, st = x.to("tpu"), src.to("tpu")
c0 = compiles()
for i in range(24):  # rows at a new offset each step (a KV-cache write, `for row in x`)
    x[i] = src[i] * 2 + x[max(i - 1, 0)]
    xt[i] = st[i] * 2 + xt[max(i - 1, 0)]
rows = compiles() - c0
c0 = compiles()
for j in range(8):  # strided columns, and reversed views
    x[:, j] += x.flip(0)[:, j]
    xt[:, j] += xt.flip(0)[:, j]
cols = compiles() - c0
torch.testing.assert_close(xt.cpu(), x, rtol=0, atol=0)
print(json.dumps({"rows": rows, "cols": cols}))
"""


def test_views_at_new_offsets_do_not_recompile(tmp_path):
    # Each op compiles for its first placement and once more with the moving views' offsets
    # as operands; 24 rows and 8 columns then run without compiling again.
    r = _run(_MOVING, TORCH_TPU_RUNTIME="pjrt", TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["rows"] <= 8 and got["cols"] <= 6, got  # per offset it would be 24 * 3 and 8 * 3


_ELEMENTWISE = r"""
import json, torch, torch_tpu
# name -> (fn, low, high): every float elementwise op family on 4096 elements, where XLA's
# vectorized code paths run (the XLA CPU plugin's chlo.atan was wrong from 64 elements on).
FNS = {
    "atan": (torch.atan, -30, 30), "asin": (torch.asin, -1, 1), "acos": (torch.acos, -1, 1),
    "atanh": (torch.atanh, -0.99, 0.99), "asinh": (torch.asinh, -30, 30), "acosh": (torch.acosh, 1, 30),
    "sinh": (torch.sinh, -10, 10), "cosh": (torch.cosh, -10, 10), "tan": (torch.tan, -1.5, 1.5),
    "sin": (torch.sin, -30, 30), "cos": (torch.cos, -30, 30), "tanh": (torch.tanh, -10, 10),
    "sigmoid": (torch.sigmoid, -30, 30), "exp": (torch.exp, -30, 30), "expm1": (torch.expm1, -5, 5),
    "log": (torch.log, 0.01, 100), "log1p": (torch.log1p, -0.9, 100), "sqrt": (torch.sqrt, 0, 100),
    "rsqrt": (torch.rsqrt, 0.01, 100), "erf": (torch.erf, -4, 4), "erfc": (torch.erfc, -4, 4),
    "erfinv": (torch.erfinv, -0.99, 0.99), "lgamma": (torch.lgamma, 0.1, 30),
    "digamma": (torch.digamma, 0.1, 30), "i0e": (torch.special.i0e, -30, 30),
    "gelu": (torch.nn.functional.gelu, -6, 6), "silu": (torch.nn.functional.silu, -30, 30),
    "atan2": (lambda x: torch.atan2(x, x.flip(0) + 0.5), -3, 3),
    "pow": (lambda x: torch.pow(x, 1.7), 0, 10), "floor": (torch.floor, -30, 30),
    "round": (torch.round, -30, 30), "sign": (torch.sign, -3, 3),
}
g = torch.Generator().manual_seed(0)
bad = {}
for name, (fn, lo, hi) in FNS.items():
    x = torch.rand(4096, generator=g) * (hi - lo) + lo
    want, got = fn(x), fn(x.to("tpu")).cpu()
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True):
        bad[name] = (got - want).abs().max().item()
print(json.dumps(bad))
"""


def test_elementwise_ops_on_large_arrays_match_cpu():
    r = _run(_ELEMENTWISE, TORCH_TPU_RUNTIME="pjrt")
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {}


_NAN_MIN_MAX = r"""
import json, torch, torch_tpu, torch.nn.functional as F
# NaN propagates through max/min as PyTorch (and StableHLO) specify; the XLA CPU plugin's
# maximum/minimum return the other operand, so the printer spells the propagation out.
g = torch.Generator().manual_seed(0)
x = torch.randn(6, 40, generator=g); x[1, 7] = x[4, 33] = float("nan")
y = torch.randn(6, 40, generator=g); y[2, 5] = float("nan")
FNS = {
    "maximum": lambda a, b: torch.maximum(a, b), "minimum": lambda a, b: torch.minimum(a, b),
    "fmax-free max": lambda a, b: torch.max(a, b), "amax": lambda a, b: a.amax(), "amin dim": lambda a, b: a.amin(1),
    "max dim": lambda a, b: a.max(0).values, "min": lambda a, b: b.min(), "aminmax": lambda a, b: torch.cat(torch.aminmax(a, dim=1)),
    "max_pool1d": lambda a, b: F.max_pool1d(a[None], 4)[0], "clamp": lambda a, b: a.clamp(-0.5, 0.5),
}
bad = {}
for name, fn in FNS.items():
    want, got = fn(x, y), fn(x.to("tpu"), y.to("tpu")).cpu()
    if not torch.equal(want.isnan(), got.isnan()) or not torch.allclose(got, want, equal_nan=True):
        bad[name] = str(got)[:80]
print(json.dumps(bad))
"""


def test_max_min_propagate_nan():
    r = _run(_NAN_MIN_MAX, TORCH_TPU_RUNTIME="pjrt")
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {}


_MAPS = r"""
import torch, torch_tpu
def maps():
    return sum(1 for _ in open("/proc/self/maps"))
for i in range(150):  # ~5 new programs per shape, each mapping its code into the process
    a = torch.ones(i + 1, 3, device="tpu")
    assert (a * 2 + 1).exp().sum().item() > 0
    if i == 0:
        base = maps()
s = torch_tpu._C._get_cache_stats()
print(maps() - base, len(s["per_entry_stats"]), s["num_cache_reqs"] - s["num_cache_hits"])
"""


def test_compiled_programs_do_not_exhaust_memory_maps():
    """XLA:CPU maps each program's code into the process (~18 maps per shape here), and the
    kernel caps a process's maps (vm.max_map_count): past it the plugin aborted the test
    process. The compile cache drops its least recently used half when the maps pass half the
    cap; a cap of 2 (TORCH_TPU_MAX_MAPS) makes every 16th compile find it crowded."""
    r = _run(_MAPS, TORCH_TPU_RUNTIME="pjrt", TORCH_TPU_CACHE_DIR="off", TORCH_TPU_MAX_MAPS="2")
    assert r.returncode == 0, r.stderr[-2000:]
    grown, entries, compiled = map(int, r.stdout.split())
    assert compiled > 500 and entries < 40, (compiled, entries)
    assert grown < 1000, grown  # without eviction: ~2,700
