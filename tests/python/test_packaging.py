"""Packaging (issue 18): `pip install .` and `pip wheel .` into a fresh venv
(--system-site-packages: torch comes from the system), then `import torch_tpu` and a tpu op
from a directory outside the checkout, with PYTHONPATH unset, so the installed copy is the one
imported. The wheel carries the extension, the data files the runners read, and LICENSE.

Offline, as in tools/in-env: --no-build-isolation (setuptools and pybind11's CMake files from
the system), --no-index --no-deps (the dependencies are the system's). Cost: ~30 s when
ccache has the objects of a `make build` of this checkout (setup.py builds in build-pip/, at
build/'s depth, so the compilations hit); a cold ccache compiles the extension (~10 min on
2 cores). TORCH_TPU_SKIP_PACKAGING=1 skips it."""
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / "build-pip" / "test"

pytestmark = [
    pytest.mark.skipif(os.environ.get("TORCH_TPU_SKIP_PACKAGING") == "1", reason="TORCH_TPU_SKIP_PACKAGING=1"),
    # one xdist worker for the module (make test: --dist loadgroup): its venv fixture owns WORK
    pytest.mark.xdist_group("packaging"),
]


def _env():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    env["TMPDIR"] = str(WORK / "tmp")  # the environment's /tmp is a small tmpfs
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd, cwd, timeout=1500):
    r = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def venv():
    shutil.rmtree(WORK, ignore_errors=True)
    (WORK / "tmp").mkdir(parents=True)
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(WORK / "venv")], cwd=ROOT)
    return WORK / "venv" / "bin" / "python"


PIP = ["-m", "pip", "--no-input"]
OFFLINE = ["--no-build-isolation", "--no-index", "--no-deps"]

CHECK = """
import os, sys, torch, torch_tpu
assert not torch_tpu.__file__.startswith(sys.argv[1]), torch_tpu.__file__  # not the checkout
x = torch.randn(8, 8)
with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
    got = (x.to("tpu") @ x.to("tpu")).relu().sum(0).cpu()
torch.testing.assert_close(got, (x @ x).relu().sum(0), rtol=1e-5, atol=1e-5)
print("ok", torch_tpu.__file__)
"""


def test_pip_install_then_import_outside_checkout(venv, tmp_path):
    _run([venv, *PIP, "install", *OFFLINE, str(ROOT)], cwd=ROOT)
    out = _run([venv, "-c", CHECK, str(ROOT / "torch_tpu")], cwd=tmp_path)
    assert out.startswith("ok ") and str(WORK / "venv") in out, out


AUTOLOAD = """
import sys, torch
assert "torch_tpu" in sys.modules  # loaded by torch's `torch.backends` entry point
x = torch.arange(6.0).reshape(2, 3)
got = (x.to("tpu") * 2 + 1).sum(1).cpu()
torch.testing.assert_close(got, (x * 2 + 1).sum(1))
assert torch.accelerator.current_accelerator().type == "tpu"
import torch_tpu  # importing it explicitly after autoload stays valid
assert torch.tpu is sys.modules["torch.tpu"] and torch_tpu._loaded
print("ok")
"""

IMPORT_FIRST = """
import torch_tpu, torch  # the package first: torch's autoload runs while it initializes
assert torch_tpu._loaded and torch.ones(2, device="tpu").sum().item() == 2.0
print("ok")
"""

AUTOLOAD_OFF = """
import sys, torch
assert "torch_tpu" not in sys.modules
try:
    torch.ones(3, device="tpu")
except RuntimeError as e:
    print("refused", str(e)[:60])
"""


def test_autoload_after_install(venv, tmp_path):
    """`import torch` alone makes "tpu" usable once torch_tpu is installed (its
    `torch.backends` entry point); TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off."""
    _run([venv, *PIP, "install", *OFFLINE, str(ROOT)], cwd=ROOT)
    assert _run([venv, "-c", AUTOLOAD], cwd=tmp_path).strip().endswith("ok")
    assert _run([venv, "-c", IMPORT_FIRST], cwd=tmp_path).strip().endswith("ok")
    env = {**_env(), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    r = subprocess.run([venv, "-c", AUTOLOAD_OFF], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("refused"), (r.stdout, r.stderr[-2000:])


def test_pip_wheel_contents(venv):
    dist = WORK / "dist"
    _run([venv, *PIP, "wheel", *OFFLINE, "-w", str(dist), str(ROOT)], cwd=ROOT)
    (wheel,) = dist.glob("torch_tpu-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("torch_tpu/_C.") and n.endswith(".so") for n in names), names
    assert "torch_tpu/opinfo/expected_failures.txt" in names and "torch_tpu/models/expected_failures.txt" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in meta, meta[:800]
    ep = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "[torch.backends]" in ep and "torch_tpu = torch_tpu._loader:load" in ep, ep
