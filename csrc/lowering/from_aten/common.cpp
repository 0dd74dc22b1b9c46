// Shared lowering helpers.
#include "lowering/from_aten/common.h"

#include <ATen/native/TypeProperties.h>

namespace torch_tpu::lowering {

at::ScalarType result_type(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) return at::result_type(a.toTensor(), b.toTensor());
  if (a.isTensor()) return at::result_type(a.toTensor(), b.toScalar());
  if (b.isTensor()) return at::result_type(a.toScalar(), b.toTensor());
  return at::result_type(a.toScalar(), b.toScalar());
}

at::ScalarType result_type(const c10::IValue& a, const c10::IValue& b, const c10::IValue& c) {
  at::native::ResultTypeState st{};
  for (const c10::IValue* v : {&a, &b, &c}) {
    if (v->isTensor()) st = at::native::update_result_type_state(v->toTensor(), st);
    else if (v->isScalar()) st = at::native::update_result_type_state(v->toScalar(), st);
  }
  return at::native::result_type(st);
}

at::ScalarType float_type(at::ScalarType t) {
  return at::isIntegralType(t, /*includeBool=*/true) ? at::typeMetaToScalarType(at::get_default_dtype()) : t;
}

Value arg(Lower& L, const c10::IValue& v, DType dt) {
  if (v.isTensor()) return L.in(v.toTensor(), dt);
  return L.scalar(v.toScalar(), dt);
}

Value operand(Lower& L, const c10::IValue& v, DType dt) { return L.scalar_arg(v, dt); }

ir::Shape broadcast_shapes(const char* op, const ir::Shape& a, const ir::Shape& b) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  ir::Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TORCH_CHECK(x == y || x == 1 || y == 1, "[", op, "] shapes cannot be broadcast; got ",
                ir::shape_str(a), " and ", ir::shape_str(b));
    r[i] = x == 1 ? y : x;
  }
  return r;
}

void broadcast_all(Lower& L, std::vector<Value*> vs) {
  ir::Shape s = L.g.shape(*vs[0]);
  for (Value* v : vs) s = broadcast_shapes(L.op(), s, L.g.shape(*v));
  for (Value* v : vs) *v = L.bcast(*v, s);
}

Value where(Lower& L, Value pred, Value t, Value f) {
  broadcast_all(L, {&pred, &t, &f});
  return L.g.select(pred, t, f);
}

Value any_true(Lower& L, Value pred) {
  std::vector<int64_t> all(L.g.shape(pred).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return all.empty() ? pred : L.g.reduce(pred, ir::Reducer::Or, all);
}

}  // namespace torch_tpu::lowering
