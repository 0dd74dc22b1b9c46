// Order-based ops: sort (argsort reaches it), topk, median/nanmedian/kthvalue, cumsum/cumprod,
// cummax/cummin/logcumsumexp (log-step scans), searchsorted/bucketize/repeat_interleave (binary
// search) and multinomial, on the IR's stable ArgSort + Gather and inclusive scans. sort/topk
// backward is ATen's composite formula (zeros + scatter), lowered in indexing.cpp.
#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;
using ir::Reducer;

ir::Attrs axis(int64_t a, bool descending = false) {
  ir::Attrs at;
  at.dims = {a};
  at.ivalue = descending ? 1 : 0;
  return at;
}

// (values, indices) of a stable sort along d; 0-dim inputs sort as 1-element vectors.
std::pair<Value, Value> sorted(Lower& L, const at::Tensor& self, int64_t d, bool descending) {
  Value x = L.in(self);
  if (self.dim() == 0) return {x, L.g.constant(0, DType::I64, {})};
  Value i = L.g.op(OpCode::ArgSort, {x}, axis(d, descending));
  if (self.numel() == 0) return {x, i};
  return {L.g.op(OpCode::Gather, {x, i}, axis(d)), i};
}

// sort(self, dim, descending) / sort.stable(self, *, stable, dim, descending)
std::vector<Value> sort(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  bool stable_form = !a[1].isInt();  // sort.stable: (self, stable?, dim, descending)
  int64_t dim = stable_form ? a[2].toInt() : a[1].toInt();
  bool desc = stable_form ? a[3].toBool() : a[2].toBool();
  int64_t d = wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  auto [v, i] = sorted(L, self, d, desc);
  return {v, i};
}

// topk(self, k, dim, largest, sorted): the first k of a stable sort (ties keep input order).
std::vector<Value> topk(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  int64_t k = a[1].toInt();
  int64_t d = wrap_dim(a[2].toInt(), std::max<int64_t>(self.dim(), 1));
  bool largest = a[3].toBool();
  int64_t n = self.dim() ? self.size(d) : 1;
  TORCH_CHECK(k >= 0 && k <= n, "[", L.op(), "] selected index k out of range; got k=", k, ", expected 0 <= k <= ", n);
  Value x = L.in(self);
  if (self.dim() == 0) return {x, L.g.constant(0, DType::I64, {})};
  ir::Shape s = shape_of(self), ks = s;
  ks[d] = k;
  if (k == 0 || self.numel() == 0)
    return {L.g.constant(0, to_ir(self.scalar_type(), L.op()), ks), L.g.constant(0, DType::I64, ks)};
  Value i = L.g.op(OpCode::ArgSort, {x}, axis(d, largest));
  std::vector<int64_t> start(s.size(), 0), stride(s.size(), 1);
  i = L.g.slice(i, start, ks, stride);
  return {L.g.op(OpCode::Gather, {x, i}, axis(d)), i};
}

// cumsum / cumprod(self, dim, dtype?): integers accumulate in int64 (PyTorch's promotion).
std::vector<Value> scan(Lower& L, Args a, OpCode op) {
  const at::Tensor& self = a[0].toTensor();
  at::ScalarType st = self.scalar_type();
  at::ScalarType out = !a[2].isNone() ? a[2].toScalarType() : (at::isIntegralType(st, true) ? at::kLong : st);
  DType dt = to_ir(out, L.op());
  int64_t d = wrap_dim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  Value x = L.in(self, dt);
  if (self.dim() == 0 || self.numel() == 0) return one(x);
  return one(L.g.op(op, {x}, axis(d)));
}

