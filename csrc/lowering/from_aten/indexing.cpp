// Indexing along axes: index_select, gather, scatter/scatter_add/scatter_reduce, index_add,
// index_reduce, put, advanced indexing (index.Tensor, index_put_/_index_put_impl_ with
// accumulate), embedding's dense backward, nonzero / nonzero_static, masked_scatter_, histc and
// bincount. All lower to the IR's Gather /
// Scatter / ScatterAdd / ScatterReduce.
//
// Range checks are device-side (Lower::check): the graph also computes "any index out of
// range" and a failed check raises at the next sync point (at once in debug mode); the host
// never waits for index data. Meanwhile Gather clamps and Scatter skips the bad indices, so
// no memory outside the tensors is touched. Boolean masks are the exception: their result
// shape depends on the data, so they go through nonzero, which synchronizes the stream.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/IndexingUtils.h>

#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;
using ir::Reducer;

ir::Attrs axis(int64_t a) {
  ir::Attrs at;
  at.dims = {a};
  return at;
}
Value gather(Lower& L, Value x, Value idx, int64_t a) { return L.g.op(OpCode::Gather, {x, idx}, axis(a)); }
Value scatter(Lower& L, Value x, Value idx, Value upd, int64_t a, bool add) {
  // 16-bit floats accumulate in f32 (as PyTorch CPU's index_put/scatter_add do per element).
  DType dt = L.g.dtype(x);
  if (add && (dt == DType::BF16 || dt == DType::F16)) {
    Value r = L.g.op(OpCode::ScatterAdd, {L.g.convert(x, DType::F32), idx, L.g.convert(upd, DType::F32)}, axis(a));
    return L.g.convert(r, dt);
  }
  return L.g.op(add ? OpCode::ScatterAdd : OpCode::Scatter, {x, idx, upd}, axis(a));
}

Value any_all(Lower& L, Value pred) { return any_true(L, pred); }

// An integer index tensor as i64; registers the range check [lo, n) (lo = -n wraps), raising
// IndexError as CPU does (gather/scatter raise RuntimeError there: index_error = false).
Value index_in(Lower& L, const at::Tensor& t, int64_t n, bool allow_negative, const std::string& msg,
               bool index_error = true) {
  TORCH_CHECK(at::isIntegralType(t.scalar_type(), false), "[", L.op(), "] expected an integer index tensor (Long or Int); got ",
              t.scalar_type());
  Value i = L.in(t, DType::I64);
  Value lo = L.cst_like(allow_negative ? -double(n) : 0.0, i), hi = L.cst_like(double(n), i);
  Value bad = any_all(L, L.g.binary(OpCode::Or, L.g.compare(Cmp::LT, i, lo), L.g.compare(Cmp::GE, i, hi)));
  if (index_error) L.check_index(bad, msg);
  else L.check(bad, msg);
  if (allow_negative)
    i = L.g.select(L.g.compare(Cmp::LT, i, L.cst_like(0, i)), L.g.binary(OpCode::Add, i, hi), i);
  return i;
}

std::string oob(Lower& L, int64_t dim, int64_t size) {
  return std::string("[") + L.op() + "] index out of bounds for dimension " + std::to_string(dim) + " with size " +
         std::to_string(size);
}

// 0-dim tensors index like 1-element vectors.
ir::Shape shape1(const at::Tensor& t) { return t.dim() ? shape_of(t) : ir::Shape{1}; }

// index_select(self, dim, index)
std::vector<Value> index_select(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor();
  TORCH_CHECK(index.dim() <= 1, "[", L.op(), "] Index is supposed to be a vector; got ", index.dim(), "-D");
  ir::Shape s = shape1(self);
  int64_t d = wrap_dim(a[1].toInt(), static_cast<int64_t>(s.size())), k = index.numel();
  TORCH_CHECK(s[d] > 0 || k == 0, "[", L.op(), "] index out of range in self (dimension ", d, " has size 0)");
  Value i = L.g.reshape(index_in(L, index, s[d], false, std::string("[") + L.op() + "] index out of range in self"), {k});
  ir::Shape rs = s;
  rs[d] = k;
  Value r = gather(L, L.g.reshape(L.in(self), s), L.g.broadcast(i, rs, {d}), d);
  if (self.dim() == 0) return one(L.g.reshape(r, {}));
  return one(r);
}

// index_add(self, dim, index, source, alpha)
std::vector<Value> index_add(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor(), &src = a[3].toTensor();
  ir::Shape s = shape1(self);
  int64_t d = wrap_dim(a[1].toInt(), static_cast<int64_t>(s.size())), k = index.numel();
  TORCH_CHECK(index.dim() <= 1, "[", L.op(), "] Index is supposed to be a vector; got ", index.dim(), "-D");
  TORCH_CHECK(src.scalar_type() == self.scalar_type(), "[", L.op(), "] self (", self.scalar_type(), ") and source (",
              src.scalar_type(), ") must have the same scalar type");
  ir::Shape us = s;
  us[d] = k;
  TORCH_CHECK(shape1(src) == us || (src.numel() == ir::numel(us) && src.dim() <= 1 && s.size() == 1), "[", L.op(),
              "] source shape ", src.sizes(), " doesn't match self ", self.sizes(), " with index of length ", k, " along dim ", d);
  DType dt = to_ir(self.scalar_type(), L.op());
  Value i = L.g.reshape(index_in(L, index, s[d], false, oob(L, d, s[d])), {k});
  Value u = L.g.reshape(L.in(src, dt), us);
  if (a.size() > 4 && !a[4].toScalar().equal(1)) u = bin(L, OpCode::Mul, u, L.scalar(a[4].toScalar(), dt));
  Value r = scatter(L, L.g.reshape(L.in(self), s), L.g.broadcast(i, us, {d}), u, d, true);
  return one(L.g.reshape(r, shape_of(self)));
}

