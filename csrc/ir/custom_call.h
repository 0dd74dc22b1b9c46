// The custom_call target table (custom_calls.def) and the result rule of a CustomCall node.
// Thread-safe (read-only tables).
#pragma once
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir {

enum class CustomCallTarget : uint8_t {
#define CUSTOM_CALL(name, f32_target, f64_target, operands, results, ...) name,
#include "ir/custom_calls.def"
  kNumTargets
};

struct CustomCallInfo {
  const char* name;        // "Getrf"
  const char* target[2];   // call_target_name for f32 / f64 operands
  int operands;
  int results;
  std::vector<const char*> params;  // names of attrs.dims[1..]
};
const CustomCallInfo& custom_call_info(CustomCallTarget t);
inline CustomCallTarget target_of(const Node& n) { return static_cast<CustomCallTarget>(n.attrs.ivalue); }
// True for the targets XLA expands itself (XlaQr, XlaHouseholderProduct, XlaEigh: pjrt only);
// false for the LAPACK ones (host kernels; decompose_linalg rewrites them for pjrt).
inline bool is_xla_target(CustomCallTarget t) { return t >= CustomCallTarget::XlaQr; }

struct CallResult {
  Shape shape;
  DType dtype;
};
// Every result type of the custom call `n` (its operands in g, its target and params);
// throws Error "[custom_call <target>] ..." on invalid operands or attrs.
std::vector<CallResult> custom_call_results(const Graph& g, const Node& n);

// Attrs of result `index` of `target` with `params`; build with
// g.op(OpCode::CustomCall, operands, custom_call_attrs(...)).
Attrs custom_call_attrs(CustomCallTarget target, int64_t index, std::vector<int64_t> params = {});

}  // namespace torch_tpu::ir
