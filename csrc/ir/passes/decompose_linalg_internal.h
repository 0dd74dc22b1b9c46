// Shared by decompose_linalg.cpp and decompose_lu.cpp: a builder of batched-matrix ops
// (matrices in the last two dims of [batch.., rows, cols]) and the unrolled factorizations. Not a
// public header.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/custom_call.h"
#include "ir/graph.h"

namespace torch_tpu::ir::linalg {

struct Mat {
  Graph& g;

  Value k(double v, DType t, const Shape& s) const;  // a splat constant
  // v [batch.., x] broadcast to s: its batch dims first, its last dim at `at`.
  Value bcast_vec(Value v, const Shape& s, int64_t at) const;
  // v [batch..] broadcast to s (batch dims first).
  Value bcast_batch(Value v, const Shape& s) const;
  // x[.., lo:hi, ..] in the dim `dim_from_end` from the last (0: the last dim).
  Value slice_last(Value x, int64_t dim_from_end, int64_t lo, int64_t hi) const;
  Value mT(Value x) const;  // the last two dims swapped
  // op(x) @ op(y) batched over the leading dims, precision HIGHEST.
  Value matmul(Value x, Value y, bool tx, bool ty) const;
  Value iota_i32(const Shape& s, int64_t dim_from_end) const;
  Value triangle(const Shape& s, bool lower) const;  // i1 mask of the triangle, diagonal included
  Value diagonal(Value x) const;                     // [.., r, c] -> [.., min(r, c)]
  // p i1 [.., n] -> i32 [..]: the 1-based index of the first true entry, 0 if none.
  Value first_true(Value p) const;
  // Result `index` of an XLA-side custom_call (custom_calls.def, Xla* rows).
  Value xla_call(CustomCallTarget t, int64_t index, std::vector<Value> ops, std::vector<int64_t> params = {}) const;
};

// potrf -> {factor (the other triangle zero), info}
std::vector<Value> potrf(const Mat& m, Value a, bool lower);
// getrf -> {lu, pivots (1-based i32), info}
std::vector<Value> getrf(const Mat& m, Value a);
// lu_pivots_to_permutation(pivots i32 [.., k]) -> perm i32 [.., rows]
Value pivots_to_permutation(const Mat& m, Value pivots, int64_t rows);
// sdpa_fwd(q, k, v) -> {out, logsumexp}; sdpa_bwd(q, k, v, dout, logsumexp) -> {dq, dk, dv}
// (decompose_attention.cpp; `n` carries the params).
std::vector<Value> sdpa_forward(const Mat& m, const Node& n, const std::vector<Value>& ops);
std::vector<Value> sdpa_backward(const Mat& m, const Node& n, const std::vector<Value>& ops);

}  // namespace torch_tpu::ir::linalg