// gather / scatter take int64 or int32 indices (as PyTorch CPU, which skips the check for
// an empty index).
void check_index_dtype(Lower& L, const at::Tensor& index) {
  TORCH_CHECK(index.numel() == 0 || index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, "[", L.op(),
              "] Expected dtype int32/int64 for index; got ", index.scalar_type());
}

void check_same_rank(Lower& L, const at::Tensor& self, const at::Tensor& index, int64_t d, const at::Tensor* src) {
  TORCH_CHECK(std::max<int64_t>(index.dim(), 1) == std::max<int64_t>(self.dim(), 1), "[", L.op(),
              "] Index tensor must have the same number of dimensions as input tensor; got ", index.dim(), " and ", self.dim());
  if (src)
    TORCH_CHECK(std::max<int64_t>(src->dim(), 1) == std::max<int64_t>(index.dim(), 1), "[", L.op(),
                "] Index tensor must have the same number of dimensions as src tensor; got ", index.dim(), " and ", src->dim());
  ir::Shape s = shape1(self), is = shape1(index);
  for (size_t k = 0; k < s.size(); ++k) {
    TORCH_CHECK(static_cast<int64_t>(k) == d || is[k] <= s[k], "[", L.op(), "] Size does not match at dimension ", k,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(), " apart from dimension ", d);
    if (src) TORCH_CHECK(is[k] <= shape1(*src)[k], "[", L.op(), "] Expected index ", index.sizes(), " to be no larger than src ",
                         src->sizes());
  }
}

// gather(self, dim, index, sparse_grad)
std::vector<Value> gather_op(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor();
  ir::Shape s = shape1(self);
  int64_t d = wrap_dim(a[1].toInt(), static_cast<int64_t>(s.size()));
  check_index_dtype(L, index);
  // An empty index skips the shape checks (as CPU): the result is empty with its shape.
  if (index.numel() == 0) return one(L.g.constant(0, to_ir(self.scalar_type(), L.op()), shape_of(index)));
  check_same_rank(L, self, index, d, nullptr);
  TORCH_CHECK(s[d] > 0, "[", L.op(), "] index out of bounds for dimension ", d, " with size 0");
  Value i = L.g.reshape(index_in(L, index, s[d], false, oob(L, d, s[d]), /*index_error=*/false), shape1(index));
  Value r = gather(L, L.g.reshape(L.in(self), s), i, d);
  return one(L.g.reshape(r, shape_of(index)));
}

// scatter(self, dim, index, src-or-value) and scatter_add(self, dim, index, src)
// The operands of scatter / scatter_reduce (self, dim, index, src tensor or scalar at a[3]):
// checks src's dtype and the ranks; false (nothing to scatter: self as is) for an empty index.
struct ScatterOperands {
  Value x, i, u;
};
bool scatter_operands(Lower& L, const Args& a, const ir::Shape& s, const ir::Shape& is, int64_t d, DType dt,
                      ScatterOperands* out) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor();
  const at::Tensor* src = a[3].isTensor() ? &a[3].toTensor() : nullptr;
  if (src) TORCH_CHECK(src->scalar_type() == self.scalar_type(), "[", L.op(), "] Expected self.dtype to be equal to src.dtype; got ",
                       self.scalar_type(), " and ", src->scalar_type());
  out->x = L.g.reshape(L.in(self), s);
  if (index.numel() == 0) return false;  // no shape checks, as CPU
  check_same_rank(L, self, index, d, src);
  out->i = L.g.reshape(index_in(L, index, s[d], false, oob(L, d, s[d]), /*index_error=*/false), is);
  if (src) {
    out->u = L.g.reshape(L.in(*src), shape1(*src));
    if (shape1(*src) != is)
      out->u = L.g.slice(out->u, std::vector<int64_t>(is.size(), 0), is, std::vector<int64_t>(is.size(), 1));
  } else {
    out->u = L.bcast(L.scalar(a[3].toScalar(), dt), is);
  }
  return true;
}

std::vector<Value> scatter_op(Lower& L, Args a, bool add) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor();
  ir::Shape s = shape1(self), is = shape1(index);
  int64_t d = wrap_dim(a[1].toInt(), static_cast<int64_t>(s.size()));
  check_index_dtype(L, index);
  DType dt = to_ir(self.scalar_type(), L.op());
  ScatterOperands o;
  if (!scatter_operands(L, a, s, is, d, dt, &o)) return one(L.g.reshape(o.x, shape_of(self)));
  Value x = o.x, i = o.i, u = o.u;
  return one(L.g.reshape(scatter(L, x, i, u, d, add), shape_of(self)));
}

// --- scatter / index / put reductions ---------------------------------------------------
// scatter_reduce / scatter(reduce=) / index_reduce lower to ScatterAdd / ScatterReduce along
// one axis; mean = sum / count (floor division for integers), as PyTorch CPU. Without
// include_self, the targets that receive an update start from the reduction's identity.
enum class Red { Sum, Prod, Mean, Max, Min };

