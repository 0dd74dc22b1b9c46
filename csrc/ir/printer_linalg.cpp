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
  const Node& x = g.nodes()[n.operands[0]];
  std::string attrs = std::string("call_target_name = \"") + info.target[x.dtype == DType::F64 ? 1 : 0] +
                      "\", api_version = 4 : i32, backend_config = {";
  for (size_t i = 0; i < info.params.size(); ++i)
    attrs += (i ? ", " : "") + std::string(info.params[i]) + " = " + std::to_string(n.attrs.dims[1 + i]) + " : i64";
  attrs += "}";
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
