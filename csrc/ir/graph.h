// The graph IR: a Graph owns parameters and nodes in topological order; values are node
// indices. Building a node infers and checks its shape and dtype (the rules live in
// graph.cpp, keyed by the op table) and hash-conses it, so equal subexpressions share one
// node. A Graph is built by one thread and immutable once outputs are set.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "ir/op.h"

namespace torch_tpu::ir {

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);

struct Value {
  int id = -1;
  bool valid() const { return id >= 0; }
  bool operator==(const Value& o) const { return id == o.id; }
};

struct Attrs {
  std::vector<int64_t> dims;           // broadcast/transpose/reduce/concat/iota/reverse dims
  std::vector<int64_t> start, limit, stride;  // slice
  std::vector<int64_t> lhs_batch, rhs_batch, lhs_contract, rhs_contract;  // dot
  // convolution (one entry per spatial dim) / reduce_window (one per dim): see ops.def.
  std::vector<int64_t> window;         // reduce_window window dimensions
  std::vector<int64_t> window_strides, pad_lo, pad_hi, lhs_dilation, rhs_dilation;
  int64_t groups = 1;                  // convolution feature_group_count
  // convolution: the kernel the window multiplies is rhs with its dims 0 and 1 swapped
  // (kernel_transposed: rhs [i, o, spatial...]; one group only) and its spatial dims reversed
  // (kernel_reversed, StableHLO's window_reversal): an input gradient reads the forward's
  // weight as stored instead of a transposed, flipped copy.
  bool kernel_transposed = false, kernel_reversed = false;
  // convolution: the result is [features, batch, spatial...] (StableHLO output dimension
  // numbers [f, b, ...]): a weight gradient written in the weight's layout.
  bool result_transposed = false;
  double value = 0;                    // constant (float)
  int64_t ivalue = 0;                  // constant (integer/bool); dot: 1 = bf16 operands, f32 result
  Cmp direction = Cmp::EQ;
  Reducer reducer = Reducer::Sum;
  Precision precision = Precision::Default;
  bool operator==(const Attrs& o) const;
};

struct Node {
  OpCode op;            // meaningless for parameters
  bool is_param = false;
  int param_index = -1;
  std::vector<int> operands;
  Shape shape;
  DType dtype;
  Attrs attrs;
};

using NodeList = std::deque<Node>;

class Graph {
 public:
  Value param(DType dtype, Shape shape);
  // Generic builder: infers the result shape/dtype from operands and attrs, checks them.
  // `shape`/`dtype` are required for leaf/rng/broadcast/reshape/convert (ignored otherwise).
  Value op(OpCode op, std::vector<Value> operands, Attrs attrs = {}, Shape shape = {},
           DType dtype = DType::F32);

  // Convenience builders.
  Value unary(OpCode op, Value x) { return this->op(op, {x}); }
  Value binary(OpCode op, Value x, Value y) { return this->op(op, {x, y}); }
  Value compare(Cmp dir, Value x, Value y);
  Value select(Value pred, Value t, Value f) { return op(OpCode::Select, {pred, t, f}); }
  Value convert(Value x, DType to);
  Value constant(double v, DType dtype, Shape shape = {});
  Value iota(DType dtype, Shape shape, int64_t dim);
  Value broadcast(Value x, Shape shape, std::vector<int64_t> dims);
  // Numpy-style broadcast of x to `shape` (trailing dims aligned).
  Value broadcast_to(Value x, const Shape& shape);
  Value reshape(Value x, Shape shape);
  Value transpose(Value x, std::vector<int64_t> perm);
  Value slice(Value x, std::vector<int64_t> start, std::vector<int64_t> limit,
              std::vector<int64_t> stride);
  Value concat(std::vector<Value> xs, int64_t dim);
  Value reduce(Value x, Reducer r, std::vector<int64_t> dims);
  Value dot(Value lhs, Value rhs, Attrs dims);
  // convolution / reduce_window with the window fields of `a` (reduce_window: a.reducer).
  Value conv(Value lhs, Value rhs, Attrs a) { return op(OpCode::Convolution, {lhs, rhs}, std::move(a)); }
  Value reduce_window(Value x, Attrs a) { return op(OpCode::ReduceWindow, {x}, std::move(a)); }

  void set_outputs(std::vector<Value> outs) { outputs_ = std::move(outs); }

  // References to nodes (and their shapes) stay valid while the graph grows: builders hold
  // `g.shape(x)` across calls that add nodes (nodes_ is a deque for that reason; a vector's
  // reallocation left such references dangling: linalg.lu of a 1 x n matrix read a freed shape).
  const Node& node(Value v) const { return nodes_[v.id]; }
  const Shape& shape(Value v) const { return nodes_[v.id].shape; }
  DType dtype(Value v) const { return nodes_[v.id].dtype; }
  const NodeList& nodes() const { return nodes_; }
  const std::vector<Value>& outputs() const { return outputs_; }
  int num_params() const { return num_params_; }

  // Structural hash: equal graphs (same ops, attrs, types, order of params/outputs) hash equal.
  uint64_t hash() const;
  // Throws Error on a malformed graph (bad operand ids, wrong arity, shape/dtype mismatch).
  void verify() const;
  // StableHLO text (an MLIR module with one func.func @main).
  // `aliases` (empty, or one entry per parameter): the output index whose buffer parameter i
  // may become (donation), printed as `tf.aliasing_output` on that @main argument; -1 = none.
  std::string to_stablehlo(const std::vector<int>& aliases = {}) const;

  // Appends a copy of node `n` (an op of this or another graph) over `operands`, inferred and
  // checked like op(), but never merged with an equal node: for passes that duplicate work
  // on purpose (a broadcast re-read by each fused loop instead of one shared result).
  Value copy_of(const Node& n, std::vector<Value> operands);

  // For tests: append a node without inference or checks.
  Value unchecked_node(Node n);

 private:
  Value intern(Node&& n);
  NodeList nodes_;
  std::vector<Value> outputs_;
  int num_params_ = 0;
  void cse_insert(uint64_t h, int id);
  // Hash-consing table over pure nodes: open addressing (linear probing) of (node hash, id),
  // id -1 = empty; the capacity is a power of two kept at most half full. A flat vector, so
  // lookups are O(1) for graphs of thousands of nodes and copying a Graph stays cheap.
  std::vector<std::pair<uint64_t, int>> cse_;
  size_t cse_size_ = 0;
};

// Infers the result of `n.op` from its operands (in g) and attrs; fills n.shape/n.dtype.
// Throws Error with "[op] ..." on invalid input. Shared by the builder and the verifier.
void infer(const Graph& g, Node& n);
uint64_t node_hash(const Node& n);

}  // namespace torch_tpu::ir
