// The pjrt decompositions of potrf, getrf and lu_pivots_to_permutation: LAPACK's unblocked
// Cholesky (dpotf2: stops at the first minor that is not positive-definite) and
// partial-pivot LU (dgetf2), and the pivot swaps, unrolled over the columns / pivots in
// whole-matrix vector ops (selects, reductions, one rank-1 update per column). The graph
// grows linearly with n; XLA compiles each step's ops into a few fused loops.
#include <algorithm>

#include "ir/passes/decompose_linalg_internal.h"

namespace torch_tpu::ir::linalg {

namespace {

// Row `sel` (i1 [.., m, n] true on one row per matrix) of x as [.., n]: a sum of that row and
// zeros, so inf/NaN elsewhere never leak in.
Value pick_row(const Mat& m, Value sel, Value x) {
  Graph& g = m.g;
  Shape s = g.shape(x);
  return g.reduce(g.select(sel, x, m.k(0, g.dtype(x), s)), Reducer::Sum, {static_cast<int64_t>(s.size()) - 2});
}

// The row (>= j) of the largest |x[:, j]|, the first of equals (LAPACK's idamax), i32 [..].
Value pivot_row(const Mat& m, Value col, Value rowv, int64_t j) {
  Graph& g = m.g;
  Shape s = g.shape(col);  // [.., m]
  DType t = g.dtype(col);
  int64_t rows = s.back(), last = static_cast<int64_t>(s.size()) - 1;
  Value below = g.compare(Cmp::GE, rowv, m.k(static_cast<double>(j), DType::I32, s));
  Value mag = g.select(below, g.unary(OpCode::Abs, col), m.k(-1, t, s));
  Value mx = g.reduce(mag, Reducer::Max, {last});
  Value is_max = g.compare(Cmp::EQ, mag, m.bcast_batch(mx, s));
  Value p = g.reduce(g.select(is_max, rowv, m.k(static_cast<double>(rows), DType::I32, s)), Reducer::Min, {last});
  Shape b = g.shape(p);
  // NaN in the column: no row equals the max; keep the diagonal row as dgetf2's idamax would
  // for a leading NaN.
  return g.select(g.compare(Cmp::EQ, p, m.k(static_cast<double>(rows), DType::I32, b)),
                  m.k(static_cast<double>(j), DType::I32, b), p);
}

}  // namespace

std::vector<Value> getrf(const Mat& m, Value a) {
  Graph& g = m.g;
  const Shape s = g.shape(a);
  const DType t = g.dtype(a);
  const size_t r = s.size();
  const int64_t rows = s[r - 2], cols = s[r - 1], k = std::min(rows, cols);
  Shape vs(s.begin(), s.end() - 1);  // [.., m]
  Value rowi = m.iota_i32(s, 1), coli = m.iota_i32(s, 0), rowv = m.iota_i32(vs, 0);
  std::vector<Value> pivots;
  for (int64_t j = 0; j < k; ++j) {
    Value jj = m.k(static_cast<double>(j), DType::I32, s);
    Value col = g.reshape(m.slice_last(a, 0, j, j + 1), vs);
    Value p = pivot_row(m, col, rowv, j);
    // swap rows j and p
    Value on_p = g.compare(Cmp::EQ, rowi, m.bcast_batch(p, s)), on_j = g.compare(Cmp::EQ, rowi, jj);
    Value row_p = pick_row(m, on_p, a), row_j = pick_row(m, on_j, a);  // [.., n]
    int64_t row_dim = static_cast<int64_t>(r) - 2, col_dim = static_cast<int64_t>(r) - 1;
    a = g.select(on_j, m.bcast_vec(row_p, s, col_dim), g.select(on_p, m.bcast_vec(row_j, s, col_dim), a));
    // multipliers l = a[j+1:, j] / pivot (a zero pivot: its column below is zero, left so)
    Shape bs(s.begin(), s.end() - 2);
    Value piv = g.reshape(m.slice_last(row_p, 0, j, j + 1), bs);
    Value safe = g.select(g.compare(Cmp::EQ, piv, m.k(0, t, bs)), m.k(1, t, bs), piv);
    Value recip = g.binary(OpCode::Div, m.k(1, t, bs), safe);
    Value colj = g.reshape(m.slice_last(a, 0, j, j + 1), vs);
    Value l = g.binary(OpCode::Mul, colj, m.bcast_batch(recip, vs));  // [.., m]
    Value lb = m.bcast_vec(l, s, row_dim);
    Value below = g.compare(Cmp::GT, rowi, jj);
    Value right = g.compare(Cmp::GT, coli, jj), at_j = g.compare(Cmp::EQ, coli, jj);
    Value upd = g.binary(OpCode::Sub, a, g.binary(OpCode::Mul, lb, m.bcast_vec(row_p, s, col_dim)));
    a = g.select(g.binary(OpCode::And, below, right), upd,
                 g.select(g.binary(OpCode::And, below, at_j), lb, a));
    Shape one = bs;
    one.push_back(1);
    pivots.push_back(g.reshape(g.binary(OpCode::Add, p, m.k(1, DType::I32, bs)), one));
  }
  Shape ps(s.begin(), s.end() - 2);
  ps.push_back(k);
  Value piv = k == 0 ? m.k(0, DType::I32, ps)
                     : (pivots.size() == 1 ? pivots[0] : g.concat(pivots, static_cast<int64_t>(r) - 2));
  Value d = m.diagonal(a);
  Value info = m.first_true(g.compare(Cmp::EQ, d, m.k(0, t, g.shape(d))));
  return {a, piv, info};
}

std::vector<Value> potrf(const Mat& m, Value a, bool lower) {
  Graph& g = m.g;
  const Shape s = g.shape(a);
  const DType t = g.dtype(a);
  const size_t r = s.size();
  const int64_t n = s.back(), row_dim = static_cast<int64_t>(r) - 2, col_dim = static_cast<int64_t>(r) - 1;
  Shape vs(s.begin(), s.end() - 1), bs(s.begin(), s.end() - 2);
  // The symmetric matrix the `lower` triangle describes; factor it as L L^T (upper: U = L^T).
  Value x = g.select(m.triangle(s, lower), a, m.mT(a));
  Value rowi = m.iota_i32(s, 1), coli = m.iota_i32(s, 0);
  Value stopped = m.k(0, DType::Bool, bs);  // a minor already failed: LAPACK stops there
  std::vector<Value> ok;
  for (int64_t j = 0; j < n; ++j) {
    Value jj = m.k(static_cast<double>(j), DType::I32, s);
    Value colv = g.reshape(m.slice_last(x, 0, j, j + 1), vs);  // [.., n]
    Value d = g.reshape(m.slice_last(colv, 0, j, j + 1), bs);
    Value pos = g.compare(Cmp::GT, d, m.k(0, t, bs));  // false for NaN
    ok.push_back(pos);
    Value ljj = g.unary(OpCode::Sqrt, g.select(pos, d, m.k(1, t, bs)));
    Value l = g.binary(OpCode::Div, colv, m.bcast_batch(ljj, vs));  // column j / L(j, j)
    Value lr = m.bcast_vec(l, s, row_dim), lc = m.bcast_vec(l, s, col_dim);
    Value below = g.compare(Cmp::GT, rowi, jj), at_j = g.compare(Cmp::EQ, coli, jj);
    Value trailing = g.binary(OpCode::And, below, g.compare(Cmp::GT, coli, jj));
    Value diag = g.binary(OpCode::And, g.compare(Cmp::EQ, rowi, jj), at_j);
    Value next = g.select(trailing, g.binary(OpCode::Sub, x, g.binary(OpCode::Mul, lr, lc)), x);
    next = g.select(g.binary(OpCode::And, below, at_j), lr, next);
    next = g.select(diag, m.bcast_batch(ljj, s), next);
    Value go = g.binary(OpCode::And, pos, g.unary(OpCode::Not, stopped));
    x = g.select(m.bcast_batch(go, s), next, x);
    stopped = g.binary(OpCode::Or, stopped, g.unary(OpCode::Not, pos));
  }
  Value l = g.select(m.triangle(s, true), x, m.k(0, t, s));
  Shape one = bs;
  one.push_back(1);
  std::vector<Value> bad;
  for (Value p : ok) bad.push_back(g.reshape(g.unary(OpCode::Not, p), one));
  Value info = n == 0 ? m.k(0, DType::I32, bs)
                      : m.first_true(bad.size() == 1 ? bad[0] : g.concat(bad, static_cast<int64_t>(r) - 2));
  return {lower ? l : m.mT(l), info};
}

Value pivots_to_permutation(const Mat& m, Value pivots, int64_t rows) {
  Graph& g = m.g;
  Shape ps = g.shape(pivots);
  Shape s(ps.begin(), ps.end() - 1), b = s;
  s.push_back(rows);  // [.., m]
  int64_t k = ps.back(), last = static_cast<int64_t>(s.size()) - 1;
  Value iv = m.iota_i32(s, 0), perm = iv;
  for (int64_t j = 0; j < k; ++j) {
    Value p = g.binary(OpCode::Sub, g.reshape(m.slice_last(pivots, 0, j, j + 1), b), m.k(1, DType::I32, b));
    Value valid = g.binary(OpCode::And, g.compare(Cmp::GE, p, m.k(0, DType::I32, b)),
                           g.compare(Cmp::LT, p, m.k(static_cast<double>(rows), DType::I32, b)));
    Value on_p = g.compare(Cmp::EQ, iv, m.bcast_batch(p, s));
    Value on_j = g.compare(Cmp::EQ, iv, m.k(static_cast<double>(j), DType::I32, s));
    Value pj = g.reshape(m.slice_last(perm, 0, j, j + 1), b);
    Value pp = g.reduce(g.select(on_p, perm, m.k(0, DType::I32, s)), Reducer::Sum, {last});
    Value next = g.select(on_j, m.bcast_batch(pp, s), g.select(on_p, m.bcast_batch(pj, s), perm));
    perm = g.select(m.bcast_batch(valid, s), next, perm);
  }
  return perm;
}

}  // namespace torch_tpu::ir::linalg
