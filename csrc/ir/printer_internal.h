// Shared by printer.cpp and printer_compound.cpp (not a public header): the line emitter
// that writes StableHLO ops in MLIR generic form, and typed literal formatting.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir::printer {

// "tensor<2x3xf32>", "tensor<f32>" for rank 0.
std::string tensor_type(const Shape& s, DType t);
// "array<i64: 1, 2>", "array<i64>" when empty.
std::string i64_array(const std::vector<int64_t>& v);
// A dense-literal element of type t: float (round-trippable decimal, or hex bits for NaN/inf),
// integer (unsigned types print unsigned) or true/false. Floats use fv, others iv.
std::string literal(DType t, double fv, int64_t iv);
// Literal of the smallest / largest value of t (-inf / inf for floats).
std::string lowest(DType t);
std::string highest(DType t);
// The attributes of a compare of two `operand`-typed values.
std::string compare_attrs(Cmp dir, DType operand);

// Writes the body of func @main. Values are named %argK (parameters), %N (node N) and
// %tN_K (the K-th temporary of node N; MLIR forbids '_' after a leading digit).
class Emitter {
 public:
  explicit Emitter(const Graph& g);
  const Graph& graph() const { return g_; }
  std::ostringstream& out() { return os_; }
  // The SSA name and type of node `id`.
  const std::string& name(int id) const { return names_[id]; }
  std::string type(int id) const;
  void set_name(int id, std::string n) { names_[id] = std::move(n); }
  // A fresh temporary name for node `node`.
  std::string fresh(int node) {
    if (node != tmp_node_) tmp_node_ = node, tmp_ = 0;
    return "%t" + std::to_string(node) + "_" + std::to_string(tmp_++);
  }
  // Indentation of the lines written next (nested regions indent further).
  void set_indent(int n) { indent_ = std::string(n, ' '); }
  int indent() const { return static_cast<int>(indent_.size()); }

  // `res = "op"(args) {attrs} : (arg_types) -> result_type`; `op` without a dialect gets
  // "stablehlo.". Returns res.
  std::string line(const std::string& res, const std::string& op,
                   const std::vector<std::string>& args, const std::vector<std::string>& arg_types,
                   const std::string& attrs, const std::string& result_type);
  // Same, with a fresh temporary of `node` as the result.
  std::string tmp(int node, const std::string& op, const std::vector<std::string>& args,
                  const std::vector<std::string>& arg_types, const std::string& attrs,
                  const std::string& result_type) {
    return line(fresh(node), op, args, arg_types, attrs, result_type);
  }
  // A splat constant of type tensor_type(s, t) holding `lit`.
  std::string splat(int node, const std::string& lit, const Shape& s, DType t);

 private:
  const Graph& g_;
  std::ostringstream os_;
  std::vector<std::string> names_;
  std::string indent_ = "    ";
  int tmp_ = 0, tmp_node_ = -1;
};

// `res` = maximum/minimum(a, b) of type tensor_type(s, t), NaN-propagating for floats as
// StableHLO specifies and PyTorch computes (printer_compound.cpp): the XLA CPU plugin's
// maximum/minimum return the other operand when one is NaN, so floats print as
// select(b != b, b, select(a != a, a, op(a, b))).
void emit_min_max(Emitter& e, int id, const std::string& res, const char* op, const std::string& a,
                  const std::string& b, const Shape& s, DType t);

// Region helpers (printer_compound.cpp). open_region writes `({ ^bb0(args):` and returns
// the block argument names (temporaries of node `id`); close_region writes
// `"stablehlo.return"(vals)` (each of `type`) and `})`; begin_op writes `res = "stablehlo.op"(args) `.
std::vector<std::string> open_region(Emitter& e, int id, const std::vector<std::string>& types);
void close_region(Emitter& e, const std::vector<std::string>& vals, const std::string& type);
void begin_op(Emitter& e, const std::string& res, const char* op,
              const std::vector<std::string>& args);

// Compound printers (printer_compound.cpp): each writes node `id` and may name it.
void emit_reduce(Emitter& e, int id);
void emit_arg_reduce(Emitter& e, int id);  // ArgMax / ArgMin
void emit_dot(Emitter& e, int id);
void emit_rng(Emitter& e, int id);  // RngUniform / RngNormal
// printer_indexing.cpp
void emit_gather(Emitter& e, int id);
void emit_scatter(Emitter& e, int id);  // Scatter / ScatterAdd
void emit_sort(Emitter& e, int id);     // Sort / ArgSort
void emit_scan(Emitter& e, int id);     // Cumsum / Cumprod
// printer_linalg.cpp
std::string triangular_solve_attrs(const Graph& g, const Node& n);
void emit_custom_call(Emitter& e, int id);
// printer_window.cpp
void emit_conv(Emitter& e, int id);           // Convolution
void emit_reduce_window(Emitter& e, int id);  // ReduceWindow

}  // namespace torch_tpu::ir::printer
