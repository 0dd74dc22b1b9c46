"""pip install . -- builds torch_tpu._C with CMake against the installed PyTorch.

Needs PyTorch >= 2.10 with its C++ headers, a C++20 compiler, and a BLAS (OpenBLAS)."""
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
        import pybind11
        import torch

        out_dir = os.path.abspath(os.path.dirname(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        prefix = ";".join([torch.utils.cmake_prefix_path, pybind11.get_cmake_dir()])
        subprocess.check_call([
            "cmake", "-S", os.path.dirname(os.path.abspath(__file__)), "-B", build_dir,
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
