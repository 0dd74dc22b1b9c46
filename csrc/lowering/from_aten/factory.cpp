// Creation ops that compute values: arange (zeros/ones/full/*_like come through
// empty + fill_/zero_, which are lowered in unary.cpp).
#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

// arange.start_out(start, end, step, *, out)
std::vector<Value> arange(Lower& L, Args a) {
  at::Scalar start = a[0].toScalar(), end = a[1].toScalar(), step = a[2].toScalar();
  const at::Tensor& out = a[3].toTensor();
  double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  TORCH_CHECK(st != 0, "[", L.op(), "] step must be nonzero");
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "[", L.op(), "] unsupported range: ", s, " -> ", e);
  TORCH_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "[", L.op(), "] upper bound and larger bound inconsistent with step sign");
  int64_t n;
  if (at::isIntegralType(out.scalar_type(), false) && start.isIntegral(false) && end.isIntegral(false) && step.isIntegral(false)) {
    int64_t is = start.toLong(), ie = end.toLong(), ist = step.toLong();
    n = ist > 0 ? (ie - is + ist - 1) / ist : (is - ie + (-ist) - 1) / (-ist);
  } else {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  DType dt = to_ir(out.scalar_type(), L.op());
  DType ct = ir::is_float(dt) ? opmath(dt) : DType::I64;
  if (dt == DType::F32 || dt == DType::F64 || !ir::is_float(dt)) ct = ir::is_float(dt) ? DType::F64 : DType::I64;
  Value i = L.g.iota(ct, {n}, 0);
  Value r = bin(L, OpCode::Add, bin(L, OpCode::Mul, i, L.scalar(step, ct)), L.scalar(start, ct));
  return one(L.g.convert(r, dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {{"arange.start_out", arange}});
}

}  // namespace
}  // namespace torch_tpu::lowering
