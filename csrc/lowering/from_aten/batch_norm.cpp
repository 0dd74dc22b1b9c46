// Batch norm: native_batch_norm and its legit / with_update variants (training statistics and
// the running-statistics update in one graph), and the backward ops. Computed in f32 for
// bf16/f16 inputs; the saved statistics take CPU's dtype (f32 for a "mixed" call: a bf16/f16
// input with f32 parameters, else the input's).
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Reducer;

bool reduced(at::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf; }

// Input [N, C, *]: statistics per channel over every other dim.
struct BnShape {
  int64_t channels = 0, n = 0;     // n: values per channel
  std::vector<int64_t> red;        // the reduced dims
  ir::Shape stat;                  // [1, C, 1, ...]: statistics broadcast against the input
};

BnShape bn_shape(Lower& L, const at::Tensor& input) {
  TORCH_CHECK_INDEX(input.dim() >= 2, "[", L.op(), "] expected an input of shape [N, C, *]; got ", input.dim(),
                    " dims (Dimension out of range)");
  BnShape s;
  s.channels = input.size(1);
  s.n = s.channels ? input.numel() / s.channels : 0;
  s.stat = ir::Shape(input.dim(), 1);
  s.stat[1] = s.channels;
  for (int64_t d = 0; d < input.dim(); ++d)
    if (d != 1) s.red.push_back(d);
  return s;
}

// CPU's rules: a float input; parameters 1-D with C values, all of one dtype, which is the
// input's or f32 for a bf16/f16 input ("mixed"). Returns the saved statistics' dtype.
DType check_params(Lower& L, const at::Tensor& input, const BnShape& s, std::initializer_list<at::Tensor> params) {
  at::ScalarType it = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(it), "[", L.op(), "] \"batch_norm\" not implemented for '", it, "'");
  std::optional<at::ScalarType> pt;
  for (const at::Tensor& p : params) {
    if (!p.defined()) continue;
    TORCH_CHECK(p.dim() == 1 && p.numel() == s.channels, "[", L.op(),
                "] weight, bias and running statistics must be 1-D with one value per channel (", s.channels,
                "); got shape ", p.sizes());
    TORCH_CHECK(!pt || *pt == p.scalar_type(), "[", L.op(), "] mixed dtype (CPU): all parameters must share one dtype; got ",
                *pt, " and ", p.scalar_type());
    pt = p.scalar_type();
  }
  bool mixed = pt && *pt != it;
  TORCH_CHECK(!mixed || (reduced(it) && *pt == at::kFloat), "[", L.op(),
              "] mixed dtype (CPU): expect parameter to have scalar type of Float; got ", *pt, " for a ", it, " input");
  return to_ir(mixed ? at::kFloat : it, L.op());
}

struct BnCall {
  at::Tensor input, weight, bias, rm, rv;  // undefined when absent
  int rm_arg = -1, rv_arg = -1;            // argument indices of the running statistics
  bool training = true;
  c10::IValue momentum, eps;
};

// (out, save_mean, save_invstd); in training the updated running statistics are also_writes.
std::vector<Value> bn_forward(Lower& L, const BnCall& c) {
  BnShape s = bn_shape(L, c.input);
  DType st = check_params(L, c.input, s, {c.weight, c.bias, c.rm, c.rv});
  DType dt = to_ir(c.input.scalar_type(), L.op()), ct = opmath(dt);
  Value x = L.in(c.input, ct);
  Value eps = L.scalar(c.eps.toScalar(), ct);
  Value mean, invstd, save_mean, save_invstd;  // [C]
  if (c.training) {
    TORCH_CHECK(c.input.numel() > 0, "[", L.op(), "] input tensor must have at least one element, but got input_sizes = ",
                c.input.sizes());
    Value n = L.cst(double(s.n), ct);
    mean = bin(L, OpCode::Div, L.g.reduce(x, Reducer::Sum, s.red), n);
    Value xmu = bin(L, OpCode::Sub, x, L.g.reshape(mean, s.stat));
    Value sumsq = L.g.reduce(L.g.binary(OpCode::Mul, xmu, xmu), Reducer::Sum, s.red);
    invstd = L.g.unary(OpCode::Rsqrt, bin(L, OpCode::Add, bin(L, OpCode::Div, sumsq, n), eps));
    save_mean = L.g.convert(mean, st);
    save_invstd = L.g.convert(invstd, st);
    // CPU: running = momentum * stat + (1 - momentum) * running, with the unbiased variance
    // sumsq / (n - 1) (0 / 0 = NaN for one value per channel, as on CPU).
    double m = c.momentum.toDouble();
    Value keep = L.scalar(1.0 - m, ct), take = L.scalar(m, ct);
    auto update = [&](const at::Tensor& run, int arg, Value stat) {
      if (!run.defined()) return;
      Value old = L.in(run, ct);
      L.also_write(arg, bin(L, OpCode::Add, bin(L, OpCode::Mul, take, stat), bin(L, OpCode::Mul, keep, old)));
    };
    update(c.rm, c.rm_arg, mean);
    update(c.rv, c.rv_arg, bin(L, OpCode::Div, sumsq, L.cst(double(s.n - 1), ct)));
  } else {
    TORCH_CHECK(c.rm.defined() && c.rv.defined(), "[", L.op(),
                "] running_mean and running_var must be defined in evaluation mode");
    mean = L.in(c.rm, ct);
    invstd = L.g.unary(OpCode::Rsqrt, bin(L, OpCode::Add, L.in(c.rv, ct), eps));
    save_mean = save_invstd = L.g.constant(0, st, {0});  // CPU returns empty statistics in eval
  }
  // (x - mean) * (invstd * w) + b. CPU computes fma(x, alpha, b - mean * alpha), which leaves
  // the rounding of mean * alpha (~|mean| * invstd * 2^-24) where this gives the exact value.
  Value alpha = c.weight.defined() ? L.g.binary(OpCode::Mul, invstd, L.in(c.weight, ct)) : invstd;
  Value y = bin(L, OpCode::Mul, bin(L, OpCode::Sub, x, L.g.reshape(mean, s.stat)), L.g.reshape(alpha, s.stat));
  if (c.bias.defined()) y = bin(L, OpCode::Add, y, L.g.reshape(L.in(c.bias, ct), s.stat));
  return {L.g.convert(y, dt), save_mean, save_invstd};
}

