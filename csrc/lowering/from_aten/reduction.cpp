// Reductions: sum, mean, prod, amax/amin, max/min (full and with indices), argmax/argmin,
// all/any, var/std. bf16/f16 accumulate in f32; integer sums accumulate in int64.
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Reducer;

// Reshapes a reduced value back to keepdim form.
Value keep(Lower& L, Value r, const ir::Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  if (!keepdim) return r;
  ir::Shape s = in;
  for (int64_t d : dims) s[d] = 1;
  return L.g.reshape(r, s);
}

std::optional<at::ScalarType> opt_dtype(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toScalarType();
}

// sum(self, dims, keepdim, dtype) / mean(...)
std::vector<Value> sum_like(Lower& L, const at::Tensor& self, const c10::IValue& dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, bool mean) {
  at::ScalarType st = self.scalar_type();
  at::ScalarType out = dtype ? *dtype : (at::isIntegralType(st, true) ? at::kLong : st);
  if (mean)
    TORCH_CHECK(at::isFloatingType(out), "[", L.op(),
                "] mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ", out);
  DType dt = to_ir(out, L.op()), ct = opmath(dt);
  Value x = L.in(self, ct);
  auto dims = dims_arg(dim, self.dim());
  if (self.dim() == 0) dims.clear();
  Value r = L.g.reduce(x, Reducer::Sum, dims);
  if (mean) {
    int64_t n = 1;
    for (int64_t d : dims) n *= self.size(d);
    r = bin(L, OpCode::Div, r, L.cst(static_cast<double>(n), ct));
  }
  return one(L.g.convert(keep(L, r, shape_of(self), dims, keepdim), dt));
}

std::vector<Value> extreme(Lower& L, const at::Tensor& self, const c10::IValue& dim, bool keepdim, Reducer r) {
  auto dims = dims_arg(dim, self.dim());
  if (self.dim() == 0) dims.clear();
  for (int64_t d : dims)
    TORCH_CHECK(self.size(d) != 0, "[", L.op(), "] Expected reduction dim ", d,
                " to have non-zero size.");
  if (self.numel() == 0 && dims.size() == static_cast<size_t>(self.dim()))
    TORCH_CHECK(false, "[", L.op(), "] Expected reduction dim to be specified for input.numel() == 0.");
  Value x = L.in(self);
  return one(keep(L, L.g.reduce(x, r, dims), shape_of(self), dims, keepdim));
}

std::vector<Value> arg_extreme(Lower& L, Args a, OpCode op) {
  const at::Tensor& self = a[0].toTensor();
  bool keepdim = a[2].toBool();
  TORCH_CHECK(self.scalar_type() != at::kBool, "[", L.op(), "] does not support bool input; got Bool, expected a numeric dtype");
  Value x = L.in(self);
  TORCH_CHECK(self.numel() > 0 || !a[1].isNone(), "[", L.op(), "] Expected reduction dim to be specified for input.numel() == 0.");
  if (a[1].isNone()) {
    x = L.g.reshape(x, {self.numel()});
    Value r = L.g.op(op, {x}, [] { ir::Attrs t; t.dims = {0}; return t; }());
    if (keepdim) r = L.g.reshape(r, ir::Shape(self.dim(), 1));
    return one(r);
  }
  int64_t d = wrap_dim(a[1].toInt(), self.dim());  // a 0-dim tensor takes dim 0 or -1 only, as on CPU
  if (self.dim() == 0) return one(L.g.constant(0, DType::I64, {}));
  TORCH_CHECK(self.size(d) != 0, "[", L.op(), "] Expected reduction dim ", d, " to have non-zero size.");
  ir::Attrs at;
  at.dims = {d};
  return one(keep(L, L.g.op(op, {x}, at), shape_of(self), {d}, keepdim));
}

