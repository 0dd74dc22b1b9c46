// torch_tpu._C: the Python extension. Importing it runs the static registrations
// (guard, hooks, allocator, ATen kernels); the init functions add the Python API.
#include "python/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native core";
  torch_tpu::python::init_device_bindings(m);
  torch_tpu::python::init_exec_bindings(m);
  torch_tpu::python::init_kernel_bindings(m);
}
