// StableHLO text of the linalg ops: triangular_solve (one line) and custom_call, printed
// with all of its target's results ("%tN_0:3 = ...") and the node naming the one it selects.
#include "ir/custom_call.h"
#include "ir/printer_internal.h"

namespace torch_tpu::ir::printer {

std::string triangular_solve_attrs(const Graph&, const Node& n) {
  static const char* const kTranspose[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  auto b = [&](int i) { return n.attrs.dims.at(i) ? std::string("true") : std::string("false"); };
  return "left_side = " + b(0) + ", lower = " + b(1) + ", unit_diagonal = " + b(2) +
         ", transpose_a = #stablehlo<transpose " + kTranspose[n.attrs.dims.at(3)] + ">";
}

namespace {
// The call's attributes. LAPACK targets: api_version 4 (typed FFI), params as a dictionary.
// XLA's own targets (QrExpander / EighExpander read them): api_version 1, Eigh's config as
// "lower,sort_eigenvalues,max_iter,tol" (tol relative to the Frobenius norm).
std::string call_attrs(const CustomCallInfo& info, CustomCallTarget t, const Node& n, DType dt) {
  std::string attrs = std::string("call_target_name = \"") + info.target[dt == DType::F64 ? 1 : 0] + "\", ";
  if (is_xla_target(t)) {
    attrs += "api_version = 1 : i32";
    if (t == CustomCallTarget::XlaEigh)
      attrs += std::string(", backend_config = \"") + (n.attrs.dims[1] ? "1" : "0") + ",1,100," +
               (dt == DType::F64 ? "1e-14" : "1e-6") + "\"";
    return attrs;
  }
  attrs += "api_version = 4 : i32, backend_config = {";
  for (size_t i = 0; i < info.params.size(); ++i)
    attrs += (i ? ", " : "") + std::string(info.params[i]) + " = " + std::to_string(n.attrs.dims[1 + i]) + " : i64";
  return attrs + "}";
}
}  // namespace

void emit_custom_call(Emitter& e, int id) {
  const Graph& g = e.graph();
  const Node& n = g.nodes()[id];
  const CustomCallInfo& info = custom_call_info(target_of(n));
  std::vector<CallResult> results = custom_call_results(g, n);
  std::vector<std::string> args, types;
  for (int o : n.operands) {
    args.push_back(e.name(o));
    types.push_back(e.type(o));
  }
  std::string attrs = call_attrs(info, target_of(n), n, g.nodes()[n.operands[0]].dtype);
  std::string base = e.fresh(id), rtype;
  for (size_t i = 0; i < results.size(); ++i)
    rtype += (i ? ", " : "") + tensor_type(results[i].shape, results[i].dtype);
  if (results.size() == 1) {
    e.line(base, "custom_call", args, types, attrs, rtype);
    e.set_name(id, base);
    return;
  }
  e.line(base + ":" + std::to_string(results.size()), "custom_call", args, types, attrs, "(" + rtype + ")");
  e.set_name(id, base + "#" + std::to_string(n.attrs.dims[0]));
}

}  // namespace torch_tpu::ir::printer
