// decompose_linalg: the graph copy that replaces each LAPACK custom_call by StableHLO ops and
// XLA's expander targets (cholesky, Qr, ProductOfElementaryHouseholderReflectors, Eigh), and
// the host attention calls by their math (decompose_attention.cpp).
// One call's results are built once and shared by the nodes that select them. The unrolled
// LU and the pivot permutation are in decompose_lu.cpp.
#include "ir/passes/decompose_linalg.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "base/error.h"
#include "ir/custom_call.h"
#include "ir/passes/decompose_linalg_internal.h"

namespace torch_tpu::ir {
namespace linalg {

Value Mat::k(double v, DType t, const Shape& s) const { return g.constant(v, t, s); }
Value Mat::bcast_vec(Value v, const Shape& s, int64_t at) const {
  // v [batch.., x] -> s, its last dim placed at `at`, batch dims first.
  const Shape& vs = g.shape(v);
  std::vector<int64_t> dims;
  for (size_t i = 0; i + 1 < vs.size(); ++i) dims.push_back(static_cast<int64_t>(i));
  dims.push_back(at);
  return g.broadcast(v, s, dims);
}
Value Mat::bcast_batch(Value v, const Shape& s) const {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < g.shape(v).size(); ++i) dims.push_back(static_cast<int64_t>(i));
  return g.broadcast(v, s, dims);
}
Value Mat::slice_last(Value x, int64_t dim_from_end, int64_t lo, int64_t hi) const {
  const Shape& s = g.shape(x);
  std::vector<int64_t> start(s.size(), 0), limit = s, stride(s.size(), 1);
  size_t d = s.size() - 1 - static_cast<size_t>(dim_from_end);
  start[d] = lo;
  limit[d] = hi;
  return g.slice(x, start, limit, stride);
}
Value Mat::mT(Value x) const {
  std::vector<int64_t> perm;
  size_t r = g.shape(x).size();
  for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(i));
  std::swap(perm[r - 1], perm[r - 2]);
  return g.transpose(x, perm);
}
Value Mat::matmul(Value x, Value y, bool tx, bool ty) const {
  size_t r = g.shape(x).size();
  Attrs a;
  for (size_t i = 0; i + 2 < r; ++i) {
    a.lhs_batch.push_back(static_cast<int64_t>(i));
    a.rhs_batch.push_back(static_cast<int64_t>(i));
  }
  a.lhs_contract = {static_cast<int64_t>(tx ? r - 2 : r - 1)};
  a.rhs_contract = {static_cast<int64_t>(ty ? r - 1 : r - 2)};
  a.precision = Precision::Highest;
  Value d = g.dot(x, y, a);
  // dot_general puts lhs's free dim before rhs's: [batch.., m, n] in both cases.
  return d;
}
Value Mat::iota_i32(const Shape& s, int64_t dim_from_end) const {
  return g.iota(DType::I32, s, static_cast<int64_t>(s.size()) - 1 - dim_from_end);
}
Value Mat::triangle(const Shape& s, bool lower) const {
  Value r = iota_i32(s, 1), c = iota_i32(s, 0);
  return g.compare(lower ? Cmp::LE : Cmp::GE, c, r);
}
Value Mat::diagonal(Value x) const {
  Shape s = g.shape(x);
  Value eye = g.compare(Cmp::EQ, iota_i32(s, 1), iota_i32(s, 0));
  Value d = g.reduce(g.select(eye, x, k(0, g.dtype(x), s)), Reducer::Sum, {static_cast<int64_t>(s.size()) - 1});
  int64_t n = std::min(s[s.size() - 1], s[s.size() - 2]);
  return slice_last(d, 0, 0, n);  // [batch.., min(rows, cols)]
}
Value Mat::first_true(Value p) const {
  Shape s = g.shape(p);
  int64_t n = s.back();
  Value idx = g.binary(OpCode::Add, iota_i32(s, 0), k(1, DType::I32, s));
  Value first = g.reduce(g.select(p, idx, k(static_cast<double>(n + 1), DType::I32, s)), Reducer::Min,
                         {static_cast<int64_t>(s.size()) - 1});
  Shape b = g.shape(first);
  // > n: none is true (n + 1), or n == 0 and the min over nothing is INT32_MAX
  return g.select(g.compare(Cmp::GT, first, k(static_cast<double>(n), DType::I32, b)), k(0, DType::I32, b), first);
}
Value Mat::xla_call(CustomCallTarget t, int64_t index, std::vector<Value> ops, std::vector<int64_t> params) const {
  return g.op(OpCode::CustomCall, std::move(ops), custom_call_attrs(t, index, std::move(params)));
}