// The reduce argument of scatter(reduce=) (legacy: add, multiply), scatter_reduce (sum, prod,
// mean, amax, amin) or index_reduce (prod, mean, amax, amin).
enum class RedArg { kLegacy, kScatterReduce, kIndexReduce };
Red parse_red(Lower& L, const std::string& r, RedArg kind) {
  if (kind == RedArg::kLegacy) {
    TORCH_CHECK(r == "add" || r == "multiply", "[", L.op(), "] reduce argument must be either add or multiply; got ", r);
    return r == "add" ? Red::Sum : Red::Prod;
  }
  if (r == "sum" && kind == RedArg::kScatterReduce) return Red::Sum;
  if (r == "prod") return Red::Prod;
  if (r == "mean") return Red::Mean;
  if (r == "amax") return Red::Max;
  if (r == "amin") return Red::Min;
  TORCH_CHECK(false, "[", L.op(), "] reduce argument must be one of ",
              kind == RedArg::kIndexReduce ? "prod, mean, amax or amin" : "sum, prod, mean, amax or amin", "; got ", r);
}

Value int_constant(Lower& L, int64_t v, DType dt, const ir::Shape& s) {
  ir::Attrs at;
  at.ivalue = v;
  return L.g.op(OpCode::Constant, {}, at, s, dt);
}

// The reduction's identity of dtype dt and shape s (mean starts from 0 like sum).
Value identity(Lower& L, Red r, DType dt, const ir::Shape& s) {
  if (r == Red::Sum || r == Red::Mean) return L.g.constant(0, dt, s);
  if (r == Red::Prod) return L.g.constant(1, dt, s);
  bool mx = r == Red::Max;
  if (ir::is_float(dt)) return L.g.constant(mx ? -INFINITY : INFINITY, dt, s);
  if (ir::is_bool(dt)) return L.g.constant(mx ? 0 : 1, dt, s);
  at::ScalarType st = to_aten(dt);
  int64_t lo = 0, hi = 0;
  AT_DISPATCH_INTEGRAL_TYPES(st, "identity", [&] {
    lo = static_cast<int64_t>(std::numeric_limits<scalar_t>::lowest());
    hi = static_cast<int64_t>(std::numeric_limits<scalar_t>::max());
  });
  return int_constant(L, mx ? lo : hi, dt, s);
}

// Floor division of integers by a positive divisor.
Value floor_div(Lower& L, Value num, Value den) {
  Value q = L.g.binary(OpCode::Div, num, den);
  Value inexact = L.g.compare(Cmp::NE, L.g.binary(OpCode::Mul, q, den), num);
  Value neg = L.g.compare(Cmp::LT, num, L.cst_like(0, num));
  return L.g.select(L.g.binary(OpCode::And, inexact, neg), L.g.binary(OpCode::Sub, q, L.cst_like(1, q)), q);
}

// x with u reduced in at idx along axis a (idx and u of one shape, valid indices).
Value scatter_reduce_core(Lower& L, Value x, Value idx, Value u, int64_t a, Red r, bool include_self) {
  DType dt = L.g.dtype(x);
  ir::Shape xs = L.g.shape(x), is = L.g.shape(idx);
  if (!include_self) {
    Value hit = L.g.op(OpCode::Scatter, {L.g.constant(0, DType::Bool, xs), idx, L.g.constant(1, DType::Bool, is)}, axis(a));
    x = L.g.select(hit, identity(L, r, dt, xs), x);
  }
  if (r == Red::Sum) return scatter(L, x, idx, u, a, true);
  if (r != Red::Mean) {
    ir::Attrs at = axis(a);
    at.reducer = r == Red::Prod ? Reducer::Prod : (r == Red::Max ? Reducer::Max : Reducer::Min);
    return L.g.op(OpCode::ScatterReduce, {x, idx, u}, at);
  }
  Value sum = scatter(L, x, idx, u, a, true);
  Value cnt = L.g.op(OpCode::ScatterAdd, {L.g.constant(include_self ? 1 : 0, DType::I64, xs), idx, L.g.constant(1, DType::I64, is)}, axis(a));
  cnt = L.g.binary(OpCode::Max, cnt, L.g.constant(1, DType::I64, xs));
  if (ir::is_float(dt)) {
    DType ct = opmath(dt);
    return L.g.convert(L.g.binary(OpCode::Div, L.g.convert(sum, ct), L.g.convert(cnt, ct)), dt);
  }
  TORCH_CHECK(!ir::is_bool(dt), "[", L.op(), "] mean reduction is not supported for bool tensors");
  return L.g.convert(floor_div(L, L.g.convert(sum, DType::I64), cnt), dt);
}

// scatter_reduce.two(self, dim, index, src, reduce, *, include_self) and
// scatter.reduce / scatter.value_reduce(self, dim, index, src-or-value, *, reduce)
std::vector<Value> scatter_reduce_op(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor();
  ir::Shape s = shape1(self), is = shape1(index);
  int64_t d = wrap_dim(a[1].toInt(), static_cast<int64_t>(s.size()));
  check_index_dtype(L, index);
  bool two = a.size() > 5 && a[5].isBool();  // scatter_reduce.two's include_self
  Red r = parse_red(L, a[4].toStringRef(), two ? RedArg::kScatterReduce : RedArg::kLegacy);
  bool include_self = two ? a[5].toBool() : true;
  DType dt = to_ir(self.scalar_type(), L.op());
  ScatterOperands o;
  if (!scatter_operands(L, a, s, is, d, dt, &o)) return one(L.g.reshape(o.x, shape_of(self)));
  Value x = o.x, i = o.i, u = o.u;
  return one(L.g.reshape(scatter_reduce_core(L, x, i, u, d, r, include_self), shape_of(self)));
}