// multinomial(self, num_samples, replacement, generator): self holds [rows,] C non-negative
// weights. With replacement: inverse CDF of one uniform per sample. Without: the k
// smallest exponential races -log(u)/p (same distribution as sequential draws). Invalid
// weights (negative, inf, nan, zero sum) raise at the next sync point (device-side check).
std::vector<Value> multinomial(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  int64_t n = a[1].toInt();
  bool replacement = a[2].toBool();
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "[", L.op(), "] prob_dist must be 1 or 2 dim; got ", self.dim());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "[", L.op(), "] prob_dist must be a floating point tensor; got ",
              self.scalar_type());
  TORCH_CHECK(n > 0, "[", L.op(), "] cannot sample n_sample <= 0 samples");
  int64_t rows = self.dim() == 2 ? self.size(0) : 1, c = self.size(-1);
  TORCH_CHECK(c > 0, "[", L.op(), "] number of categories cannot be zero");
  TORCH_CHECK(replacement || n <= c, "[", L.op(), "] cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  std::optional<at::Generator> gen;
  if (a.size() > 3 && !a[3].isNone()) gen = a[3].toGenerator();
  DType ct = DType::F64;  // sampling math in f64 keeps rare categories reachable
  Value p = L.g.reshape(L.in(self, ct), {rows, c});
  Value bad = L.g.binary(OpCode::Or, L.g.compare(Cmp::LT, p, L.cst_like(0, p)), L.g.compare(Cmp::NE, p, p));
  bad = L.g.binary(OpCode::Or, bad, L.g.compare(Cmp::EQ, p, L.cst_like(INFINITY, p)));
  L.check(L.g.reduce(bad, Reducer::Or, {0, 1}), std::string("[") + L.op() + "] probability tensor contains either `inf`, `nan` or element < 0");
  Value total = L.g.reduce(p, Reducer::Sum, {1});  // [rows]
  L.check(L.g.reduce(L.g.compare(Cmp::LE, total, L.cst_like(0, total)), Reducer::Or, {0}),
          std::string("[") + L.op() + "] invalid multinomial distribution (sum of probabilities <= 0)");
  Value out;
  if (replacement || n == 1) {
    Value u = L.g.op(OpCode::RngUniform, {L.rng_state(gen, uint64_t(rows * n))}, {}, {rows, n}, ct);
    Value target = L.g.binary(OpCode::Mul, u, L.g.broadcast(total, {rows, n}, {0}));  // [rows, n]
    Value cdf = L.g.op(OpCode::Cumsum, {p}, axis(1));                                  // [rows, c]
    // sample = #categories whose cumulative weight is <= target (zero-weight ones never end a run).
    Value le = L.g.compare(Cmp::LE, L.g.broadcast(cdf, {rows, n, c}, {0, 2}), L.g.broadcast(target, {rows, n, c}, {0, 1}));
    out = L.g.reduce(L.g.convert(le, DType::I64), Reducer::Sum, {2});
    out = L.g.binary(OpCode::Min, out, L.g.constant(double(c - 1), DType::I64, {rows, n}));
  } else {
    Value u = L.g.op(OpCode::RngUniform, {L.rng_state(gen, uint64_t(rows * c))}, {}, {rows, c}, ct);
    Value race = L.g.binary(OpCode::Div, L.g.unary(OpCode::Negate, L.g.unary(OpCode::Log1p, L.g.unary(OpCode::Negate, u))), p);
    Value order = L.g.op(OpCode::ArgSort, {race}, axis(1));
    out = L.g.slice(order, {0, 0}, {rows, n}, {1, 1});
  }
  if (self.dim() == 1) out = L.g.reshape(out, {n});
  return one(out);
}

// Order statistics on a stable ascending sort (NaN last): median / nanmedian (the lower
// median; median returns the first NaN of a line holding any, nanmedian skips NaNs) and
// kthvalue. pos(n_nan) picks the sorted position per line. Ties between equal values pick
// the first in input order (PyTorch CPU leaves that choice to nth_element).
enum class Stat { kMedian, kNanMedian, kKth };

// (values, indices) at the selected position along d of the [.., n, ..] tensor x.
std::pair<Value, Value> order_stat(Lower& L, Value x, int64_t d, Stat stat, int64_t k) {
  ir::Shape s = L.g.shape(x), one_s = s;
  one_s[d] = 1;
  int64_t n = s[d];
  Value i = L.g.op(OpCode::ArgSort, {x}, axis(d));
  Value v = L.g.op(OpCode::Gather, {x, i}, axis(d));
  Value pos;
  if (stat == Stat::kKth) {
    pos = L.g.constant(double(k - 1), DType::I64, one_s);
  } else {
    Value cnt = L.g.constant(0, DType::I64, one_s);
    if (ir::is_float(L.g.dtype(x)))
      cnt = L.g.reshape(L.g.reduce(L.g.convert(L.g.compare(Cmp::NE, x, x), DType::I64), Reducer::Sum, {d}), one_s);
    Value valid = L.g.binary(OpCode::Sub, L.g.constant(double(n), DType::I64, one_s), cnt);
    Value mid = L.g.binary(OpCode::Div, L.g.binary(OpCode::Max, L.g.binary(OpCode::Sub, valid, L.cst_like(1, valid)), L.cst_like(0, valid)),
                           L.cst_like(2, valid));
    pos = stat == Stat::kNanMedian ? mid : L.g.select(L.g.compare(Cmp::GT, cnt, L.cst_like(0, cnt)), valid, mid);
  }
  return {L.g.op(OpCode::Gather, {v, pos}, axis(d)), L.g.op(OpCode::Gather, {i, pos}, axis(d))};
}

