// Order-based ops: sort (argsort reaches it), topk, median/nanmedian/kthvalue, cumsum/cumprod
// and multinomial, on the IR's stable ArgSort + Gather and inclusive scans. sort/topk
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto cumsum = [](Lower& L, Args a) { return scan(L, a, OpCode::Cumsum); };
  auto cumprod = [](Lower& L, Args a) { return scan(L, a, OpCode::Cumprod); };
  auto median = [](Lower& L, Args a) { return median_all(L, a, Stat::kMedian); };
  auto nanmedian = [](Lower& L, Args a) { return median_all(L, a, Stat::kNanMedian); };
  auto median_d = [](Lower& L, Args a) { return median_dim(L, a, Stat::kMedian); };
  auto nanmedian_d = [](Lower& L, Args a) { return median_dim(L, a, Stat::kNanMedian); };
  auto kth = [](Lower& L, Args a) { return median_dim(L, a, Stat::kKth); };
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
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
