// p-norm distances: _cdist_forward / _cdist_backward (torch.cdist's direct path; its matmul
// path for p = 2 is composite) and _pdist_forward / _pdist_backward, as broadcast
// differences reduced over the feature dim. The backward formulas are PyTorch CPU's per p
// (0, 1, 2, inf, p < 2 and the general case), including its zeros where dist == 0.
#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;
using ir::Reducer;

// x1 [B.., P, M] and x2 [B.., R, M] (same batch shape) -> diff [B.., P, R, M].
Value pair_diff(Lower& L, Value x1, Value x2) {
  ir::Shape s1 = L.g.shape(x1), s2 = L.g.shape(x2);
  int64_t nb = static_cast<int64_t>(s1.size()) - 2;
  ir::Shape ds(s1.begin(), s1.end() - 2);
  ds.insert(ds.end(), {s1[nb], s2[nb], s1[nb + 1]});
  std::vector<int64_t> d1, d2;
  for (int64_t k = 0; k < nb; ++k) d1.push_back(k), d2.push_back(k);
  d1.insert(d1.end(), {nb, nb + 2});
  d2.insert(d2.end(), {nb + 1, nb + 2});
  return L.g.binary(OpCode::Sub, L.g.broadcast(x1, ds, d1), L.g.broadcast(x2, ds, d2));
}

// The p-norm of diff over its last dim.
Value pnorm(Lower& L, Value diff, double p) {
  int64_t last = static_cast<int64_t>(L.g.shape(diff).size()) - 1;
  ir::Shape out = L.g.shape(diff);
  out.pop_back();
  if (L.g.shape(diff)[last] == 0) return L.g.constant(0, L.g.dtype(diff), out);
  Value a = L.g.unary(OpCode::Abs, diff);
  // NaN differences as PyTorch CPU's kernels treat them: p = 0 counts min(ceil(|d|), 1), so a
  // NaN makes the distance NaN; p = inf folds std::max(acc, |d|) from 0, which skips a NaN.
  Value nan = L.g.compare(Cmp::NE, diff, diff);
  if (p == 0) {
    Value nz = L.g.convert(L.g.compare(Cmp::NE, diff, L.cst_like(0, diff)), L.g.dtype(diff));
    return L.g.reduce(L.g.select(nan, diff, nz), Reducer::Sum, {last});
  }
  if (std::isinf(p)) return L.g.reduce(L.g.select(nan, L.cst_like(0, a), a), Reducer::Max, {last});
  if (p == 1) return L.g.reduce(a, Reducer::Sum, {last});
  if (p == 2) return L.g.unary(OpCode::Sqrt, L.g.reduce(L.g.binary(OpCode::Mul, diff, diff), Reducer::Sum, {last}));
  Value s = L.g.reduce(L.g.binary(OpCode::Pow, a, L.cst_like(p, a)), Reducer::Sum, {last});
  return L.g.binary(OpCode::Pow, s, L.cst_like(1 / p, s));
}

// d dist / d x1 per (pair, feature), times the pair's grad: [B.., P, R, M].
Value dist_grad_terms(Lower& L, Value diff, Value dist, Value grad, double p) {
  ir::Shape ds = L.g.shape(diff);
  int64_t r = static_cast<int64_t>(ds.size());
  std::vector<int64_t> keep;
  for (int64_t k = 0; k < r - 1; ++k) keep.push_back(k);
  Value D = L.g.broadcast(dist, ds, keep), G = L.g.broadcast(grad, ds, keep);
  Value zero = L.cst_like(0, diff);
  Value sgn = L.g.unary(OpCode::Sign, diff), a = L.g.unary(OpCode::Abs, diff);
  Value t;
  if (p == 0) return zero;
  if (p == 1) {
    t = sgn;
  } else if (std::isinf(p)) {
    t = L.g.select(L.g.compare(Cmp::EQ, a, D), sgn, zero);
  } else if (p == 2) {
    t = L.g.select(L.g.compare(Cmp::EQ, D, zero), zero, L.g.binary(OpCode::Div, diff, D));
  } else if (p < 2) {
    Value v = L.g.binary(OpCode::Div, L.g.binary(OpCode::Mul, sgn, L.g.binary(OpCode::Pow, a, L.cst_like(p - 1, a))),
                         L.g.binary(OpCode::Pow, D, L.cst_like(p - 1, D)));
    Value bad = L.g.compare(Cmp::EQ, D, zero);
    if (p < 1) bad = L.g.binary(OpCode::Or, bad, L.g.compare(Cmp::EQ, diff, zero));
    t = L.g.select(bad, zero, v);
  } else {
    Value v = L.g.binary(OpCode::Div, L.g.binary(OpCode::Mul, diff, L.g.binary(OpCode::Pow, a, L.cst_like(p - 2, a))),
                         L.g.binary(OpCode::Pow, D, L.cst_like(p - 1, D)));
    t = L.g.select(L.g.compare(Cmp::EQ, D, zero), zero, v);
  }
  return L.g.binary(OpCode::Mul, t, G);
}