std::vector<Value> max_dim(Lower& L, Args a, bool is_max) {
  const at::Tensor& self = a[0].toTensor();
  bool keepdim = a[2].toBool();
  int64_t d = wrap_dim(a[1].toInt(), self.dim());  // a 0-dim tensor takes dim 0 or -1 only, as on CPU
  if (self.dim() == 0) {
    Value x = L.in(self);
    return {x, L.g.constant(0, DType::I64, {})};
  }
  TORCH_CHECK(self.size(d) != 0, "[", L.op(), "] Expected reduction dim ", d, " to have non-zero size.");
  Value x = L.in(self);
  Value v = L.g.reduce(x, is_max ? Reducer::Max : Reducer::Min, {d});
  ir::Attrs at;
  at.dims = {d};
  Value i = L.g.op(is_max ? OpCode::ArgMax : OpCode::ArgMin, {x}, at);
  return {keep(L, v, shape_of(self), {d}, keepdim), keep(L, i, shape_of(self), {d}, keepdim)};
}

// uint8 input gives a uint8 result, as in PyTorch; an out= tensor gets the bool result
// converted to its dtype (so a bool `out` works too).
std::vector<Value> all_any(Lower& L, const at::Tensor& self, const c10::IValue& dim, bool keepdim, bool all,
                           bool has_out) {
  Value x = L.in(self);
  if (self.scalar_type() != at::kBool) x = L.g.compare(ir::Cmp::NE, x, L.cst_like(0, x));
  auto dims = dims_arg(dim, self.dim());
  if (self.dim() == 0) dims.clear();
  Value r = L.g.reduce(x, all ? Reducer::And : Reducer::Or, dims);
  if (self.scalar_type() == at::kByte && !has_out) r = L.g.convert(r, DType::U8);
  return one(keep(L, r, shape_of(self), dims, keepdim));
}

// var/std/var_mean with correction (Bessel by default).
enum class Moment { Var, Std, VarMean };
std::vector<Value> var_std(Lower& L, Args a, Moment m) {
  const at::Tensor& self = a[0].toTensor();
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "[", L.op(), "] std and var only support floating point inputs; got ", self.scalar_type());
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  auto dims = dims_arg(a[1], self.dim());
  if (self.dim() == 0) dims.clear();
  double correction = a[2].isNone() ? 1.0 : a[2].toScalar().toDouble();
  bool keepdim = a[3].toBool();
  int64_t n = 1;
  for (int64_t d : dims) n *= self.size(d);
  Value x = L.in(self, ct);
  Value mean = L.g.reshape(bin(L, OpCode::Div, L.g.reduce(x, Reducer::Sum, dims), L.cst(double(n), ct)),
                           [&] { ir::Shape s = shape_of(self); for (int64_t d : dims) s[d] = 1; return s; }());
  Value c = bin(L, OpCode::Sub, x, mean);
  Value ss = L.g.reduce(L.g.binary(OpCode::Mul, c, c), Reducer::Sum, dims);
  // An empty reduction is NaN whatever the correction (CPU: var(empty, correction=-1) is NaN, not 0/1).
  double divisor = n == 0 ? 0.0 : std::max(0.0, double(n) - correction);
  Value r = bin(L, OpCode::Div, ss, L.cst(divisor, ct));
  if (m == Moment::Std) r = L.g.unary(OpCode::Sqrt, r);
  r = L.g.convert(keep(L, r, shape_of(self), dims, keepdim), dt);
  if (m != Moment::VarMean) return one(r);
  return {r, L.g.convert(L.g.reshape(mean, L.g.shape(r)), dt)};
}

