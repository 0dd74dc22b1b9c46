// Shape-building and masking ops: cat (stack/split/chunk reach it or are views), flip,
// triu/tril, masked_fill, and the small predicates the attention and loss decompositions
// use (isneginf/isposinf, logical_not, bitwise_not).
#include <limits>

#include <ATen/native/TypeProperties.h>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

// cat(tensors, dim): ATen's rules, including the legacy skip of 1-D empty tensors.
std::vector<Value> cat(Lower& L, Args a) {
  std::vector<at::Tensor> ts = a[0].toTensorVector();
  TORCH_CHECK(!ts.empty(), "[", L.op(), "] expected a non-empty list of Tensors");
  at::native::ResultTypeState st{};
  for (const auto& t : ts) st = at::native::update_result_type_state(t, st);
  DType dt = to_ir(at::native::result_type(st), L.op());
  const at::Tensor* ref = nullptr;
  for (const auto& t : ts)
    if (!(t.dim() == 1 && t.numel() == 0)) { ref = &t; break; }
  if (!ref) return one(L.g.constant(0, dt, {0}));
  TORCH_CHECK(ref->dim() > 0, "[", L.op(), "] zero-dimensional tensor (at position 0) cannot be concatenated");
  int64_t rank = ref->dim(), d = wrap_dim(a[1].toInt(), rank);
  std::vector<Value> xs;
  for (size_t i = 0; i < ts.size(); ++i) {
    const at::Tensor& t = ts[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    TORCH_CHECK(t.dim() == rank, "[", L.op(), "] Tensors must have same number of dimensions: got ", rank, " and ", t.dim());
    for (int64_t k = 0; k < rank; ++k)
      TORCH_CHECK(k == d || t.size(k) == ref->size(k), "[", L.op(), "] Sizes of tensors must match except in dimension ", d,
                  ". Expected size ", ref->size(k), " but got size ", t.size(k), " for tensor number ", i, " in the list.");
    xs.push_back(L.in(t, dt));
  }
  return one(L.g.concat(xs, d));
}

std::vector<Value> flip(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  auto dims = a[1].toIntVector();
  std::vector<int64_t> ds;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, std::max<int64_t>(self.dim(), 1));
    TORCH_CHECK(std::find(ds.begin(), ds.end(), w) == ds.end(), "[", L.op(), "] dim ", w, " appears multiple times in the list of dims");
    ds.push_back(w);
  }
  Value x = L.in(self);
  if (ds.empty() || self.dim() == 0) return one(x);
  ir::Attrs at;
  at.dims = ds;
  return one(L.g.op(OpCode::Reverse, {x}, at));
}

// tril keeps col - row <= k; triu keeps col - row >= k (over the last two dims).
std::vector<Value> tri(Lower& L, Args a, bool lower) {
  const at::Tensor& self = a[0].toTensor();
  TORCH_CHECK(self.dim() >= 2, "[", L.op(), "] input tensor must have at least 2 dimensions");
  int64_t k = a[1].toInt(), r = self.dim();
  Value x = L.in(self);
  ir::Shape s = shape_of(self);
  ir::Shape rc = {s[r - 2], s[r - 1]};
  Value diff = L.g.binary(OpCode::Sub, L.g.iota(DType::I64, rc, 1), L.g.iota(DType::I64, rc, 0));
  Value keep = L.g.compare(lower ? Cmp::LE : Cmp::GE, diff, L.g.constant(double(k), DType::I64, rc));
  return one(where(L, keep, x, L.cst(0, L.g.dtype(x))));
}

// masked_fill(self, mask, value): value is a Scalar or a 0-dim tensor (tpu or cpu).
std::vector<Value> masked_fill(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &mask = a[1].toTensor();
  TORCH_CHECK(mask.scalar_type() == at::kBool, "[", L.op(), "] masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  DType dt = to_ir(self.scalar_type(), L.op());
  Value v;
  if (a[2].isTensor()) {
    const at::Tensor& vt = a[2].toTensor();
    TORCH_CHECK(vt.dim() == 0, "[", L.op(), "] only supports a 0-dimensional value tensor, but got tensor with ",
                vt.dim(), " dimension(s).");
    v = L.in(vt, dt);
  } else {
    v = L.scalar(a[2].toScalar(), dt);
  }
  return one(where(L, L.in(mask), v, L.in(self)));
}

std::vector<Value> isinf_side(Lower& L, Args a, double inf) {
  const at::Tensor& self = a[0].toTensor();
  DType dt = to_ir(self.scalar_type(), L.op());
  if (!ir::is_float(dt)) return one(L.g.constant(0, DType::Bool, shape_of(self)));
  Value x = L.in(self);
  return one(L.g.compare(Cmp::EQ, x, L.cst_like(inf, x)));
}

std::vector<Value> logical_not(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  Value x = L.in(self);
  if (self.scalar_type() == at::kBool) return one(L.g.unary(OpCode::Not, x));
  return one(L.g.compare(Cmp::EQ, x, L.cst_like(0, x)));
}

std::vector<Value> bitwise_not(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  TORCH_CHECK(!at::isFloatingType(self.scalar_type()), "[", L.op(), "] bitwise_not is only supported for integer and boolean tensors; got ",
              self.scalar_type());
  return one(L.g.unary(OpCode::Not, L.in(self)));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto tril = [](Lower& L, Args a) { return tri(L, a, true); };
  auto triu = [](Lower& L, Args a) { return tri(L, a, false); };
  auto neginf = [](Lower& L, Args a) { return isinf_side(L, a, -std::numeric_limits<double>::infinity()); };
  auto posinf = [](Lower& L, Args a) { return isinf_side(L, a, std::numeric_limits<double>::infinity()); };
  register_ops(m, {
      {"cat", cat}, {"cat.out", cat},
      {"flip", flip}, {"flip.out", flip},
      {"tril", tril}, {"tril_", tril}, {"tril.out", tril},
      {"triu", triu}, {"triu_", triu}, {"triu.out", triu},
      {"masked_fill.Scalar", masked_fill}, {"masked_fill_.Scalar", masked_fill}, {"masked_fill.Scalar_out", masked_fill},
      {"masked_fill.Tensor", masked_fill}, {"masked_fill_.Tensor", masked_fill}, {"masked_fill.Tensor_out", masked_fill},
      {"isneginf", neginf}, {"isneginf.out", neginf}, {"isposinf", posinf}, {"isposinf.out", posinf},
      {"logical_not", logical_not}, {"logical_not_", logical_not}, {"logical_not.out", logical_not},
      {"bitwise_not", bitwise_not}, {"bitwise_not_", bitwise_not}, {"bitwise_not.out", bitwise_not},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