namespace {

Shape batch_of(const Shape& s, size_t core) { return Shape(s.begin(), s.end() - static_cast<long>(core)); }
Shape with(Shape b, std::initializer_list<int64_t> tail) {
  b.insert(b.end(), tail);
  return b;
}

// The square [.., r, r] reflector matrix of ormqr's a [.., r, kc] (extra columns are
// never read: only the first k <= min(r, kc) reflectors are applied).
Value square_reflectors(const Mat& m, Value a) {
  Graph& g = m.g;
  Shape s = g.shape(a);
  int64_t r = s[s.size() - 2], kc = s.back();
  if (kc > r) return m.slice_last(a, 0, 0, r);
  if (kc == r) return a;
  Shape zs = s;
  zs.back() = r - kc;
  return g.concat({a, m.k(0, g.dtype(a), zs)}, static_cast<int64_t>(s.size()) - 1);
}

// The full [.., r, r] Q of Householder vectors `a` [.., r, c] and `tau` [.., k].
Value full_q(const Mat& m, Value a, Value tau) {
  return m.xla_call(CustomCallTarget::XlaHouseholderProduct, 0, {square_reflectors(m, a), tau});
}

Value ormqr(const Mat& m, Value a, Value tau, Value c, bool left, bool transpose) {
  Value q = full_q(m, a, tau);
  return left ? m.matmul(q, c, transpose, false) : m.matmul(c, q, false, transpose);
}

// {eigenvectors, eigenvalues ascending} of the symmetric matrix a's `lower` triangle holds.
// XLA's Jacobi stops when its off-diagonal mass, computed as |A|^2 - |diag|^2, rounds to
// zero: off-diagonal entries near sqrt(eps) |A| go unseen (vectors ~1e-8 off in f64, and a
// second Eigh of V^T A V stops at once). So one explicit step polishes V: R = V^T A V is
// diagonal up to E; first-order perturbation gives Q = I + X, X_ij = R_ij / (d_j - d_i)
// (0 inside near-degenerate clusters, where any basis is right), made orthogonal by one
// Newton-Schulz step Q (3I - Q^T Q) / 2; V Q is then accurate to eps |A| / gap.
std::pair<Value, Value> eigh(const Mat& m, Value a, bool lower) {
  Graph& g = m.g;
  Shape s = g.shape(a);  // a copy: adding nodes moves the graph's shapes
  DType t = g.dtype(a);
  int64_t r = static_cast<int64_t>(s.size());
  Value v0 = m.xla_call(CustomCallTarget::XlaEigh, 0, {a}, {lower ? 1 : 0});
  Value w = m.xla_call(CustomCallTarget::XlaEigh, 1, {a}, {lower ? 1 : 0});
  if (s.back() < 2) return {v0, w};
  Value sym = g.select(m.triangle(s, lower), a, m.mT(a));
  Value rm = m.matmul(m.matmul(v0, sym, true, false), v0, false, false);
  Value d = m.diagonal(rm);
  Value gap = g.binary(OpCode::Sub, m.bcast_vec(d, s, r - 1), m.bcast_vec(d, s, r - 2));  // d_j - d_i
  Value off = g.compare(Cmp::NE, m.iota_i32(s, 1), m.iota_i32(s, 0));
  Value small = g.compare(Cmp::LT, g.binary(OpCode::Mul, m.k(1e3, t, s), g.unary(OpCode::Abs, rm)),
                          g.unary(OpCode::Abs, gap));  // false for a zero gap
  Value use = g.binary(OpCode::And, off, small);
  Value safe_gap = g.select(use, gap, m.k(1, t, s));
  Value x = g.select(use, g.binary(OpCode::Div, rm, safe_gap), m.k(0, t, s));
  Value eye = g.select(g.unary(OpCode::Not, off), m.k(1, t, s), m.k(0, t, s));
  Value q = g.binary(OpCode::Add, eye, x);
  Value qtq = m.matmul(q, q, true, false);
  Value three_i = g.binary(OpCode::Mul, m.k(3, t, s), eye);
  q = m.matmul(q, g.binary(OpCode::Mul, m.k(0.5, t, s), g.binary(OpCode::Sub, three_i, qtq)), false, false);
  return {m.matmul(v0, q, false, false), w};
}

// syevd -> {w, v or [.., n, 0], info}
std::vector<Value> syevd(const Mat& m, Value a, bool lower, bool compute_v) {
  Graph& g = m.g;
  Shape s = g.shape(a), b = batch_of(s, 2);
  int64_t n = s.back();
  auto [v, w] = eigh(m, a, lower);
  if (!compute_v) v = m.k(0, g.dtype(a), with(b, {n, 0}));
  return {w, v, m.k(0, DType::I32, b)};
}

// Columns of x [.., r, c] scaled to unit norm (zero columns stay zero).
Value normalize_columns(const Mat& m, Value x) {
  Graph& g = m.g;
  Shape s = g.shape(x);
  DType t = g.dtype(x);
  Value nrm = g.unary(OpCode::Sqrt, g.reduce(g.binary(OpCode::Mul, x, x), Reducer::Sum,
                                             {static_cast<int64_t>(s.size()) - 2}));
  Shape ns = g.shape(nrm);
  nrm = g.select(g.compare(Cmp::EQ, nrm, m.k(0, t, ns)), m.k(1, t, ns), nrm);
  return g.binary(OpCode::Div, x, m.bcast_vec(nrm, s, static_cast<int64_t>(s.size()) - 1));
}

// x [.., r, c] with orthonormal columns (c < r) completed to an orthogonal [.., r, r]: the
// last r - c columns of the Householder Q of x span the complement of x's columns.
Value complete_basis(const Mat& m, Value x) {
  Graph& g = m.g;
  Shape s = g.shape(x);
  int64_t r = s[s.size() - 2], c = s.back();
  Value qr = m.xla_call(CustomCallTarget::XlaQr, 0, {x});
  Value tau = m.xla_call(CustomCallTarget::XlaQr, 1, {x});
  Value q = full_q(m, qr, tau);
  return g.concat({x, m.slice_last(q, 0, c, r)}, static_cast<int64_t>(s.size()) - 1);
}

Value eye(const Mat& m, DType t, const Shape& s) {
  Graph& g = m.g;
  Value p = g.compare(Cmp::EQ, m.iota_i32(s, 1), m.iota_i32(s, 0));
  return g.select(p, m.k(1, t, s), m.k(0, t, s));
}

// gesdd -> {s, u, vh, info} (see decompose_linalg.h)
std::vector<Value> gesdd(const Mat& m, Value a, bool full, bool compute_uv) {
  Graph& g = m.g;
  Shape s = g.shape(a), b = batch_of(s, 2);
  DType t = g.dtype(a);
  int64_t rows = s[s.size() - 2], cols = s.back(), k = std::min(rows, cols), n = rows + cols;
  int64_t last = static_cast<int64_t>(s.size()) - 1;
  int64_t uc = compute_uv ? (full ? rows : k) : 0, vr = compute_uv ? (full ? cols : k) : 0;
  Value info = m.k(0, DType::I32, b);
  if (k == 0) {
    Value u = full && compute_uv ? eye(m, t, with(b, {rows, uc})) : m.k(0, t, with(b, {rows, uc}));
    Value vh = full && compute_uv ? eye(m, t, with(b, {vr, cols})) : m.k(0, t, with(b, {vr, cols}));
    return {m.k(0, t, with(b, {0})), u, vh, info};
  }
  Value top = g.concat({m.k(0, t, with(b, {rows, rows})), a}, last);
  Value bottom = g.concat({m.mT(a), m.k(0, t, with(b, {cols, cols}))}, last);
  Value w = g.concat({top, bottom}, last - 1);
  auto [vecs, vals] = eigh(m, w, true);
  Attrs rev;
  rev.dims = {last - 1};  // eigenvalues [.., n]: ascending -> the k largest, descending
  Value sv = g.op(OpCode::Reverse, {m.slice_last(vals, 0, n - k, n)}, rev);
  if (!compute_uv) return {sv, m.k(0, t, with(b, {rows, 0})), m.k(0, t, with(b, {0, cols})), info};
  rev.dims = {last};
  Value top_k = g.op(OpCode::Reverse, {m.slice_last(vecs, 0, n - k, n)}, rev);  // [.., n, k]
  Value u = normalize_columns(m, m.slice_last(top_k, 1, 0, rows));
  Value v = normalize_columns(m, m.slice_last(top_k, 1, rows, n));
  if (full && rows > k) u = complete_basis(m, u);
  if (full && cols > k) v = complete_basis(m, v);
  return {sv, u, m.mT(v), info};
}

using Key = std::tuple<int64_t, std::vector<int>, std::vector<int64_t>>;

// n with its operands replaced by `ops` (values of `g`), for the result rule.
Node call_node(const Graph&, const Node& n, const std::vector<Value>& ops) {
  Node c = n;
  for (size_t i = 0; i < ops.size(); ++i) c.operands[i] = ops[i].id;
  return c;
}

// Every result of the LAPACK call `n` (operands already remapped into `out`).
std::vector<Value> lower_call(Graph& out, const Node& n, const std::vector<Value>& ops) {
  Mat m{out};
  CustomCallTarget t = target_of(n);
  auto p = [&](size_t i) { return n.attrs.dims[1 + i] != 0; };
  switch (t) {
    case CustomCallTarget::Potrf: return potrf(m, ops[0], p(0));
    case CustomCallTarget::Getrf: return getrf(m, ops[0]);
    case CustomCallTarget::LuPivotsToPermutation:
      return {pivots_to_permutation(m, ops[0], n.attrs.dims[1])};
    case CustomCallTarget::Geqrf:
      return {m.xla_call(CustomCallTarget::XlaQr, 0, {ops[0]}), m.xla_call(CustomCallTarget::XlaQr, 1, {ops[0]})};
    case CustomCallTarget::Orgqr: return {m.xla_call(CustomCallTarget::XlaHouseholderProduct, 0, ops)};
    case CustomCallTarget::Ormqr: return {ormqr(m, ops[0], ops[1], ops[2], p(0), p(1))};
    case CustomCallTarget::Syevd: return syevd(m, ops[0], p(0), p(1));
    case CustomCallTarget::Gesdd: return gesdd(m, ops[0], p(0), p(1));
    case CustomCallTarget::SdpaFwd: return sdpa_forward(m, n, ops);
    case CustomCallTarget::SdpaBwd: return sdpa_backward(m, n, ops);
    case CustomCallTarget::Sytrf:
    case CustomCallTarget::Sytrs:
      if (std::any_of(ops.begin(), ops.end(), [&](Value v) { return numel(out.shape(v)) == 0; })) {
        // no element to factor or solve: every result is empty or info (0)
        std::vector<Value> zeros;
        for (const CallResult& r : custom_call_results(out, call_node(out, n, ops)))
          zeros.push_back(m.k(0, r.dtype, r.shape));
        return zeros;
      }
      return {};  // kept as the LAPACK call (see decompose_linalg.h)
    default: break;
  }
  TPU_CHECK(false, "[decompose_linalg] no XLA-side decomposition for custom_call ", custom_call_info(t).target[0],
            "; got target ", custom_call_info(t).name, ", expected potrf, getrf, lu_pivots_to_permutation, geqrf, "
            "orgqr, ormqr, syevd, gesdd, sdpa_fwd or sdpa_bwd");
  return {};
}

bool is_lapack(const Node& n) {
  return !n.is_param && n.op == OpCode::CustomCall && !is_xla_target(target_of(n));
}

}  // namespace
}  // namespace linalg

