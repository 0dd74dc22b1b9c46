// Entry points that fill the torch_tpu._C module, one per area.
#pragma once
#include <pybind11/pybind11.h>

namespace torch_tpu::python {
void init_device_bindings(pybind11::module_& m);  // device/ (allocator stats, RNG, streams)
void init_exec_bindings(pybind11::module_& m);    // modes, sync, metrics, fallback, cache
void init_kernel_bindings(pybind11::module_& m);  // custom kernels: StableHLO import, runs
}  // namespace torch_tpu::python
