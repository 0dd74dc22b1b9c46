// The sdpa_fwd / sdpa_bwd custom calls (custom_calls.def) as StableHLO ops for XLA
// (decompose_linalg): the scores as a dot_general, the causal mask as an iota comparison,
// softmax and its gradient in f32, the same bf16 rounding of probabilities and score
// gradients as the host kernel (runtime/host/attention.cpp). XLA fuses the pieces itself.
#include <cstring>
#include <limits>

#include "ir/passes/decompose_linalg_internal.h"

namespace torch_tpu::ir::linalg {
namespace {

struct Params {
  bool causal;
  float scale;
  bool round;        // probabilities and score gradients
  bool heads_inner;  // operands [B, rows, H, width]
};

Params params_of(const Node& n) {
  uint32_t bits = static_cast<uint32_t>(n.attrs.dims[2]);
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const auto& d = n.attrs.dims;
  return {d[1] != 0, scale, d[3] != 0, d[4] != 0};
}

Value round_bf16(Graph& g, Value x) { return g.convert(g.convert(x, DType::BF16), DType::F32); }

// An operand in the heads-outermost layout the math below uses.
Value input(Graph& g, Value x, const Params& p) { return p.heads_inner ? g.transpose(x, {0, 2, 1, 3}) : x; }

// A result back in the operands' layout.
Value result(Graph& g, Value x, const Params& p) { return p.heads_inner ? g.transpose(x, {0, 2, 1, 3}) : x; }

// scale * q k^T [.., L, S], -inf where a causal query may not see the key.
Value scores(const Mat& m, Value q, Value k, const Params& p) {
  Graph& g = m.g;
  Value s = m.matmul(q, k, false, true);
  const Shape sh = g.shape(s);
  s = g.binary(OpCode::Mul, s, m.k(p.scale, DType::F32, sh));
  if (p.causal) s = g.select(m.triangle(sh, true), s, m.k(-std::numeric_limits<double>::infinity(), DType::F32, sh));
  return s;
}

// [.., L] -> [.., L, S]
Value rows(const Mat& m, Value v, const Shape& sh) { return m.bcast_vec(v, sh, static_cast<int64_t>(sh.size()) - 2); }

// Where a row's `edge` (its max, or its logsumexp) is -inf the row sees no key: zeros.
Value zero_dead_rows(const Mat& m, Value x, Value edge) {
  Graph& g = m.g;
  const Shape sh = g.shape(x);
  Value dead = g.compare(Cmp::EQ, edge, m.k(-std::numeric_limits<double>::infinity(), DType::F32, g.shape(edge)));
  return g.select(rows(m, dead, sh), m.k(0, DType::F32, sh), x);
}

Value last_dim_sum(Graph& g, Value x) {
  return g.reduce(x, Reducer::Sum, {static_cast<int64_t>(g.shape(x).size()) - 1});
}

}  // namespace

std::vector<Value> sdpa_forward(const Mat& m, const Node& n, const std::vector<Value>& ops) {
  Graph& g = m.g;
  const Params p = params_of(n);
  Value s = scores(m, input(g, ops[0], p), input(g, ops[1], p), p);
  const Shape sh = g.shape(s);
  Value mx = g.reduce(s, Reducer::Max, {static_cast<int64_t>(sh.size()) - 1});
  Value e = g.unary(OpCode::Exp, g.binary(OpCode::Sub, s, rows(m, mx, sh)));
  Value sum = last_dim_sum(g, e);
  Value prob = zero_dead_rows(m, g.binary(OpCode::Div, e, rows(m, sum, sh)), mx);
  if (p.round) prob = round_bf16(g, prob);
  Value lse = g.binary(OpCode::Add, mx, g.unary(OpCode::Log, sum));
  const Shape ls = g.shape(lse);
  Value neg_inf = m.k(-std::numeric_limits<double>::infinity(), DType::F32, ls);
  lse = g.select(g.compare(Cmp::EQ, mx, neg_inf), neg_inf, lse);  // a row with no key: -inf, not NaN
  return {result(g, m.matmul(prob, input(g, ops[2], p), false, false), p), lse};
}

std::vector<Value> sdpa_backward(const Mat& m, const Node& n, const std::vector<Value>& ops) {
  Graph& g = m.g;
  const Params p = params_of(n);
  Value q = input(g, ops[0], p), k = input(g, ops[1], p), v = input(g, ops[2], p), dout = input(g, ops[3], p);
  Value lse = ops[4];
  Value s = scores(m, q, k, p);
  const Shape sh = g.shape(s);
  Value prob = zero_dead_rows(m, g.unary(OpCode::Exp, g.binary(OpCode::Sub, s, rows(m, lse, sh))), lse);
  Value dv = m.matmul(p.round ? round_bf16(g, prob) : prob, dout, true, false);
  Value dp = m.matmul(dout, v, false, true);
  Value dot = last_dim_sum(g, g.binary(OpCode::Mul, dp, prob));
  Value ds = g.binary(OpCode::Mul, g.binary(OpCode::Mul, prob, g.binary(OpCode::Sub, dp, rows(m, dot, sh))),
                      m.k(p.scale, DType::F32, sh));
  if (p.round) ds = round_bf16(g, ds);
  return {result(g, m.matmul(ds, k, false, false), p), result(g, m.matmul(ds, q, true, false), p), result(g, dv, p)};
}

}  // namespace torch_tpu::ir::linalg