// median(self) / nanmedian(self): the flattened tensor's median as a 0-dim tensor.
std::vector<Value> median_all(Lower& L, Args a, Stat stat) {
  const at::Tensor& self = a[0].toTensor();
  DType dt = to_ir(self.scalar_type(), L.op());
  if (self.numel() == 0) {
    TORCH_CHECK(ir::is_float(dt), "[", L.op(), "] median() of an empty ", self.scalar_type(), " tensor is undefined");
    return one(L.g.constant(NAN, dt, {}));
  }
  Value x = L.g.reshape(L.in(self), {self.numel()});
  return one(L.g.reshape(order_stat(L, x, 0, stat, 0).first, {}));
}

// median.dim / nanmedian.dim(self, dim, keepdim) and kthvalue(self, k, dim, keepdim).
std::vector<Value> median_dim(Lower& L, Args a, Stat stat) {
  const at::Tensor& self = a[0].toTensor();
  int at_dim = stat == Stat::kKth ? 2 : 1;
  int64_t k = stat == Stat::kKth ? a[1].toInt() : 0;
  int64_t r = std::max<int64_t>(self.dim(), 1), d = wrap_dim(a[at_dim].toInt(), r);
  bool keepdim = a[at_dim + 1].toBool();
  ir::Shape s = self.dim() ? shape_of(self) : ir::Shape{1};
  TORCH_CHECK(s[d] > 0, "[", L.op(), "] Expected reduction dim ", d, " to have non-zero size");
  if (stat == Stat::kKth)
    TORCH_CHECK(k >= 1 && k <= s[d], "[", L.op(), "] kthvalue(): selected number k out of range for dimension ", d);
  auto [v, i] = order_stat(L, L.g.reshape(L.in(self), s), d, stat, k);
  ir::Shape out = s;
  out[d] = 1;
  if (!keepdim || self.dim() == 0) out.erase(out.begin() + d);
  return {L.g.reshape(v, out), L.g.reshape(i, out)};
}

// x shifted by k along d: y[i] = x[i - k] for i >= k, x[0] below (masked off by the caller).
Value shifted(Lower& L, Value x, int64_t d, int64_t k) {
  ir::Shape s = L.g.shape(x);
  std::vector<int64_t> start(s.size(), 0), stride(s.size(), 1), head_lim = s, body_lim = s;
  head_lim[d] = k;
  body_lim[d] = s[d] - k;
  return L.g.concat({L.g.slice(x, start, head_lim, stride), L.g.slice(x, start, body_lim, stride)}, d);
}

// cummax / cummin(self, dim) -> (values, indices), as CPU's sequential loop: a later element
// takes over when it is NaN or when neither is NaN and it is >= (cummin: <=) the running
// value, so ties and NaNs report the latest index. That rule is associative, so it runs as a
// log-step (Hillis-Steele) scan of (value, index) pairs: ceil(log2 n) rounds of shift+select.
std::vector<Value> cum_extreme(Lower& L, Args a, bool is_max) {
  const at::Tensor& self = a[0].toTensor();
  int64_t d = wrap_dim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  Value x = L.in(self);
  ir::Shape s = self.dim() ? shape_of(self) : ir::Shape{1};
  if (self.dim() == 0) return {x, L.g.constant(0, DType::I64, {})};
  if (self.numel() == 0) return {x, L.g.constant(0, DType::I64, s)};
  DType dt = L.g.dtype(x);
  Value v = dt == DType::Bool ? L.g.convert(x, DType::U8) : x;  // ordered compare on 0/1
  Value i = L.g.iota(DType::I64, s, d);
  bool fl = ir::is_float(dt);
  for (int64_t k = 1; k < s[d]; k *= 2) {
    Value pv = shifted(L, v, d, k), pi = shifted(L, i, d, k);
    Value later = L.g.compare(is_max ? Cmp::GE : Cmp::LE, v, pv);
    if (fl) {
      Value nan_v = L.g.compare(Cmp::NE, v, v), nan_p = L.g.compare(Cmp::NE, pv, pv);
      later = L.g.binary(OpCode::Or, nan_v, L.g.binary(OpCode::And, L.g.unary(OpCode::Not, nan_p), later));
    }
    Value valid = L.g.compare(Cmp::GE, L.g.iota(DType::I64, s, d), L.g.constant(double(k), DType::I64, s));
    Value keep = L.g.binary(OpCode::Or, later, L.g.unary(OpCode::Not, valid));
    v = L.g.select(keep, v, pv);
    i = L.g.select(keep, i, pi);
  }
  return {dt == DType::Bool ? L.g.convert(v, DType::Bool) : v, i};
}