void check_p(Lower& L, double p) {
  TORCH_CHECK(p >= 0, "[", L.op(), "] cdist only supports non-negative p values; got ", p);
}

// Both operands as [B.., rows, M] with the broadcast batch shape, in the compute dtype.
std::pair<Value, Value> batch_pair(Lower& L, const at::Tensor& x1, const at::Tensor& x2, DType ct) {
  TORCH_CHECK(x1.dim() >= 2 && x2.dim() >= 2, "[", L.op(), "] cdist only supports at least 2D tensors; got ", x1.dim(), "D and ",
              x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "[", L.op(), "] X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK_NOT_IMPLEMENTED(x1.scalar_type() == at::kFloat || x1.scalar_type() == at::kDouble, "[", L.op(),
                              "] \"cdist\" not implemented for '", x1.scalar_type(), "' (float32 and float64 only, as CPU)");
  TORCH_CHECK(x1.scalar_type() == x2.scalar_type(), "[", L.op(), "] X1 and X2 must have the same dtype; got ", x1.scalar_type(),
              " and ", x2.scalar_type());
  ir::Shape s1 = shape_of(x1), s2 = shape_of(x2);
  ir::Shape b = broadcast_shapes(L.op(), ir::Shape(s1.begin(), s1.end() - 2), ir::Shape(s2.begin(), s2.end() - 2));
  ir::Shape t1 = b, t2 = b;
  t1.insert(t1.end(), s1.end() - 2, s1.end());
  t2.insert(t2.end(), s2.end() - 2, s2.end());
  return {L.bcast(L.in(x1, ct), t1), L.bcast(L.in(x2, ct), t2)};
}

// _cdist_forward(x1, x2, p, compute_mode)
std::vector<Value> cdist_forward(Lower& L, Args a) {
  const at::Tensor &x1 = a[0].toTensor(), &x2 = a[1].toTensor();
  double p = a[2].toDouble();
  check_p(L, p);
  DType dt = to_ir(x1.scalar_type(), L.op()), ct = opmath(dt);
  auto [v1, v2] = batch_pair(L, x1, x2, ct);
  return one(L.g.convert(pnorm(L, pair_diff(L, v1, v2), p), dt));
}

// _cdist_backward(grad, x1, x2, p, cdist) -> grad of x1 (summed over broadcast batch dims).
std::vector<Value> cdist_backward(Lower& L, Args a) {
  const at::Tensor &grad = a[0].toTensor(), &x1 = a[1].toTensor(), &x2 = a[2].toTensor(), &dist = a[4].toTensor();
  double p = a[3].toDouble();
  DType dt = to_ir(x1.scalar_type(), L.op()), ct = opmath(dt);
  auto [v1, v2] = batch_pair(L, x1, x2, ct);
  ir::Shape ds = L.g.shape(v1);
  ds.back() = L.g.shape(v2)[ds.size() - 2];
  Value diff = pair_diff(L, v1, v2);
  Value terms = dist_grad_terms(L, diff, L.bcast(L.in(dist, ct), ds), L.bcast(L.in(grad, ct), ds), p);
  int64_t r = static_cast<int64_t>(L.g.shape(terms).size());
  Value g = L.g.reduce(terms, Reducer::Sum, {r - 2});  // over x2's rows
  ir::Shape gs = L.g.shape(g), xs = shape_of(x1);
  std::vector<int64_t> extra;
  for (size_t k = 0; k + xs.size() < gs.size(); ++k) extra.push_back(static_cast<int64_t>(k));
  if (!extra.empty()) g = L.g.reduce(g, Reducer::Sum, extra);
  std::vector<int64_t> ones;
  ir::Shape cur = L.g.shape(g);
  for (size_t k = 0; k < xs.size(); ++k)
    if (xs[k] == 1 && cur[k] != 1) ones.push_back(static_cast<int64_t>(k));
  if (!ones.empty()) g = L.g.reshape(L.g.reduce(g, Reducer::Sum, ones), xs);
  return one(L.g.convert(g, dt));
}

// Flat positions i * n + j of the pairs i < j, in pdist's order.
at::Tensor pair_positions(int64_t n) {
  at::Tensor t = at::empty({n * (n - 1) / 2}, at::kLong);
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0, k = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) p[k++] = i * n + j;
  return t;
}

