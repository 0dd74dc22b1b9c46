// StableHLO text -> our IR graph: the inverse of Graph::to_stablehlo, for kernels written in
// JAX / Pallas (interpret mode) and lowered by `jax.jit(f).lower(...).as_text()`.
// Ops map one-to-one where the IR has the op; `while` loops whose condition folds to a
// constant at import time are unrolled, `case`/`if` pick their branch (or select between
// all branches), dynamic_slice / dynamic_update_slice with constant indices become static
// slices and splices, func.call / composite are inlined. Anything else throws
// NotImplemented "[stablehlo import] unsupported op 'stablehlo.foo' at line N".
// Pure functions of their arguments; thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir {

struct ImportOptions {
  // What `precision = DEFAULT` of a dot_general means (JAX's default): the caller passes the
  // session's matmul precision, so an imported matmul rounds as torch.matmul on tpu does.
  Precision default_precision = Precision::Default;
  int64_t max_loop_iterations = 1 << 16;  // per while loop, unrolled
  int64_t max_nodes = 1 << 21;            // graph size guard for unrolling
};

// A non-splat dense constant of the module, passed as an extra graph parameter (the IR's
// constants are splats): parameter `param_index`, its bytes in row-major little-endian order.
struct ImportedConstant {
  int param_index;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

struct ImportedGraph {
  Graph graph;           // params: @main's arguments, then the constants; outputs: @main's results
  int num_args = 0;      // @main's arguments (params 0 .. num_args-1)
  std::vector<ImportedConstant> constants;
};

// Copies the nodes of `src` that its outputs depend on into `dst`, with src's parameter i
// bound to params[i]; returns the values of src's outputs in dst. Used to drop the dead
// nodes an import leaves behind and to inline an imported kernel into a caller's graph.
std::vector<Value> inline_graph(Graph& dst, const Graph& src, const std::vector<Value>& params);

// Parses `text` (a module with a public @main, or the only function) and builds its graph.
// Throws torch_tpu::Error (malformed text, type mismatch) or NotImplemented (an op or type
// the IR cannot express), each naming the op and line.
ImportedGraph import_stablehlo(const std::string& text, const ImportOptions& options = {});

}  // namespace torch_tpu::ir