// _logcumsumexp(self, dim): a log-step scan of CPU's log-add-exp (max + log1p(exp(min - max)),
// keeping x when both are the same infinity), in opmath.
std::vector<Value> logcumsumexp(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "[", L.op(), "] logcumsumexp expects a floating point input; got ",
              self.scalar_type());
  int64_t d = wrap_dim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  Value x = L.in(self, ct);
  if (self.dim() == 0 || self.numel() == 0) return one(L.g.convert(x, dt));
  ir::Shape s = shape_of(self);
  for (int64_t k = 1; k < s[d]; k *= 2) {
    Value p = shifted(L, x, d, k);
    Value mn = L.g.binary(OpCode::Min, x, p), mx = L.g.binary(OpCode::Max, x, p);
    Value r = L.g.binary(OpCode::Add, mx, L.g.unary(OpCode::Log1p, L.g.unary(OpCode::Exp, L.g.binary(OpCode::Sub, mn, mx))));
    Value inf_same = L.g.binary(OpCode::And, L.g.compare(Cmp::EQ, mn, mx),
                                L.g.compare(Cmp::EQ, L.g.unary(OpCode::Abs, mn), L.cst_like(INFINITY, mn)));
    r = L.g.select(inf_same, x, r);
    Value valid = L.g.compare(Cmp::GE, L.g.iota(DType::I64, s, d), L.g.constant(double(k), DType::I64, s));
    x = L.g.select(valid, r, x);
  }
  return one(L.g.convert(x, dt));
}

// searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter) and bucketize(self,
// boundaries, *, out_int32, right): a fixed-length binary search (bit_length(n) rounds of
// Gather) per value, with CPU's comparisons: lower bound moves right while !(b[mid] >= v),
// upper bound while !(b[mid] > v) (so NaNs order as CPU's loop orders them).
Value bsearch(Lower& L, Value b, Value v, bool right) {
  ir::Shape bs = L.g.shape(b), vs = L.g.shape(v);  // [P, N], [P, M]
  int64_t n = bs[1];
  Value lo = L.g.constant(0, DType::I64, vs), hi = L.g.constant(double(n), DType::I64, vs);
  if (n == 0) return lo;
  for (int64_t r = n; r > 0; r >>= 1) {
    Value open = L.g.compare(Cmp::LT, lo, hi);
    Value mid = L.g.binary(OpCode::Add, lo, L.g.binary(OpCode::Div, L.g.binary(OpCode::Sub, hi, lo), L.cst_like(2, lo)));
    Value bm = L.g.op(OpCode::Gather, {b, L.g.binary(OpCode::Min, mid, L.cst_like(double(n - 1), mid))}, axis(1));
    Value go = L.g.unary(OpCode::Not, L.g.compare(right ? Cmp::GT : Cmp::GE, bm, v));
    Value gor = L.g.binary(OpCode::And, open, go), gol = L.g.binary(OpCode::And, open, L.g.unary(OpCode::Not, go));
    lo = L.g.select(gor, L.g.binary(OpCode::Add, mid, L.cst_like(1, mid)), lo);
    hi = L.g.select(gol, mid, hi);
  }
  return lo;
}

