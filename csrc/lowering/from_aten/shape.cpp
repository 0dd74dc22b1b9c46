// Shape-building and masking ops: cat (stack/split/chunk reach it or are views), flip,
// triu/tril, masked_fill, and the small predicates the attention and loss decompositions
// use (isneginf/isposinf, logical_not, bitwise_not), roll and replication padding's backward.
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
  if (a[2].isTensor())
    TORCH_CHECK(a[2].toTensor().dim() == 0, "[", L.op(), "] only supports a 0-dimensional value tensor, but got tensor with ",
                a[2].toTensor().dim(), " dimension(s).");
  Value v = L.scalar_arg(a[2], dt);
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

// roll(self, shifts, dims): per dim, the last `shift` elements move to the front (slice +
// concatenate); without dims, the flattened tensor rolls by shifts[0].
std::vector<Value> roll(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  std::vector<int64_t> shifts = a[1].toIntVector(), dims = a[2].toIntVector();
  TORCH_CHECK(!shifts.empty(), "[", L.op(), "] `shifts` required");
  Value x = L.in(self);
  bool flat = dims.empty();
  if (flat) {
    TORCH_CHECK(shifts.size() == 1, "[", L.op(), "] shifts and dimensions must align. shifts: ", shifts.size(), ", dims:0");
    x = L.g.reshape(x, {self.numel()});
    dims = {0};
  }
  TORCH_CHECK(shifts.size() == dims.size(), "[", L.op(), "] shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  int64_t rank = flat ? 1 : self.dim();
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = wrap_dim(dims[k], rank);
    ir::Shape s = L.g.shape(x);
    int64_t n = s[d];
    if (n == 0) continue;
    int64_t sh = ((shifts[k] % n) + n) % n;
    if (sh == 0) continue;
    std::vector<int64_t> lo(s.size(), 0), stride(s.size(), 1);
    ir::Shape mid = s, hi_start(s.size(), 0);
    mid[d] = n - sh;
    hi_start[d] = n - sh;
    x = L.g.concat({L.g.slice(x, hi_start, s, stride), L.g.slice(x, lo, mid, stride)}, d);
  }
  return one(flat ? L.g.reshape(x, shape_of(self)) : x);
}

// replication_pad{1,2,3}d_backward(grad_output, self, padding): output j of a padded dim
// read input clamp(j - pad_before, 0, n - 1), so the gradient scatter-adds back along
// each padded dim in turn (negative padding crops, and works the same way).
std::vector<Value> replication_pad_backward(Lower& L, Args a, int nd) {
  const at::Tensor &go = a[0].toTensor(), &self = a[1].toTensor();
  std::vector<int64_t> pad = a[2].toIntVector();
  TORCH_CHECK(static_cast<int>(pad.size()) == 2 * nd, "[", L.op(), "] padding size is expected to be ", 2 * nd, "; got ", pad.size());
  TORCH_CHECK(go.dim() == self.dim() && self.dim() >= nd, "[", L.op(), "] grad_output rank ", go.dim(), " doesn't match input rank ",
              self.dim());
  int64_t r = self.dim();
  for (int64_t k = 0; k < nd; ++k) {
    int64_t d = r - 1 - k, want = self.size(d) + pad[2 * k] + pad[2 * k + 1];
    TORCH_CHECK(go.size(d) == want, "[", L.op(), "] grad_output size ", go.size(d), " in dim ", d, " doesn't match the padded input size ", want);
  }
  DType dt = to_ir(go.scalar_type(), L.op()), ct = opmath(dt);
  Value g = L.in(go, ct);
  for (int64_t k = 0; k < nd; ++k) {
    int64_t d = r - 1 - k, n = self.size(d);
    ir::Shape gs = L.g.shape(g), rs = gs;
    rs[d] = n;
    if (ir::numel(rs) == 0 || ir::numel(gs) == 0) {
      g = L.g.constant(0, ct, rs);
      continue;
    }
    Value j = L.g.iota(DType::I64, {gs[d]}, 0);
    j = L.g.binary(OpCode::Sub, j, L.cst_like(double(pad[2 * k]), j));
    j = L.g.op(OpCode::Clamp, {L.cst(0, DType::I64), j, L.cst(double(n - 1), DType::I64)});
    ir::Attrs at;
    at.dims = {d};
    g = L.g.op(OpCode::ScatterAdd, {L.g.constant(0, ct, rs), L.g.broadcast(j, gs, {d}), g}, at);
  }
  return one(L.g.convert(g, dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto tril = [](Lower& L, Args a) { return tri(L, a, true); };
  auto triu = [](Lower& L, Args a) { return tri(L, a, false); };
  auto neginf = [](Lower& L, Args a) { return isinf_side(L, a, -std::numeric_limits<double>::infinity()); };
  auto posinf = [](Lower& L, Args a) { return isinf_side(L, a, std::numeric_limits<double>::infinity()); };
  auto rpad1 = [](Lower& L, Args a) { return replication_pad_backward(L, a, 1); };
  auto rpad2 = [](Lower& L, Args a) { return replication_pad_backward(L, a, 2); };
  auto rpad3 = [](Lower& L, Args a) { return replication_pad_backward(L, a, 3); };
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
      {"roll", roll}, {"roll.out", roll},
      {"replication_pad1d_backward", rpad1}, {"replication_pad1d_backward.grad_input", rpad1},
      {"replication_pad2d_backward", rpad2}, {"replication_pad2d_backward.grad_input", rpad2},
      {"replication_pad3d_backward", rpad3}, {"replication_pad3d_backward.grad_input", rpad3},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
