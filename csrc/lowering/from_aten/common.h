// Small helpers shared by the op families: argument access, ATen type promotion and
// broadcasting expressed on IR values.
#pragma once
#include "lowering/from_aten/lower.h"

namespace torch_tpu::lowering {

using ir::OpCode;

// True for a defined tensor (optional tensors may arrive as None or as undefined tensors).
inline bool has_tensor(const c10::IValue& v) { return v.isTensor() && v.toTensor().defined(); }
// An optional tensor argument; undefined when absent.
inline at::Tensor opt_tensor(const c10::IValue& v) { return has_tensor(v) ? v.toTensor() : at::Tensor(); }
// ATen's result_type for two Tensor-or-Scalar arguments.
at::ScalarType result_type(const c10::IValue& a, const c10::IValue& b);
at::ScalarType result_type(const c10::IValue& a, const c10::IValue& b, const c10::IValue& c);
// Promotes integral/bool to the default float dtype (true division, exp, ...).
at::ScalarType float_type(at::ScalarType t);
// A Tensor-or-Scalar argument as an IR value of dtype dt.
Value arg(Lower& L, const c10::IValue& v, DType dt);
// arg() for a lowering whose graph is the same for every value of the Scalar (or 0-dim CPU
// tensor) `v`: the fast path then reuses one entry for all values (Lower::scalar_arg). `v`
// must be the element of the op's args.
Value operand(Lower& L, const c10::IValue& v, DType dt);
// Broadcast shape of IR shapes (numpy rules); error names the op.
ir::Shape broadcast_shapes(const char* op, const ir::Shape& a, const ir::Shape& b);
// Broadcasts all values to their common shape in place.
void broadcast_all(Lower& L, std::vector<Value*> vs);
// Elementwise helpers on IR values of one dtype.
inline Value bin(Lower& L, OpCode op, Value x, Value y) {
  ir::Shape s = broadcast_shapes(L.op(), L.g.shape(x), L.g.shape(y));
  return L.g.binary(op, L.bcast(x, s), L.bcast(y, s));
}
// True when any element of the bool value `pred` is true (0-d; `pred` itself when it is 0-d).
Value any_true(Lower& L, Value pred);
inline Value scal(Lower& L, double v, Value like) { return L.cst(v, L.g.dtype(like)); }
inline Value mulc(Lower& L, Value x, double c) { return bin(L, OpCode::Mul, x, scal(L, c, x)); }
inline Value addc(Lower& L, Value x, double c) { return bin(L, OpCode::Add, x, scal(L, c, x)); }
inline Value cmp(Lower& L, ir::Cmp d, Value x, Value y) {
  ir::Shape s = broadcast_shapes(L.op(), L.g.shape(x), L.g.shape(y));
  return L.g.compare(d, L.bcast(x, s), L.bcast(y, s));
}
Value where(Lower& L, Value pred, Value t, Value f);
inline std::vector<Value> one(Value v) { return {v}; }

}  // namespace torch_tpu::lowering
