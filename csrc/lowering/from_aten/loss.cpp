// Losses: nll_loss (1-D/2-D input, class weights, ignore_index, reductions) with backward,
// built on a one-hot compare against an iota (no gather needed), and mse_loss.
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;
using ir::Reducer;

enum { kNone = 0, kMean = 1, kSum = 2 };

struct Nll {
  Value onehot;    // [N, C] bool: class == target and target != ignore
  Value w_per;     // [N] weight of each sample's target (0 where ignored)
  Value total_w;   // [] sum of w_per
  bool batched;
};

// input [N, C] or [C]; target [N] or [].
Nll nll_common(Lower& L, const at::Tensor& input, const at::Tensor& target, const c10::IValue& weight,
               int64_t ignore_index, DType ct) {
  TORCH_CHECK(input.dim() == 1 || input.dim() == 2, "[", L.op(), "] input tensor should be 1D or 2D; got ", input.dim(), "D");
  TORCH_CHECK(at::isIntegralType(target.scalar_type(), false), "[", L.op(), "] expected target of integer type; got ", target.scalar_type());
  bool batched = input.dim() == 2;
  int64_t n = batched ? input.size(0) : 1, c = input.size(batched ? 1 : 0);
  TORCH_CHECK(target.dim() <= 1 && (batched ? target.numel() == n : target.dim() == 0), "[", L.op(),
              "] Expected input batch_size (", n, ") to match target batch_size (", target.numel(), ")");
  Value t = L.g.reshape(L.in(target, DType::I64), {n});
  Value cls = L.g.iota(DType::I64, {n, c}, 1);
  Value tb = L.g.broadcast(t, {n, c}, {0});
  Value valid = L.g.compare(Cmp::NE, t, L.g.constant(double(ignore_index), DType::I64, {n}));
  // A target outside [0, C) that is not ignore_index raises at the next sync (CPU raises at once).
  Value out_of_range = L.g.binary(OpCode::Or, L.g.compare(Cmp::LT, t, L.g.constant(0, DType::I64, {n})),
                                  L.g.compare(Cmp::GE, t, L.g.constant(double(c), DType::I64, {n})));
  L.check_index(L.g.reduce(L.g.binary(OpCode::And, valid, out_of_range), Reducer::Or, {0}),
          std::string("[") + L.op() + "] Target is out of bounds; got a target outside [0, " + std::to_string(c) +
              "), expected class indices or ignore_index (" + std::to_string(ignore_index) + ")");
  Value onehot = L.g.binary(OpCode::And, L.g.compare(Cmp::EQ, cls, tb), L.g.broadcast(valid, {n, c}, {0}));
  Value wrow;
  if (has_tensor(weight)) {
    const at::Tensor& w = weight.toTensor();
    TORCH_CHECK(w.dim() == 1 && w.numel() == c, "[", L.op(), "] weight tensor should be defined either for all ", c,
                " classes or no classes but got weight tensor of shape: ", w.sizes());
    wrow = L.g.broadcast(L.in(w, ct), {n, c}, {1});
  } else {
    wrow = L.g.constant(1, ct, {n, c});
  }
  Value wsel = L.g.select(onehot, wrow, L.g.constant(0, ct, {n, c}));
  Value w_per = L.g.reduce(wsel, Reducer::Sum, {1});
  return {onehot, w_per, L.g.reduce(w_per, Reducer::Sum, {0}), batched};
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<Value> nll_forward(Lower& L, Args a) {
  const at::Tensor &input = a[0].toTensor(), &target = a[1].toTensor();
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  int64_t reduction = a[3].toInt(), ignore = a[4].toInt();
  Nll s = nll_common(L, input, target, a[2], ignore, ct);
  int64_t n = s.batched ? input.size(0) : 1, c = input.size(s.batched ? 1 : 0);
  Value x = L.g.reshape(L.in(input, ct), {n, c});
  Value zero = L.g.constant(0, ct, {n, c});
  Value wrow = L.g.broadcast(s.w_per, {n, c}, {0});
  Value picked = L.g.reduce(L.g.select(s.onehot, L.g.binary(OpCode::Mul, x, wrow), zero), Reducer::Sum, {1});
  Value loss = L.g.unary(OpCode::Negate, picked);  // [n]
  Value out;
  if (reduction == kNone) out = s.batched ? loss : L.g.reshape(loss, {});
  else {
    out = L.g.reduce(loss, Reducer::Sum, {0});
    if (reduction == kMean) out = L.g.binary(OpCode::Div, out, s.total_w);
  }
  return {L.g.convert(out, dt), L.g.convert(s.total_w, dt)};
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
std::vector<Value> nll_backward(Lower& L, Args a) {
  const at::Tensor &go = a[0].toTensor(), &input = a[1].toTensor(), &target = a[2].toTensor();
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  int64_t reduction = a[4].toInt(), ignore = a[5].toInt();
  Nll s = nll_common(L, input, target, a[3], ignore, ct);
  int64_t n = s.batched ? input.size(0) : 1, c = input.size(s.batched ? 1 : 0);
  Value g = L.in(go, ct);
  Value gn;  // [n] gradient per sample
  if (reduction == kNone) gn = L.g.reshape(g, {n});
  else {
    Value g0 = L.g.reshape(g, {});
    if (reduction == kMean) g0 = L.g.binary(OpCode::Div, g0, L.g.reshape(L.in(a[6].toTensor(), ct), {}));
    gn = L.g.broadcast(g0, {n}, {});
  }
  Value coef = L.g.unary(OpCode::Negate, L.g.binary(OpCode::Mul, gn, s.w_per));
  Value r = L.g.select(s.onehot, L.g.broadcast(coef, {n, c}, {0}), L.g.constant(0, ct, {n, c}));
  return one(L.g.convert(L.g.reshape(r, shape_of(input)), dt));
}

// An elementwise loss reduced as `reduction` asks (none, sum, mean), in dtype ct.
Value reduce_loss(Lower& L, Value loss, int64_t reduction, DType ct) {
  if (reduction == kNone) return loss;
  std::vector<int64_t> all;
  for (size_t i = 0; i < L.g.shape(loss).size(); ++i) all.push_back(static_cast<int64_t>(i));
  Value r = L.g.reduce(loss, Reducer::Sum, all);
  if (reduction == kMean) r = L.g.binary(OpCode::Div, r, L.cst(double(ir::numel(L.g.shape(loss))), ct));
  return r;
}

std::vector<Value> mse(Lower& L, Args a) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op()), ct = opmath(dt);
  Value d = bin(L, OpCode::Sub, L.in(a[0].toTensor(), ct), L.in(a[1].toTensor(), ct));
  Value sq = L.g.binary(OpCode::Mul, d, d);
  return one(L.g.convert(reduce_loss(L, sq, a[2].toInt(), ct), dt));
}