// index_reduce(self, dim, index, source, reduce, *, include_self)
std::vector<Value> index_reduce(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &index = a[2].toTensor(), &src = a[3].toTensor();
  Red r = parse_red(L, a[4].toStringRef(), RedArg::kIndexReduce);
  bool include_self = a[5].toBool();
  ir::Shape s = shape1(self);
  int64_t d = wrap_dim(a[1].toInt(), static_cast<int64_t>(s.size())), k = index.numel();
  TORCH_CHECK(index.dim() <= 1, "[", L.op(), "] Index is supposed to be a vector; got ", index.dim(), "-D");
  TORCH_CHECK(src.scalar_type() == self.scalar_type(), "[", L.op(), "] self (", self.scalar_type(), ") and source (",
              src.scalar_type(), ") must have the same scalar type");
  ir::Shape us = s;
  us[d] = k;
  TORCH_CHECK(shape1(src) == us, "[", L.op(), "] source shape ", src.sizes(), " doesn't match self ", self.sizes(),
              " with index of length ", k, " along dim ", d);
  Value x = L.g.reshape(L.in(self), s);
  if (k == 0) return one(L.g.reshape(x, shape_of(self)));
  Value i = L.g.reshape(index_in(L, index, s[d], false, oob(L, d, s[d])), {k});
  Value u = L.g.reshape(L.in(src), us);
  return one(L.g.reshape(scatter_reduce_core(L, x, L.g.broadcast(i, us, {d}), u, d, r, include_self), shape_of(self)));
}

// put(self, index, source, accumulate): self.flatten()[index] = (or +=) source.flatten().
std::vector<Value> put(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &index = a[1].toTensor(), &src = a[2].toTensor();
  bool accumulate = a[3].toBool();
  TORCH_CHECK(index.scalar_type() == at::kLong, "[", L.op(), "] put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(src.scalar_type() == self.scalar_type(), "[", L.op(), "] self and source expected to have the same dtype; got ",
              self.scalar_type(), " and ", src.scalar_type());
  int64_t n = self.numel(), k = index.numel();
  TORCH_CHECK(src.numel() == k, "[", L.op(), "] put_(): Expected source and index to have the same number of elements, but got source.numel() = ",
              src.numel(), ", index.numel() = ", k);
  TORCH_CHECK(n > 0 || k == 0, "[", L.op(), "] put_(): Tried to put elements into an empty tensor");
  Value x = L.g.reshape(L.in(self), {n});
  if (k == 0) return one(L.g.reshape(x, shape_of(self)));
  Value i = L.g.reshape(index_in(L, index, n, true, std::string("[") + L.op() + "] out of range: tried to access an index outside a tensor of " +
                                                         std::to_string(n) + " elements"), {k});
  Value r = scatter(L, x, i, L.g.reshape(L.in(src), {k}), 0, accumulate);
  return one(L.g.reshape(r, shape_of(self)));
}

// --- advanced indexing ------------------------------------------------------------------
// self[indices]: the indexed dims P are moved to the front and flattened into one axis,
// their (broadcast) index tensors combine into one linear index, and one Gather / Scatter
// along axis 0 does the work. Result layout follows PyTorch: the broadcast index shape B
// replaces the indexed dims in place when they are adjacent, else it goes first.
struct AdvIndex {
  std::vector<int64_t> P, rest;  // indexed dims; the others, in order
  ir::Shape B, S;                // broadcast index shape; self shape
  Value lin;                     // [numel(B)] linear index into the flattened P dims
  bool inplace_dims = false;     // adjacent P starting after dim 0: B goes at P[0]
  ir::Shape gather_shape() const {  // B ++ S[rest]
    ir::Shape r = B;
    for (int64_t d : rest) r.push_back(S[d]);
    return r;
  }
  // Permutation from the gather layout (B ++ rest) to the result layout.
  std::vector<int64_t> to_result() const {
    int64_t nb = static_cast<int64_t>(B.size()), nr = static_cast<int64_t>(rest.size());
    std::vector<int64_t> perm;
    if (!inplace_dims) {
      for (int64_t i = 0; i < nb + nr; ++i) perm.push_back(i);
      return perm;
    }
    for (int64_t i = 0; i < P[0]; ++i) perm.push_back(nb + i);
    for (int64_t i = 0; i < nb; ++i) perm.push_back(i);
    for (int64_t i = P[0]; i < nr; ++i) perm.push_back(nb + i);
    return perm;
  }
};

std::vector<at::Tensor> expand_indices(Lower& L, const at::Tensor& self, const c10::IValue& v) {
  auto list = v.toOptionalTensorList();
  TORCH_CHECK(static_cast<int64_t>(list.size()) <= std::max<int64_t>(self.dim(), 1), "[", L.op(), "] too many indices for tensor of dimension ",
              self.dim(), " (got ", list.size(), ")");
  c10::List<std::optional<at::Tensor>> opt;
  bool has_mask = false;
  for (const auto& t : list) {
    std::optional<at::Tensor> o = t;
    if (o && !o->defined()) o = std::nullopt;
    // CPU indices index a tpu tensor as they index a CUDA one: copied to its device (a new
    // tensor, so the op is lowered again on each call: its values are only known here).
    if (o && o->device().type() == c10::DeviceType::CPU && self.is_privateuseone()) o = o->to(self.device());
    if (o && (o->scalar_type() == at::kBool || o->scalar_type() == at::kByte)) has_mask = true;
    if (o) TORCH_CHECK(o->scalar_type() == at::kLong || o->scalar_type() == at::kInt || o->scalar_type() == at::kBool ||
                           o->scalar_type() == at::kByte,
                       "[", L.op(), "] tensors used as indices must be long, int, byte or bool tensors; got ", o->scalar_type());
    opt.push_back(o);
  }
  // Masks become long indices through nonzero (a stream sync: the shape depends on data).
  if (has_mask) return at::native::expandTensors(self, opt);
  std::vector<at::Tensor> r;
  for (size_t k = 0; k < opt.size(); ++k) {
    std::optional<at::Tensor> o = opt.get(k);
    r.push_back(o ? *o : at::Tensor());
  }
  return r;
}

