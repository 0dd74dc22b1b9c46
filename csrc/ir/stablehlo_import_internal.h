// Helpers of the StableHLO importer shared by stablehlo_import.cpp (the evaluator: scopes,
// control flow, the op table) and stablehlo_builders.cpp (constants, folding, slices and
// splices with their peepholes, dynamic indexing, pad). Internal to csrc/ir.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/stablehlo_ast.h"
#include "ir/stablehlo_import.h"

namespace torch_tpu::ir::shlo {

#define IMPORT_CHECK(cond, op, ...) \
  TPU_CHECK(cond, "[stablehlo import] '", (op).name, "' at line ", (op).line, ": ", __VA_ARGS__)

// A dense<...> literal: a splat (one value) or the row-major bytes of every element.
struct Dense {
  bool splat = true;
  double fvalue = 0;
  int64_t ivalue = 0;
  std::vector<uint8_t> bytes;
};
Dense parse_dense(const std::string& raw, const Type& t, int line);

// The constant of a graph value when it is a splat Constant node.
std::optional<int64_t> const_int(const Graph& g, Value v);     // integer / bool splat
std::optional<double> const_float(const Graph& g, Value v);    // float splat
// A splat of `v`'s dtype (integers wrapped to the dtype's width).
Value splat(Graph& g, DType t, const Shape& s, double fv, int64_t iv);
// Builds op(operands) folding integer/bool scalar splats (loop counters, grid indices).
Value fold_or_build(Graph& g, OpCode code, const std::vector<Value>& xs, const Attrs& a, DType out);

// Slices and splices with peepholes: slice of a slice composes, slice of a concatenate picks
// the pieces it covers, a whole-operand slice is the operand, nested concatenates flatten,
// and writing back what was just read is a no-op. They keep unrolled Pallas grids linear.
Value slice(Graph& g, Value x, std::vector<int64_t> start, std::vector<int64_t> limit,
            std::vector<int64_t> stride);
Value concat(Graph& g, std::vector<Value> xs, int64_t dim);
Value splice(Graph& g, Value x, Value update, const std::vector<int64_t>& start);
Value dynamic_slice(Graph& g, Value x, const std::vector<Value>& idx, const Shape& sizes);
Value dynamic_update_slice(Graph& g, Value x, Value update, const std::vector<Value>& idx);
Value pad(Graph& g, Value x, Value pv, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
          const Op& op);

}  // namespace torch_tpu::ir::shlo