std::vector<Value> search(Lower& L, const at::Tensor& bnd, const c10::IValue& vals, bool out_int32, bool right,
                          const c10::IValue& sorter) {
  TORCH_CHECK(bnd.dim() >= 1, "[", L.op(), "] boundaries tensor should have at least 1 dimension; got 0");
  at::ScalarType st = vals.isTensor() ? at::promote_types(bnd.scalar_type(), vals.toTensor().scalar_type())
                                      : at::result_type(bnd, vals.toScalar());
  DType ct = to_ir(st, L.op());
  at::Tensor vt = vals.isTensor() ? vals.toTensor() : at::Tensor();
  ir::Shape vs = vt.defined() ? shape_of(vt) : ir::Shape{};
  int64_t n = bnd.size(-1), m = vs.empty() ? 1 : vs.back(), p = 1;
  if (bnd.dim() == 1) {
    m = 1;
    for (int64_t e : vs) m *= e;
  } else {
    TORCH_CHECK(vt.defined() && vt.dim() == bnd.dim() && std::equal(vs.begin(), vs.end() - 1, bnd.sizes().begin()), "[",
                L.op(), "] boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and "
                "input value tensor must match; got boundaries ", bnd.sizes(), " and input ",
                vt.defined() ? vt.sizes() : at::IntArrayRef{});
    for (size_t k = 0; k + 1 < vs.size(); ++k) p *= vs[k];
  }
  DType ot = out_int32 ? DType::I32 : DType::I64;
  if (p * m == 0 || n == 0) return one(L.g.constant(0, ot, vs));
  Value b = L.g.reshape(L.in(bnd, ct), {p, n});
  if (has_tensor(sorter)) {
    const at::Tensor& so = sorter.toTensor();
    TORCH_CHECK(so.sizes() == bnd.sizes(), "[", L.op(), "] boundary and sorter must have the same size; got ", bnd.sizes(),
                " and ", so.sizes());
    TORCH_CHECK(so.scalar_type() == at::kLong, "[", L.op(), "] sorter must be a tensor of long dtype; got ", so.scalar_type());
    Value si = L.g.reshape(L.in(so), {p, n});
    Value bad = L.g.binary(OpCode::Or, L.g.compare(Cmp::LT, si, L.cst_like(0, si)), L.g.compare(Cmp::GE, si, L.cst_like(double(n), si)));
    L.check(L.g.reduce(bad, ir::Reducer::Or, {0, 1}), std::string("[") + L.op() + "] sorter index out of range");
    b = L.g.op(OpCode::Gather, {b, si}, axis(1));
  }
  Value v = vt.defined() ? L.g.reshape(L.in(vt, ct), {p, m}) : L.g.reshape(L.scalar(vals.toScalar(), ct), {1, 1});
  return one(L.g.reshape(L.g.convert(bsearch(L, b, v, right), ot), vs));
}

// searchsorted.Tensor / .Scalar (sorted_sequence, self, *, out_int32, right, side, sorter).
std::vector<Value> searchsorted(Lower& L, Args a) {
  bool right = a[3].toBool();
  if (!a[4].isNone()) {
    std::string side = std::string(a[4].toStringRef());
    TORCH_CHECK(side == "left" || side == "right", "[", L.op(), "] side can only be 'left' or 'right'; got '", side, "'");
    TORCH_CHECK(!(side == "left" && right), "[", L.op(), "] side and right can't be set to opposites, got side of left while right was True");
    right = side == "right";
  }
  return search(L, a[0].toTensor(), a[1], a[2].toBool(), right, a[5]);
}

// bucketize.Tensor / .Scalar (self, boundaries, *, out_int32, right).
std::vector<Value> bucketize(Lower& L, Args a) {
  TORCH_CHECK(a[1].toTensor().dim() == 1, "[", L.op(), "] boundaries tensor must be 1 dimension; got ", a[1].toTensor().dim());
  return search(L, a[1].toTensor(), a[0], a[2].toBool(), a[3].toBool(), c10::IValue());
}