AdvIndex adv_index(Lower& L, const at::Tensor& self, const std::vector<at::Tensor>& idx) {
  AdvIndex ai;
  ai.S = shape_of(self);
  int64_t r = self.dim();
  std::vector<Value> iv;
  for (int64_t d = 0; d < static_cast<int64_t>(idx.size()); ++d) {
    if (!idx[d].defined()) continue;
    ai.P.push_back(d);
    iv.push_back(index_in(L, idx[d], ai.S[d], true,
                          std::string("[") + L.op() + "] index out of bounds for dimension " + std::to_string(d) +
                              " with size " + std::to_string(ai.S[d])));
  }
  for (int64_t d = 0; d < r; ++d)
    if (std::find(ai.P.begin(), ai.P.end(), d) == ai.P.end()) ai.rest.push_back(d);
  std::vector<Value*> ptrs;
  for (Value& v : iv) ptrs.push_back(&v);
  broadcast_all(L, ptrs);
  ai.B = L.g.shape(iv[0]);
  int64_t nb = ir::numel(ai.B);
  Value lin = L.g.reshape(iv.back(), {nb});
  int64_t stride = ai.S[ai.P.back()];
  for (int64_t j = static_cast<int64_t>(ai.P.size()) - 2; j >= 0; --j) {
    lin = L.g.binary(OpCode::Add, lin, L.g.binary(OpCode::Mul, L.g.reshape(iv[j], {nb}), L.g.constant(double(stride), DType::I64, {nb})));
    stride *= ai.S[ai.P[j]];
  }
  ai.lin = lin;
  bool adjacent = true;
  for (size_t j = 1; j < ai.P.size(); ++j) adjacent &= ai.P[j] == ai.P[j - 1] + 1;
  ai.inplace_dims = adjacent && ai.P[0] > 0;
  return ai;
}

// self permuted to P ++ rest and flattened to [prod S[P], S[rest]...].
Value flat_self(Lower& L, const AdvIndex& ai, Value x) {
  std::vector<int64_t> perm = ai.P;
  perm.insert(perm.end(), ai.rest.begin(), ai.rest.end());
  ir::Shape fs = {1};
  for (int64_t d : ai.P) fs[0] *= ai.S[d];
  for (int64_t d : ai.rest) fs.push_back(ai.S[d]);
  return L.g.reshape(L.g.transpose(x, perm), fs);
}

// The linear index broadcast to [numel(B), S[rest]...].
Value flat_index(Lower& L, const AdvIndex& ai) {
  ir::Shape fs = {ir::numel(ai.B)};
  for (int64_t d : ai.rest) fs.push_back(ai.S[d]);
  return L.g.broadcast(ai.lin, fs, {0});
}

std::vector<Value> index_tensor(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  std::vector<at::Tensor> idx = expand_indices(L, self, a[1]);
  bool any = false;
  for (const auto& t : idx) any |= t.defined();
  if (!any) return one(L.in(self));
  TORCH_CHECK(self.dim() > 0, "[", L.op(), "] invalid index of a 0-dim tensor");
  AdvIndex ai = adv_index(L, self, idx);
  ir::Shape gs = ai.gather_shape();
  if (ir::numel(gs) == 0) {
    ir::Shape rs;
    for (int64_t p : ai.to_result()) rs.push_back(gs[p]);
    return one(L.g.constant(0, to_ir(self.scalar_type(), L.op()), rs));
  }
  Value g = gather(L, flat_self(L, ai, L.in(self)), flat_index(L, ai), 0);
  return one(L.g.transpose(L.g.reshape(g, gs), ai.to_result()));
}