void check_pdist(Lower& L, const at::Tensor& x, double p) {
  TORCH_CHECK(x.dim() == 2, "[", L.op(), "] pdist only supports 2D tensors, got: ", x.dim(), "D");
  TORCH_CHECK_NOT_IMPLEMENTED(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, "[", L.op(),
                              "] \"pdist\" not implemented for '", x.scalar_type(), "' (float32 and float64 only, as CPU)");
  TORCH_CHECK(p >= 0, "[", L.op(), "] pdist only supports non-negative p values; got ", p);
}

// _pdist_forward(self, p): distances of the rows i < j.
std::vector<Value> pdist_forward(Lower& L, Args a) {
  const at::Tensor& x = a[0].toTensor();
  double p = a[1].toDouble();
  check_pdist(L, x, p);
  int64_t n = x.size(0), k = n * (n - 1) / 2;
  DType dt = to_ir(x.scalar_type(), L.op()), ct = opmath(dt);
  if (k == 0) return one(L.g.constant(0, dt, {0}));
  Value v = L.in(x, ct);
  Value d = L.g.reshape(pnorm(L, pair_diff(L, v, v), p), {n * n});
  ir::Attrs at;
  at.dims = {0};
  return one(L.g.convert(L.g.op(OpCode::Gather, {d, L.in_host(pair_positions(n))}, at), dt));
}

// _pdist_backward(grad, self, p, pdist): the condensed grad and distances made symmetric
// [n, n] matrices, then cdist's backward of self against itself.
std::vector<Value> pdist_backward(Lower& L, Args a) {
  const at::Tensor &grad = a[0].toTensor(), &x = a[1].toTensor(), &dist = a[3].toTensor();
  double p = a[2].toDouble();
  check_pdist(L, x, p);
  int64_t n = x.size(0), k = n * (n - 1) / 2;
  DType dt = to_ir(x.scalar_type(), L.op()), ct = opmath(dt);
  if (k == 0 || x.size(1) == 0) return one(L.g.constant(0, dt, shape_of(x)));
  at::Tensor upper = pair_positions(n);
  at::Tensor lower = (upper % n) * n + upper.div(n, "floor");
  Value pos = L.g.concat({L.in_host(upper), L.in_host(lower)}, 0);
  ir::Attrs at;
  at.dims = {0};
  auto sym = [&](const at::Tensor& t) {
    Value v = L.g.reshape(L.in(t, ct), {k});
    Value full = L.g.op(OpCode::ScatterAdd, {L.g.constant(0, ct, {n * n}), pos, L.g.concat({v, v}, 0)}, at);
    return L.g.reshape(full, {n, n});
  };
  Value v = L.in(x, ct);
  Value terms = dist_grad_terms(L, pair_diff(L, v, v), sym(dist), sym(grad), p);
  return one(L.g.convert(L.g.reduce(terms, Reducer::Sum, {1}), dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"_cdist_forward", cdist_forward}, {"_cdist_forward.out", cdist_forward},
      {"_cdist_backward", cdist_backward}, {"_cdist_backward.out", cdist_backward},
      {"_pdist_forward", pdist_forward}, {"_pdist_forward.out", pdist_forward},
      {"_pdist_backward", pdist_backward}, {"_pdist_backward.out", pdist_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