// native_batch_norm / _native_batch_norm_legit(input, weight?, bias?, running_mean, running_var,
// training, momentum, eps) (+ .out)
std::vector<Value> batch_norm(Lower& L, Args a) {
  BnCall c{a[0].toTensor(), opt_tensor(a[1]), opt_tensor(a[2]), opt_tensor(a[3]), opt_tensor(a[4]), 3, 4,
           a[5].toBool(), a[6], a[7]};
  return bn_forward(L, c);
}

// _native_batch_norm_legit.no_stats(input, weight?, bias?, training, momentum, eps)
std::vector<Value> batch_norm_no_stats(Lower& L, Args a) {
  BnCall c{a[0].toTensor(), opt_tensor(a[1]), opt_tensor(a[2]), {}, {}, -1, -1, a[3].toBool(), a[4], a[5]};
  return bn_forward(L, c);
}

// _batch_norm_with_update(input, weight?, bias?, running_mean, running_var, momentum, eps)
// -> (out, save_mean, save_invstd, reserve): always training; reserve is empty (CPU's).
std::vector<Value> batch_norm_with_update(Lower& L, Args a) {
  BnCall c{a[0].toTensor(), opt_tensor(a[1]), opt_tensor(a[2]), opt_tensor(a[3]), opt_tensor(a[4]), 3, 4,
           true, a[5], a[6]};
  std::vector<Value> r = bn_forward(L, c);
  r.push_back(L.g.constant(0, DType::U8, {0}));
  return r;
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?, train, eps, output_mask) and batch_norm_backward (same leading arguments, with
// `update` for train and a trailing reserve): (grad_input, grad_weight, grad_bias). All three
// are computed (autograd ignores what it did not ask for).
std::vector<Value> batch_norm_backward(Lower& L, Args a) {
  const at::Tensor &go = a[0].toTensor(), &input = a[1].toTensor();
  at::Tensor weight = opt_tensor(a[2]), rm = opt_tensor(a[3]), rv = opt_tensor(a[4]);
  at::Tensor save_mean = opt_tensor(a[5]), save_invstd = opt_tensor(a[6]);
  bool train = a[7].toBool();
  BnShape s = bn_shape(L, input);
  DType pt = check_params(L, input, s, {weight, rm, rv, train ? save_mean : at::Tensor(), train ? save_invstd : at::Tensor()});
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  Value g = L.in(go, ct), x = L.in(input, ct);
  Value mean, invstd;  // [C]
  if (train) {
    TORCH_CHECK(save_mean.defined() && save_invstd.defined(), "[", L.op(), "] training needs save_mean and save_invstd");
    mean = L.in(save_mean, ct);
    invstd = L.in(save_invstd, ct);
  } else {
    TORCH_CHECK(rm.defined() && rv.defined(), "[", L.op(), "] evaluation mode needs running_mean and running_var");
    mean = L.in(rm, ct);
    invstd = L.g.unary(OpCode::Rsqrt, bin(L, OpCode::Add, L.in(rv, ct), L.scalar(a[8].toScalar(), ct)));
  }
  Value xmu = bin(L, OpCode::Sub, x, L.g.reshape(mean, s.stat));
  Value sum_g = L.g.reduce(g, Reducer::Sum, s.red);
  Value dot = L.g.reduce(L.g.binary(OpCode::Mul, g, xmu), Reducer::Sum, s.red);
  Value scale = weight.defined() ? L.g.binary(OpCode::Mul, invstd, L.in(weight, ct)) : invstd;
  Value dx;
  if (train) {  // CPU: (g - mean(g) - xmu * dot * invstd^2 / n) * invstd * w
    double inv_n = s.n ? 1.0 / double(s.n) : 0.0;
    Value k = mulc(L, L.g.binary(OpCode::Mul, dot, L.g.binary(OpCode::Mul, invstd, invstd)), inv_n);
    Value centered = bin(L, OpCode::Sub, g, L.g.reshape(mulc(L, sum_g, inv_n), s.stat));
    dx = bin(L, OpCode::Sub, centered, bin(L, OpCode::Mul, xmu, L.g.reshape(k, s.stat)));
    dx = bin(L, OpCode::Mul, dx, L.g.reshape(scale, s.stat));
  } else {
    dx = bin(L, OpCode::Mul, g, L.g.reshape(scale, s.stat));
  }
  return {L.g.convert(dx, dt), L.g.convert(L.g.binary(OpCode::Mul, dot, invstd), pt), L.g.convert(sum_g, pt)};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"native_batch_norm", batch_norm}, {"native_batch_norm.out", batch_norm},
      {"_native_batch_norm_legit", batch_norm}, {"_native_batch_norm_legit.out", batch_norm},
      {"_native_batch_norm_legit.no_stats", batch_norm_no_stats},
      {"_native_batch_norm_legit.no_stats_out", batch_norm_no_stats},
      {"_batch_norm_with_update", batch_norm_with_update}, {"_batch_norm_with_update.out", batch_norm_with_update},
      {"native_batch_norm_backward", batch_norm_backward}, {"native_batch_norm_backward.out", batch_norm_backward},
      {"batch_norm_backward", batch_norm_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