// index_put(self, indices, values, accumulate) / _index_put_impl_(..., unsafe)
std::vector<Value> index_put(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &values = a[2].toTensor();
  bool accumulate = a[3].toBool();
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "[", L.op(), "] Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  std::vector<at::Tensor> idx = expand_indices(L, self, a[1]);
  DType dt = to_ir(self.scalar_type(), L.op());
  bool any = false;
  for (const auto& t : idx) any |= t.defined();
  Value x = L.in(self);
  if (!any) {  // self[...] = values
    Value v = L.bcast(L.in(values, dt), shape_of(self));
    return one(accumulate ? L.g.binary(OpCode::Add, x, v) : v);
  }
  AdvIndex ai = adv_index(L, self, idx);
  ir::Shape gs = ai.gather_shape();
  std::vector<int64_t> perm = ai.to_result(), inv(perm.size());
  ir::Shape rs;
  for (size_t k = 0; k < perm.size(); ++k) {
    rs.push_back(gs[perm[k]]);
    inv[perm[k]] = static_cast<int64_t>(k);
  }
  ir::Shape vs = shape_of(values);
  bool ok = vs.size() <= rs.size();
  for (size_t k = 0; ok && k < vs.size(); ++k) {
    int64_t v = vs[vs.size() - 1 - k], t = rs[rs.size() - 1 - k];
    ok = v == 1 || v == t;
  }
  TORCH_CHECK(ok, "[", L.op(), "] shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", ir::shape_str(rs));
  if (ir::numel(gs) == 0) return one(x);
  Value v = L.g.transpose(L.bcast(L.in(values, dt), rs), inv);  // result layout -> gather layout
  ir::Shape fs = {ir::numel(ai.B)};
  for (int64_t d : ai.rest) fs.push_back(ai.S[d]);
  Value out = scatter(L, flat_self(L, ai, x), flat_index(L, ai), L.g.reshape(v, fs), 0, accumulate);
  ir::Shape ps;  // permuted self shape
  std::vector<int64_t> sperm = ai.P;
  sperm.insert(sperm.end(), ai.rest.begin(), ai.rest.end());
  std::vector<int64_t> sinv(sperm.size());
  for (size_t k = 0; k < sperm.size(); ++k) {
    ps.push_back(ai.S[sperm[k]]);
    sinv[sperm[k]] = static_cast<int64_t>(k);
  }
  return one(L.g.transpose(L.g.reshape(out, ps), sinv));
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
std::vector<Value> embedding_backward(Lower& L, Args a) {
  const at::Tensor &go = a[0].toTensor(), &indices = a[1].toTensor();
  int64_t nw = a[2].toInt(), pad = a[3].toInt();
  bool by_freq = a[4].toBool();
  int64_t n = indices.numel(), dim = go.size(-1);
  DType dt = to_ir(go.scalar_type(), L.op()), ct = opmath(dt);
  Value idx = L.g.reshape(index_in(L, indices, nw, false, std::string("[") + L.op() + "] index out of range in self"), {n});
  Value g = L.g.reshape(L.in(go, ct), {n, dim});
  Value keep = L.g.compare(Cmp::NE, idx, L.cst_like(double(pad), idx));
  if (by_freq) {
    Value cnt = scatter(L, L.g.constant(0, ct, {nw}), idx, L.g.constant(1, ct, {n}), 0, true);
    g = L.g.binary(OpCode::Div, g, L.g.broadcast(gather(L, cnt, idx, 0), {n, dim}, {0}));
  }
  g = L.g.select(L.g.broadcast(keep, {n, dim}, {0}), g, L.g.constant(0, ct, {n, dim}));
  Value r = scatter(L, L.g.constant(0, ct, {nw, dim}), L.g.broadcast(idx, {n, dim}, {0}), g, 0, true);
  return one(L.g.convert(r, dt));
}

// nonzero and masked_select synchronize: their shape depends on the data (documented cost).
at::Tensor nonzero_sync(const at::Tensor& self) {
  return at::nonzero(self.cpu()).to(self.device());  // .cpu() waits for the stream
}

at::Tensor masked_select_sync(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "[aten::masked_select] masked_select: expected BoolTensor for mask; got ",
              mask.scalar_type());
  auto [s, m] = at::expand_outplace(self, mask);
  if (s->dim() == 0) return at::index(s->reshape({1}), {std::optional<at::Tensor>(m->reshape({1}))});  // CPU: 1-d result
  return at::index(*s, {std::optional<at::Tensor>(*m)});  // index.Tensor: mask -> nonzero -> gather
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "[aten::nonzero.out] Expected object of scalar type Long as out; got ",
              out.scalar_type());
  at::Tensor r = nonzero_sync(self);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "[aten::masked_select.out] expected out dtype ", self.scalar_type(),
              "; got ", out.scalar_type());
  at::Tensor r = masked_select_sync(self, mask);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// The mask positions of a flat [n] bool mask as the rank-r coordinates of `s`: ([n] i64
// running count - 1, [n, r] i64 coordinates).
std::pair<Value, Value> mask_positions(Lower& L, Value m, const ir::Shape& s) {
  int64_t n = L.g.shape(m)[0], r = static_cast<int64_t>(s.size());
  Value pos = L.g.binary(OpCode::Sub, L.g.op(OpCode::Cumsum, {L.g.convert(m, DType::I64)}, axis(0)), L.g.constant(1, DType::I64, {n}));
  Value flat = L.g.iota(DType::I64, {n}, 0);
  std::vector<Value> cols;
  int64_t stride = 1;
  for (int64_t k = r - 1; k >= 0; --k) {
    Value c = L.g.binary(OpCode::Rem, L.g.binary(OpCode::Div, flat, L.g.constant(double(stride), DType::I64, {n})),
                         L.g.constant(double(s[k]), DType::I64, {n}));
    cols.insert(cols.begin(), L.g.reshape(c, {n, 1}));
    stride *= s[k];
  }
  return {pos, cols.size() == 1 ? cols[0] : L.g.concat(cols, 1)};
}

// nonzero_static(self, *, size, fill_value): the first `size` nonzero coordinates, rows past
// the count filled with fill_value. No sync: rows land by running count (Scatter drops the rest).
std::vector<Value> nonzero_static(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  int64_t size = a[1].toInt(), fill = a[2].toInt(), r = self.dim(), n = self.numel();
  TORCH_CHECK(size >= 0, "[", L.op(), "] nonzero_static: 'size' must be an non-negative integer; got ", size);
  Value res = L.g.constant(double(fill), DType::I64, {size, r});
  if (n == 0 || size == 0 || r == 0) return one(res);
  ir::Shape s = shape_of(self);
  Value x = L.g.reshape(L.in(self), {n});
  Value m = L.g.compare(Cmp::NE, x, L.cst_like(0, x));
  auto [pos, coords] = mask_positions(L, m, s);
  Value dst = L.g.select(m, pos, L.g.constant(double(size), DType::I64, {n}));
  return one(L.g.op(OpCode::Scatter, {res, L.g.broadcast(dst, {n, r}, {0}), coords}, axis(0)));
}