std::vector<Value> sum_dim(Lower& L, Args a) {
  return sum_like(L, a[0].toTensor(), a[1], a[2].toBool(), opt_dtype(a[3]), false);
}
std::vector<Value> sum_full(Lower& L, Args a) {
  return sum_like(L, a[0].toTensor(), c10::IValue(), false, opt_dtype(a[1]), false);
}
std::vector<Value> mean_dim(Lower& L, Args a) {
  return sum_like(L, a[0].toTensor(), a[1], a[2].toBool(), opt_dtype(a[3]), true);
}
std::vector<Value> mean_full(Lower& L, Args a) {
  return sum_like(L, a[0].toTensor(), c10::IValue(), false, opt_dtype(a[1]), true);
}
std::vector<Value> prod_dim(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  at::ScalarType st = self.scalar_type();
  at::ScalarType out = !a[3].isNone() ? a[3].toScalarType() : (at::isIntegralType(st, true) ? at::kLong : st);
  DType dt = to_ir(out, L.op()), ct = opmath(dt);
  int64_t d = wrap_dim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  std::vector<int64_t> dims = self.dim() ? std::vector<int64_t>{d} : std::vector<int64_t>{};
  return one(L.g.convert(keep(L, L.g.reduce(L.in(self, ct), Reducer::Prod, dims), shape_of(self), dims, a[2].toBool()), dt));
}
std::vector<Value> prod_full(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  at::ScalarType st = self.scalar_type();
  at::ScalarType out = !a[1].isNone() ? a[1].toScalarType() : (at::isIntegralType(st, true) ? at::kLong : st);
  DType dt = to_ir(out, L.op()), ct = opmath(dt);
  auto dims = dims_arg(c10::IValue(), self.dim());
  return one(L.g.convert(L.g.reduce(L.in(self, ct), Reducer::Prod, dims), dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto amax = [](Lower& L, Args a) { return extreme(L, a[0].toTensor(), a[1], a[2].toBool(), Reducer::Max); };
  auto amin = [](Lower& L, Args a) { return extreme(L, a[0].toTensor(), a[1], a[2].toBool(), Reducer::Min); };
  auto maxf = [](Lower& L, Args a) { return extreme(L, a[0].toTensor(), c10::IValue(), false, Reducer::Max); };
  auto minf = [](Lower& L, Args a) { return extreme(L, a[0].toTensor(), c10::IValue(), false, Reducer::Min); };
  auto argmax = [](Lower& L, Args a) { return arg_extreme(L, a, OpCode::ArgMax); };
  auto argmin = [](Lower& L, Args a) { return arg_extreme(L, a, OpCode::ArgMin); };
  auto maxd = [](Lower& L, Args a) { return max_dim(L, a, true); };
  auto mind = [](Lower& L, Args a) { return max_dim(L, a, false); };
  auto all_dim = [](Lower& L, Args a) { return all_any(L, a[0].toTensor(), a[1], a[2].toBool(), true, a.size() > 3); };
  auto any_dim = [](Lower& L, Args a) { return all_any(L, a[0].toTensor(), a[1], a[2].toBool(), false, a.size() > 3); };
  auto all_full = [](Lower& L, Args a) { return all_any(L, a[0].toTensor(), c10::IValue(), false, true, a.size() > 1); };
  auto any_full = [](Lower& L, Args a) { return all_any(L, a[0].toTensor(), c10::IValue(), false, false, a.size() > 1); };
  auto var = [](Lower& L, Args a) { return var_std(L, a, Moment::Var); };
  auto stdv = [](Lower& L, Args a) { return var_std(L, a, Moment::Std); };
  auto var_mean = [](Lower& L, Args a) { return var_std(L, a, Moment::VarMean); };
  register_ops(m, {
      {"sum.dim_IntList", sum_dim}, {"sum.IntList_out", sum_dim}, {"sum", sum_full}, {"sum.out", sum_full},
      {"mean.dim", mean_dim}, {"mean.out", mean_dim}, {"mean", mean_full}, {"mean.dtype_out", mean_full},
      {"prod.dim_int", prod_dim}, {"prod.int_out", prod_dim}, {"prod", prod_full}, {"prod.out", prod_full},
      {"amax", amax}, {"amax.out", amax}, {"amin", amin}, {"amin.out", amin},
      {"max", maxf}, {"max.unary_out", maxf}, {"min", minf}, {"min.unary_out", minf},
      {"max.dim", maxd}, {"max.dim_max", maxd}, {"min.dim", mind}, {"min.dim_min", mind},
      {"argmax", argmax}, {"argmax.out", argmax}, {"argmin", argmin}, {"argmin.out", argmin},
      {"all.dim", all_dim}, {"all.dims", all_dim}, {"all.out", all_dim}, {"all.dims_out", all_dim}, {"all", all_full}, {"all.all_out", all_full},
      {"any.dim", any_dim}, {"any.dims", any_dim}, {"any.out", any_dim}, {"any.dims_out", any_dim}, {"any", any_full}, {"any.all_out", any_full},
      {"var.correction", var}, {"var.correction_out", var}, {"std.correction", stdv}, {"std.correction_out", stdv},
      {"var_mean.correction", var_mean}, {"var_mean.correction_out", var_mean},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
