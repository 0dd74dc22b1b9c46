// Binary and predicate ops beyond pointwise.cpp: gcd, bit shifts, fmax/fmin (NaN-ignoring),
// signbit, angle, isin, and torch.equal (a host bool: one device reduction, then a sync).
#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

Value isnan(Lower& L, Value x) { return cmp(L, Cmp::NE, x, x); }

// Integer-only binary ops (gcd, shifts) with ATen promotion.
template <OpCode op>
std::vector<Value> int_binary(Lower& L, Args a) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op());
  TORCH_CHECK(ir::is_int(dt), "[", L.op(), "] needs integer tensors; got ", to_aten(dt));
  return one(bin(L, op, arg(L, a[0], dt), arg(L, a[1], dt)));
}

// fmax/fmin: like maximum/minimum but a NaN operand yields the other operand.
template <OpCode op>
std::vector<Value> fmaxmin(Lower& L, Args a) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op()), ct = opmath(dt);
  Value x = arg(L, a[0], ct), y = arg(L, a[1], ct);
  broadcast_all(L, {&x, &y});
  Value r = L.g.binary(op, x, y);
  if (ir::is_float(ct)) r = where(L, isnan(L, x), y, where(L, isnan(L, y), x, r));
  return one(L.g.convert(r, dt));
}

std::vector<Value> signbit(Lower& L, Args a) {
  const at::Tensor& t = a[0].toTensor();
  DType dt = to_ir(t.scalar_type(), L.op());
  if (dt == DType::Bool) return one(L.g.constant(0, DType::Bool, shape_of(t)));
  Value x = L.in(t, opmath(dt));
  Value neg = cmp(L, Cmp::LT, x, scal(L, 0, x));
  if (!ir::is_float(dt)) return one(neg);
  // -0.0: 1 / x is -inf.
  Value negzero = L.g.binary(OpCode::And, cmp(L, Cmp::EQ, x, scal(L, 0, x)),
                             cmp(L, Cmp::LT, bin(L, OpCode::Div, scal(L, 1, x), x), scal(L, 0, x)));
  return one(L.g.binary(OpCode::Or, neg, negzero));
}

// angle of a real number: pi for negatives, 0 otherwise, NaN kept.
std::vector<Value> angle(Lower& L, Args a) {
  DType dt = to_ir(float_type(a[0].toTensor().scalar_type()), L.op()), ct = opmath(dt);
  Value x = L.in(a[0].toTensor(), ct);
  Value r = where(L, cmp(L, Cmp::LT, x, scal(L, 0, x)), L.cst_like(M_PI, x), L.cst_like(0, x));
  return one(L.g.convert(where(L, isnan(L, x), x, r), dt));
}

// isin(elements, test_elements, *, assume_unique, invert) (Tensor/Scalar forms): each element
// compared with every test element (flattened), any over them; the compare and the reduction
// fuse, so no N x M buffer is written (O(N * M) compares: generate's stop-token checks and other
// small test sets; PyTorch CPU sorts for large ones). NaN is in no set, as on CPU.
std::vector<Value> isin(Lower& L, Args a) {
  for (int i : {0, 1})
    TORCH_CHECK(!a[i].isTensor() || a[i].toTensor().scalar_type() != at::kBool, "[", L.op(),
                "] Unsupported input type encountered for isin(): Bool");
  DType dt = to_ir(result_type(a[0], a[1]), L.op());
  bool invert = a[3].toBool();
  Value e = operand(L, a[0], dt), t = operand(L, a[1], dt);
  ir::Shape es = L.g.shape(e);
  int64_t m = 1;
  for (int64_t d : L.g.shape(t)) m *= d;
  if (m == 0) return one(L.g.constant(invert ? 1 : 0, DType::Bool, es));
  ir::Shape full = es;
  full.push_back(m);
  std::vector<int64_t> lead(es.size());
  for (size_t i = 0; i < es.size(); ++i) lead[i] = static_cast<int64_t>(i);
  int64_t r = static_cast<int64_t>(es.size());
  Value hit = L.g.compare(Cmp::EQ, L.g.broadcast(e, full, lead), L.g.broadcast(L.g.reshape(t, {m}), full, {r}));
  hit = L.g.reduce(hit, ir::Reducer::Or, {r});
  return one(invert ? L.g.unary(OpCode::Not, hit) : hit);
}

bool equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  return at::eq(a, b).all().item<bool>();
}

#define V3(name, fn) {name, fn}, {name ".out", fn}, {name "_", fn}
#define SHIFT(name, op)                                                                    \
  {name ".Tensor", int_binary<OpCode::op>}, {name ".Tensor_out", int_binary<OpCode::op>},   \
  {name ".Tensor_Scalar", int_binary<OpCode::op>},                                          \
  {name ".Tensor_Scalar_out", int_binary<OpCode::op>},                                      \
  {name ".Scalar_Tensor", int_binary<OpCode::op>},                                          \
  {name ".Scalar_Tensor_out", int_binary<OpCode::op>},                                      \
  {name "_.Tensor", int_binary<OpCode::op>}, {name "_.Tensor_Scalar", int_binary<OpCode::op>}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      V3("gcd", int_binary<OpCode::Gcd>),
      SHIFT("bitwise_left_shift", ShiftLeft), SHIFT("bitwise_right_shift", ShiftRight),
      {"__lshift__.Tensor", int_binary<OpCode::ShiftLeft>}, {"__lshift__.Scalar", int_binary<OpCode::ShiftLeft>},
      {"__ilshift__.Tensor", int_binary<OpCode::ShiftLeft>}, {"__ilshift__.Scalar", int_binary<OpCode::ShiftLeft>},
      {"__rshift__.Tensor", int_binary<OpCode::ShiftRight>}, {"__rshift__.Scalar", int_binary<OpCode::ShiftRight>},
      {"__irshift__.Tensor", int_binary<OpCode::ShiftRight>}, {"__irshift__.Scalar", int_binary<OpCode::ShiftRight>},
      {"fmax", fmaxmin<OpCode::Max>}, {"fmax.out", fmaxmin<OpCode::Max>},
      {"fmin", fmaxmin<OpCode::Min>}, {"fmin.out", fmaxmin<OpCode::Min>},
      {"signbit", signbit}, {"signbit.out", signbit},
      {"angle", angle}, {"angle.out", angle},
      {"isin.Tensor_Tensor", isin}, {"isin.Tensor_Tensor_out", isin}, {"isin.Tensor_Scalar", isin},
      {"isin.Tensor_Scalar_out", isin}, {"isin.Scalar_Tensor", isin}, {"isin.Scalar_Tensor_out", isin},
  });
  m.impl("equal", equal);
}

}  // namespace
}  // namespace torch_tpu::lowering