// masked_scatter_(self, mask, source): self's masked positions take source's leading elements
// in order (element k of the mask's running count reads source[k]).
std::vector<Value> masked_scatter(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  const at::Tensor& mask = a[1].toTensor();
  const at::Tensor& source = a[2].toTensor();
  TORCH_CHECK(mask.scalar_type() == at::kBool, "[", L.op(), "] masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(source.scalar_type() == self.scalar_type(), "[", L.op(),
              "] masked_scatter: expected self and source to have same dtypes but got ", self.scalar_type(), " and ",
              source.scalar_type());
  Value x = L.in(self);
  int64_t n = self.numel(), ns = source.numel();
  if (n == 0) return one(x);
  ir::Shape s = shape_of(self);
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "[", L.op(), "] mask of shape ", mask.sizes(),
              " is not broadcastable to self of shape ", self.sizes());
  Value m = L.g.reshape(L.bcast(L.in(mask), s), {n});
  Value pos = L.g.binary(OpCode::Sub, L.g.op(OpCode::Cumsum, {L.g.convert(m, DType::I64)}, axis(0)), L.g.constant(1, DType::I64, {n}));
  L.check(any_all(L, L.g.binary(OpCode::And, m, L.g.compare(Cmp::GE, pos, L.cst_like(double(ns), pos)))),
          std::string("[") + L.op() + "] Number of elements of source < number of ones in mask");
  if (ns == 0) return one(x);
  Value src = L.g.reshape(L.in(source), {ns});
  Value g = gather(L, src, L.g.binary(OpCode::Min, L.g.binary(OpCode::Max, pos, L.cst_like(0, pos)), L.cst_like(double(ns - 1), pos)), 0);
  return one(L.g.reshape(L.g.select(m, g, L.g.reshape(x, {n})), s));
}

// histc(self, bins, min, max): CPU's linear bin rule pos = (x - lo) * bins / (hi - lo) in the
// input dtype, x == hi in the last bin, values outside [lo, hi] (and NaN) dropped. min == max
// takes the data's range (device reductions, no sync); an empty range widens by 1 each side.
// Integer input follows CUDA (CPU has no integer histc; MoE routers call it on expert ids):
// min and max truncate to integers, the bin is the integer quotient, counts in the input dtype.
std::vector<Value> histc(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  int64_t bins = a[1].toInt();
  double mn = a[2].toScalar().toDouble(), mx = a[3].toScalar().toDouble();
  bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/false);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || integral, "[", L.op(), "] \"histogram\" not implemented for '",
              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(bins > 0, "[", L.op(), "] bins must be > 0; got ", bins);
  TORCH_CHECK(!(mn > mx), "[", L.op(), "] max must be larger than min; got min ", mn, ", max ", mx);
  TORCH_CHECK(std::isfinite(mn) && std::isfinite(mx), "[", L.op(), "] range of [", mn, ", ", mx, "] is not finite");
  DType out_dt = to_ir(self.scalar_type(), L.op());
  DType dt = integral ? DType::I64 : out_dt;  // the dtype the bin rule computes in
  if (integral) mn = double(int64_t(mn)), mx = double(int64_t(mx));
  int64_t n = self.numel();
  Value x = L.g.reshape(L.in(self, dt), {n});
  Value lo = L.cst(mn, dt), hi = L.cst(mx, dt);
  if (mn == mx && n > 0) {
    lo = L.g.reduce(x, Reducer::Min, {0});
    hi = L.g.reduce(x, Reducer::Max, {0});
    if (!integral) {
      Value fin = L.g.binary(OpCode::And, L.g.compare(Cmp::EQ, L.g.binary(OpCode::Sub, lo, lo), L.cst(0, dt)),
                             L.g.compare(Cmp::EQ, L.g.binary(OpCode::Sub, hi, hi), L.cst(0, dt)));
      L.check(L.g.unary(OpCode::Not, fin), std::string("[") + L.op() + "] range of [min, max] of the input is not finite");
    }
  }
  Value eq = L.g.compare(Cmp::EQ, lo, hi);
  lo = L.g.select(eq, L.g.binary(OpCode::Sub, lo, L.cst(1, dt)), lo);
  hi = L.g.select(eq, L.g.binary(OpCode::Add, hi, L.cst(1, dt)), hi);
  Value out = L.g.constant(0, out_dt, {bins});
  if (n == 0) return one(out);
  Value lob = L.g.broadcast(lo, {n}, {}), hib = L.g.broadcast(hi, {n}, {});
  Value t = L.g.binary(OpCode::Div, L.g.binary(OpCode::Mul, L.g.binary(OpCode::Sub, x, lob), L.g.constant(double(bins), dt, {n})),
                       L.g.binary(OpCode::Sub, hib, lob));
  Value pos = L.g.binary(OpCode::Min, L.g.convert(t, DType::I64), L.g.constant(double(bins - 1), DType::I64, {n}));
  Value in_range = L.g.binary(OpCode::And, L.g.compare(Cmp::GE, x, lob), L.g.compare(Cmp::LE, x, hib));
  Value idx = L.g.select(in_range, pos, L.g.constant(double(bins), DType::I64, {n}));
  return one(scatter(L, out, idx, L.g.constant(1, out_dt, {n}), 0, true));
}