bool has_lapack_calls(const Graph& g) {
  for (const Node& n : g.nodes())
    if (linalg::is_lapack(n)) return true;
  return false;
}

Graph decompose_linalg(const Graph& g) {
  Graph out;
  std::vector<Value> remap(g.nodes().size());
  std::map<linalg::Key, std::vector<Value>> calls;  // one lowering per call, all its results
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    if (n.is_param) {
      remap[id] = out.param(n.dtype, n.shape);
      continue;
    }
    std::vector<Value> ops;
    for (int o : n.operands) ops.push_back(remap[o]);
    if (!linalg::is_lapack(n)) {
      remap[id] = out.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
      continue;
    }
    std::vector<int> ids;
    for (Value v : ops) ids.push_back(v.id);
    linalg::Key key{n.attrs.ivalue, ids, std::vector<int64_t>(n.attrs.dims.begin() + 1, n.attrs.dims.end())};
    auto it = calls.find(key);
    if (it == calls.end()) it = calls.emplace(key, linalg::lower_call(out, n, ops)).first;
    if (it->second.empty()) {  // no decomposition: the call itself
      remap[id] = out.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
      continue;
    }
    Value r = it->second.at(static_cast<size_t>(n.attrs.dims[0]));
    TPU_CHECK(out.shape(r) == n.shape && out.dtype(r) == n.dtype, "[decompose_linalg] result ", n.attrs.dims[0],
              " of ", custom_call_info(target_of(n)).target[0], " has type ", dtype_name(out.dtype(r)),
              shape_str(out.shape(r)), ", expected ", dtype_name(n.dtype), shape_str(n.shape));
    remap[id] = r;
  }
  std::vector<Value> outs;
  for (Value v : g.outputs()) outs.push_back(remap[v.id]);
  out.set_outputs(std::move(outs));
  out.verify();
  return out;
}

}  // namespace torch_tpu::ir