// binary_cross_entropy(self, target, weight?, reduction): CPU's
// (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), times the weight; an input outside
// [0, 1] (or NaN), or a target outside it, raises at the next sync, as CPU raises at once.
std::vector<Value> bce(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &target = a[1].toTensor();
  TORCH_CHECK(self.numel() == target.numel(), "[", L.op(), "] input and target must have the same number of elements; got ",
              self.numel(), " and ", target.numel());
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  Value x = L.in(self, ct), t = L.g.reshape(L.in(target, ct), shape_of(self));
  Value ok = L.g.binary(OpCode::And, L.g.compare(Cmp::GE, x, L.cst_like(0, x)), L.g.compare(Cmp::LE, x, L.cst_like(1, x)));
  L.check(any_true(L, L.g.unary(OpCode::Not, ok)), std::string("[") + L.op() + "] all elements of input should be between 0 and 1");
  Value tok = L.g.binary(OpCode::And, L.g.compare(Cmp::GE, t, L.cst_like(0, t)), L.g.compare(Cmp::LE, t, L.cst_like(1, t)));
  L.check(any_true(L, L.g.unary(OpCode::Not, tok)), std::string("[") + L.op() + "] all elements of target should be between 0 and 1");
  Value floor = L.cst_like(-100, x);
  Value l1 = L.g.binary(OpCode::Max, L.g.unary(OpCode::Log1p, L.g.unary(OpCode::Negate, x)), floor);
  Value l0 = L.g.binary(OpCode::Max, L.g.unary(OpCode::Log, x), floor);
  Value loss = L.g.binary(OpCode::Sub, L.g.binary(OpCode::Mul, L.g.binary(OpCode::Sub, t, L.cst_like(1, t)), l1),
                          L.g.binary(OpCode::Mul, t, l0));
  if (a[2].isTensor() && a[2].toTensor().defined()) loss = bin(L, OpCode::Mul, loss, L.in(a[2].toTensor(), ct));
  return one(L.g.convert(reduce_loss(L, loss, a[3].toInt(), ct), dt));
}

// mse_loss_backward(grad_output, self, target, reduction)
std::vector<Value> mse_backward(Lower& L, Args a) {
  const at::Tensor& self = a[1].toTensor();
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  Value d = bin(L, OpCode::Sub, L.in(self, ct), L.in(a[2].toTensor(), ct));
  double scale = a[3].toInt() == kMean ? 2.0 / std::max<int64_t>(1, ir::numel(L.g.shape(d))) : 2.0;
  Value r = bin(L, OpCode::Mul, mulc(L, d, scale), L.in(a[0].toTensor(), ct));
  return one(L.g.convert(L.bcast(r, shape_of(self)), dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"nll_loss_forward", nll_forward}, {"nll_loss_forward.output", nll_forward},
      {"nll_loss_backward", nll_backward}, {"nll_loss_backward.grad_input", nll_backward},
      {"mse_loss", mse}, {"mse_loss.out", mse},
      {"mse_loss_backward", mse_backward}, {"mse_loss_backward.grad_input", mse_backward},
      {"binary_cross_entropy", bce}, {"binary_cross_entropy.out", bce},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