// bincount(self, weights, minlength): syncs once for the input's min and max (the result's
// length depends on the data), then a ScatterAdd of the weights (or ones).
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  const char* op = "aten::bincount";
  TORCH_CHECK(minlength >= 0, "[", op, "] minlength should be >= 0; got ", minlength);
  TORCH_CHECK(self.dim() == 1 && at::isIntegralType(self.scalar_type(), false), "[", op,
              "] bincount only supports 1-d non-negative integral inputs; got a ", self.dim(), "-d ", self.scalar_type(),
              " tensor");
  bool has_w = weights.has_value() && weights->defined();
  if (has_w)
    TORCH_CHECK(weights->dim() == 1 && weights->size(0) == self.size(0), "[", op,
                "] weights should be 1-d and have the same length as input; got ", weights->sizes(), " for input ",
                self.sizes());
  int64_t n = self.size(0), nbins = minlength;
  // An empty input gives int64 zeros even with weights, as PyTorch's CPU and CUDA kernels do.
  at::ScalarType ot = !has_w || n == 0 ? at::kLong : (weights->scalar_type() == at::kFloat ? at::kFloat : at::kDouble);
  if (n > 0) {
    Lower A(op);
    Value x = A.in(self, DType::I64);
    auto r = A.run({A.g.reduce(x, Reducer::Min, {0}), A.g.reduce(x, Reducer::Max, {0})});
    int64_t lo = r[0].cpu().item<int64_t>(), hi = r[1].cpu().item<int64_t>();  // the sync
    TORCH_CHECK(lo >= 0, "[", op, "] bincount only supports 1-d non-negative integral inputs; got a minimum of ", lo);
    nbins = std::max(nbins, hi + 1);
  }
  Lower L(op);
  DType dt = to_ir(ot, op);
  Value out = L.g.constant(0, dt, {nbins});
  if (n == 0) return L.run1(out);
  Value w = has_w ? L.in(*weights, dt) : L.g.constant(1, dt, {n});
  return L.run1(scatter(L, out, L.in(self, DType::I64), w, 0, true));
}

// torch._assert_async(t[, msg]): raises at the next sync point (asynchronously, as on CUDA)
// when the one-element tensor is zero (false); `msg` replaces CPU's default text.
std::vector<Value> assert_async(Lower& L, Args a) {
  const at::Tensor& t = a[0].toTensor();
  TORCH_CHECK(t.numel() == 1, "[", L.op(), "] Boolean value of Tensor with more than one value is ambiguous; got ",
              t.numel(), " elements, expected 1");
  Value x = L.in(t);
  Value zero = L.g.reshape(L.g.compare(Cmp::EQ, x, L.cst_like(0, x)), {});
  std::string msg = a.size() > 1 && a[1].isString() ? std::string(a[1].toStringRef())
                                                    : "Expected Tensor with single nonzero value, but got zero";
  L.check(zero, std::string("[") + L.op() + "] " + msg);
  return {};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto scatter_set = [](Lower& L, Args a) { return scatter_op(L, a, false); };
  auto scatter_add = [](Lower& L, Args a) { return scatter_op(L, a, true); };
  register_ops(m, {
      {"index_select", index_select}, {"index_select.out", index_select},
      {"index_add", index_add}, {"index_add_", index_add}, {"index_add.out", index_add},
      {"gather", gather_op}, {"gather.out", gather_op},
      {"scatter.src", scatter_set}, {"scatter_.src", scatter_set}, {"scatter.src_out", scatter_set},
      {"scatter.value", scatter_set}, {"scatter_.value", scatter_set}, {"scatter.value_out", scatter_set},
      {"scatter_add", scatter_add}, {"scatter_add_", scatter_add}, {"scatter_add.out", scatter_add},
      {"scatter.reduce", scatter_reduce_op}, {"scatter_.reduce", scatter_reduce_op}, {"scatter.reduce_out", scatter_reduce_op},
      {"scatter.value_reduce", scatter_reduce_op}, {"scatter_.value_reduce", scatter_reduce_op},
      {"scatter.value_reduce_out", scatter_reduce_op},
      {"scatter_reduce.two", scatter_reduce_op}, {"scatter_reduce_.two", scatter_reduce_op},
      {"scatter_reduce.two_out", scatter_reduce_op},
      {"index_reduce", index_reduce}, {"index_reduce_", index_reduce}, {"index_reduce.out", index_reduce},
      {"put", put}, {"put_", put}, {"put.out", put},
      {"index.Tensor", index_tensor}, {"index.Tensor_out", index_tensor},
      {"index_put", index_put}, {"index_put_", index_put}, {"_index_put_impl_", index_put},
      {"embedding_dense_backward", embedding_backward}, {"embedding_dense_backward.out", embedding_backward},
      {"nonzero_static", nonzero_static}, {"nonzero_static.out", nonzero_static},
      {"masked_scatter_", masked_scatter}, {"histc", histc}, {"histc.out", histc},
      {"_assert_async", assert_async}, {"_assert_async.msg", assert_async},
  });
  m.impl("nonzero", nonzero_sync);
  m.impl("nonzero.out", nonzero_out);
  m.impl("masked_select", masked_select_sync);
  m.impl("masked_select.out", masked_select_out);
  m.impl("bincount", bincount);
}

}  // namespace
}  // namespace torch_tpu::lowering