// repeat_interleave.Tensor(repeats, *, output_size): element j of the result is the number of
// running totals of repeats that are <= j (an upper-bound search). Without output_size the
// length depends on the data: one sync for the total (and the negative-repeat check).
at::Tensor repeat_interleave(const at::Tensor& rep, std::optional<c10::SymInt> output_size) {
  const char* op = "aten::repeat_interleave.Tensor";
  TORCH_CHECK(rep.dim() == 1, "[", op, "] repeat_interleave only accept 1D vector as repeat; got ", rep.dim(), " dims");
  TORCH_CHECK(rep.scalar_type() == at::kLong || rep.scalar_type() == at::kInt, "[", op,
              "] repeats has to be Long or Int tensor; got ", rep.scalar_type());
  int64_t n = rep.size(0), total = 0;
  if (output_size.has_value()) {
    total = output_size->expect_int();
    TORCH_CHECK(total >= 0, "[", op, "] output_size must be non-negative; got ", total);
  } else if (n > 0) {
    Lower A(op);
    Value r = A.in(rep, DType::I64);
    auto res = A.run({A.g.reduce(r, ir::Reducer::Sum, {0}), A.g.reduce(r, ir::Reducer::Min, {0})});
    total = res[0].cpu().item<int64_t>();  // the sync
    TORCH_CHECK(res[1].cpu().item<int64_t>() >= 0, "[", op, "] repeats can not be negative");
  }
  Lower L(op);
  if (n == 0 || total == 0) {
    TORCH_CHECK(total == 0, "[", op, "] allocated size does not match required size; got output_size ", total, ", expected 0");
    return L.run1(L.g.constant(0, to_ir(rep.scalar_type(), op), {0}));
  }
  Value r = L.in(rep, DType::I64);
  Value cs = L.g.op(OpCode::Cumsum, {r}, axis(0));
  if (output_size.has_value()) {
    L.check(L.g.reduce(L.g.compare(Cmp::LT, r, L.cst_like(0, r)), ir::Reducer::Or, {0}), std::string("[") + op + "] repeats can not be negative");
    Value sum = L.g.slice(cs, {n - 1}, {n}, {1});
    L.check(L.g.reduce(L.g.compare(Cmp::NE, sum, L.g.constant(double(total), DType::I64, {1})), ir::Reducer::Or, {0}),
            std::string("[") + op + "] allocated size does not match required size");
  }
  Value j = L.g.iota(DType::I64, {1, total}, 1);
  Value out = L.g.reshape(bsearch(L, L.g.reshape(cs, {1, n}), j, true), {total});
  return L.run1(L.g.convert(out, to_ir(rep.scalar_type(), op)));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto cumsum = [](Lower& L, Args a) { return scan(L, a, OpCode::Cumsum); };
  auto cumprod = [](Lower& L, Args a) { return scan(L, a, OpCode::Cumprod); };
  auto median = [](Lower& L, Args a) { return median_all(L, a, Stat::kMedian); };
  auto nanmedian = [](Lower& L, Args a) { return median_all(L, a, Stat::kNanMedian); };
  auto median_d = [](Lower& L, Args a) { return median_dim(L, a, Stat::kMedian); };
  auto nanmedian_d = [](Lower& L, Args a) { return median_dim(L, a, Stat::kNanMedian); };
  auto kth = [](Lower& L, Args a) { return median_dim(L, a, Stat::kKth); };
  auto cummax = [](Lower& L, Args a) { return cum_extreme(L, a, true); };
  auto cummin = [](Lower& L, Args a) { return cum_extreme(L, a, false); };
  register_ops(m, {
      {"sort", sort}, {"sort.values", sort}, {"sort.stable", sort}, {"sort.values_stable", sort},
      {"topk", topk}, {"topk.values", topk},
      {"cumsum", cumsum}, {"cumsum_", cumsum}, {"cumsum.out", cumsum},
      {"cumprod", cumprod}, {"cumprod_", cumprod}, {"cumprod.out", cumprod},
      {"multinomial", multinomial}, {"multinomial.out", multinomial},
      {"median", median}, {"nanmedian", nanmedian},
      {"median.dim", median_d}, {"median.dim_values", median_d},
      {"nanmedian.dim", nanmedian_d}, {"nanmedian.dim_values", nanmedian_d},
      {"kthvalue", kth}, {"kthvalue.values", kth},
      {"cummax", cummax}, {"cummax.out", cummax}, {"cummin", cummin}, {"cummin.out", cummin},
      {"_logcumsumexp", logcumsumexp}, {"_logcumsumexp.out", logcumsumexp},
      {"searchsorted.Tensor", searchsorted}, {"searchsorted.Tensor_out", searchsorted},
      {"searchsorted.Scalar", searchsorted}, {"searchsorted.Scalar_out", searchsorted},
      {"bucketize.Tensor", bucketize}, {"bucketize.Tensor_out", bucketize}, {"bucketize.Scalar", bucketize},
  });
  m.impl("repeat_interleave.Tensor", repeat_interleave);
}

}  // namespace
}  // namespace torch_tpu::lowering
