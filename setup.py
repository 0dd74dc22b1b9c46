"""pip install . -- builds torch_tpu._C with CMake against the installed PyTorch.

Needs PyTorch >= 2.10 with its C++ headers, a C++20 compiler, and a BLAS (OpenBLAS).
Offline, against the system's packages (as in tools/in-env):
    pip install --no-build-isolation .      (pybind11's CMake files may come from pybind11-dev)
The CMake build directory is build-pip/ next to this file (env TORCH_TPU_PIP_BUILD_DIR
overrides it): it is kept between installs, and sits at the same depth as `make build`'s
build/, so ccache serves its compilations from a `make build` of the same checkout."""
import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch

        prefixes = [torch.utils.cmake_prefix_path]
        try:  # the pip package; without it CMake finds pybind11-dev's config
            import pybind11

            prefixes.append(pybind11.get_cmake_dir())
        except ImportError:
            pass
        out_dir = os.path.abspath(os.path.dirname(self.get_ext_fullpath(ext.name)))
        source_dir = os.path.dirname(os.path.abspath(__file__))
        build_dir = os.environ.get("TORCH_TPU_PIP_BUILD_DIR") or os.path.join(source_dir, "build-pip")
        os.makedirs(build_dir, exist_ok=True)
        prefix = ";".join(prefixes)
        subprocess.check_call([
            "cmake", "-S", source_dir, "-B", build_dir, "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", "-DTPU_BUILD_TESTS=OFF",
            f"-DCMAKE_PREFIX_PATH={prefix}", f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DTPU_PY_OUTPUT_DIR={out_dir}",
        ])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "-j", str(os.cpu_count() or 2)])


setup(
    packages=find_packages(include=["torch_tpu", "torch_tpu.*"]),
    ext_modules=[CMakeExtension("torch_tpu._C")],
    cmdclass={"build_ext": CMakeBuild},
)
