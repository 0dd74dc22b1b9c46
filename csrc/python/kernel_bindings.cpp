// Python bindings for custom kernels (torch_tpu/kernel.py): StableHLO text imported into an
// IR graph once (`_import_stablehlo`), then run on tpu tensors as one op (`_run_kernel`) in
// every eager mode and inside torch.compile captures, through the same Lower/launch path as
// the ATen lowerings; and `_ir_kernel` for graphs built in Python by op name (torch_tpu.kernel.ir).
#include <pybind11/stl.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "base/error.h"
#include "ir/stablehlo_import.h"
#include "lowering/from_aten/lower.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace torch_tpu::python {
namespace {

// Op names live as long as the process: launches and the fused window keep the pointer.
const char* intern(const std::string& s) {
  static std::mutex mu;
  static std::deque<std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& n : names)
    if (n == s) return n.c_str();
  names.push_back(s);
  return names.back().c_str();
}

// An imported kernel: its graph (immutable, shared by every call) and the op name it runs as.
struct Kernel {
  std::shared_ptr<const ir::ImportedGraph> im;
  const char* name;
};

template <class F>
auto translate(const char* name, F&& f) {
  try {
    return f();
  } catch (const torch_tpu::NotImplemented& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "[", name, "] ", e.what());
  } catch (const torch_tpu::Error& e) {
    TORCH_CHECK(false, "[", name, "] ", e.what());
  }
}

std::vector<at::Tensor> run_kernel(const Kernel& k, const std::vector<at::Tensor>& inputs) {
  const ir::Graph& g = k.im->graph;
  lowering::Lower L(k.name);
  std::vector<ir::Value> params;
  int np = g.num_params();
  TORCH_CHECK(static_cast<int>(inputs.size()) == np, "[", k.name, "] got ", inputs.size(),
              " tensors; expected ", np, " (", k.im->num_args, " arguments and ",
              k.im->constants.size(), " constants)");
  for (const ir::Node& n : g.nodes()) {
    if (!n.is_param) continue;
    const at::Tensor& t = inputs[n.param_index];
    TORCH_CHECK(t.defined() && t.is_privateuseone(), "[", k.name, "] argument ", n.param_index,
                " must be a tpu tensor; got ", t.defined() ? t.device().str() : "undefined");
    ir::DType dt = lowering::to_ir(t.scalar_type(), k.name);
    TORCH_CHECK(dt == n.dtype && lowering::shape_of(t) == n.shape, "[", k.name, "] argument ",
                n.param_index, " is ", t.scalar_type(), t.sizes(), "; the kernel was traced for ",
                lowering::to_aten(n.dtype), ir::shape_str(n.shape));
  }
  for (int i = 0; i < np; ++i) params.push_back(L.in(inputs[i]));
  std::vector<ir::Value> outs = translate(k.name, [&] { return ir::inline_graph(L.g, g, params); });
  return L.run(outs);
}

at::Tensor constant_tensor(const ir::ImportedConstant& c) {
  at::Tensor t = at::empty(c.shape, at::TensorOptions().dtype(lowering::to_aten(c.dtype)));
  std::memcpy(t.data_ptr(), c.bytes.data(), c.bytes.size());
  return t;
}

}  // namespace

void init_kernel_bindings(py::module_& m) {
  py::class_<Kernel>(m, "_Kernel")
      .def_property_readonly("name", [](const Kernel& k) { return std::string(k.name); })
      .def_property_readonly("num_args", [](const Kernel& k) { return k.im->num_args; })
      .def_property_readonly("num_nodes", [](const Kernel& k) { return k.im->graph.nodes().size(); })
      .def("constants", [](const Kernel& k) {  // CPU tensors, in parameter order after the arguments
        std::vector<at::Tensor> r;
        for (const auto& c : k.im->constants) r.push_back(constant_tensor(c));
        return r;
      })
      .def("outputs", [](const Kernel& k) {  // [(shape, torch dtype)]
        py::list r;
        for (ir::Value v : k.im->graph.outputs())
          r.append(py::make_tuple(k.im->graph.shape(v),
                                  py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(
                                      torch::getTHPDtype(lowering::to_aten(k.im->graph.dtype(v)))))));
        return r;
      })
      .def("stablehlo", [](const Kernel& k) { return k.im->graph.to_stablehlo(); });
  // Imports StableHLO text; `DEFAULT` dot precision means the session's matmul precision.
  m.def("_import_stablehlo", [](const std::string& text, const std::string& name) {
    const char* n = intern(name);
    ir::ImportOptions o;
    o.default_precision = lowering::matmul_precision();
    auto im = translate(n, [&] {
      py::gil_scoped_release nogil;
      return std::make_shared<const ir::ImportedGraph>(ir::import_stablehlo(text, o));
    });
    return Kernel{std::move(im), n};
  });
  m.def("_run_kernel", &run_kernel);
}

}  // namespace torch_tpu::python
