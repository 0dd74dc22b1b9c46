// Complex tpu tensors in the index, gather/scatter, cat/stack, pad/flip/roll/repeat and
// *_scatter families, and div/abs/angle: each computed on the real pairs [..., 2] (the trailing
// pair dim rides along: dims are wrapped against the complex rank, index tensors of gather /
// scatter grow the pair dim, masks and conditions get a unit one). What rotary embeddings
// (TorchTitan's ComplexRoPE gathers freqs_cis by position) and their backwards do.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include "lowering/from_aten/complex.h"

namespace torch_tpu::lowering::complex {
namespace {

using Args = c10::ArrayRef<c10::IValue>;

int64_t wrap(int64_t d, int64_t rank) { return c10::maybe_wrap_dim(d, rank); }

at::Tensor as_complex(const at::Tensor& p) { return at::view_as_complex(p.contiguous()); }

// Real pairs of `t` in the real type `real`: complex values as they are, real ones with 0 im.
at::Tensor rp(const at::Tensor& t, at::ScalarType real) {
  if (t.is_complex()) return real_pairs(t).to(real);
  at::Tensor re = t.to(real);
  return at::stack({re, at::zeros_like(re)}, -1);
}

at::Tensor self_of(Args a) { return a[0].toTensor(); }

// The real type of the complex result of an op over these tensor operands.
at::ScalarType real_type(std::initializer_list<at::Tensor> ts) {
  at::ScalarType r = at::kFloat;
  bool first = true;
  for (const at::Tensor& t : ts) {
    if (!t.defined() || !t.is_complex()) continue;
    r = first ? t.scalar_type() : at::promote_types(r, t.scalar_type());
    first = false;
  }
  return c10::toRealValueType(r);
}

// An index tensor of gather/scatter grown by the pair dim.
at::Tensor pair_index(const at::Tensor& index) {
  std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
  shape.push_back(2);
  return index.unsqueeze(-1).expand(shape);
}

at::Tensor pair_of_scalar(const c10::Scalar& s, at::ScalarType real, const at::Device& dev) {
  c10::complex<double> c = s.toComplexDouble();
  return at::tensor({c.real(), c.imag()}, at::TensorOptions().dtype(real)).to(dev);
}

at::Tensor cat_like(const std::string& base, Args a) {
  std::vector<at::Tensor> ts = a[0].toTensorVector();
  at::ScalarType real = at::kFloat;
  bool first = true;
  for (const at::Tensor& t : ts) {
    if (!t.is_complex()) continue;
    real = first ? c10::toRealValueType(t.scalar_type()) : at::promote_types(real, c10::toRealValueType(t.scalar_type()));
    first = false;
  }
  int64_t rank = -1;
  for (const at::Tensor& t : ts)
    if (!(t.dim() == 1 && t.numel() == 0)) rank = std::max(rank, t.dim());  // cat skips legacy empties
  if (rank < 0) rank = ts.empty() ? 1 : ts[0].dim();
  std::vector<at::Tensor> ps;
  for (const at::Tensor& t : ts)
    if (base == "stack" || !(t.dim() == 1 && t.numel() == 0 && rank != 1)) ps.push_back(rp(t, real));
  if (base == "stack") return as_complex(at::stack(ps, wrap(a[1].toInt(), rank + 1)));
  return as_complex(at::cat(ps, wrap(a[1].toInt(), rank)));
}

at::Tensor where_op(const std::string& overload, Args a) {
  const at::Tensor& cond = a[0].toTensor();
  at::Tensor x = a[1].isTensor() ? a[1].toTensor() : at::Tensor();
  at::Tensor y = a[2].isTensor() ? a[2].toTensor() : at::Tensor();
  at::ScalarType real = real_type({x, y});
  at::Device dev = cond.device();
  at::Tensor px = x.defined() ? rp(x, real) : pair_of_scalar(a[1].toScalar(), real, dev);
  at::Tensor py = y.defined() ? rp(y, real) : pair_of_scalar(a[2].toScalar(), real, dev);
  (void)overload;
  return as_complex(at::where(cond.unsqueeze(-1), px, py));
}

at::Tensor masked_fill_op(Args a) {
  const at::Tensor self = self_of(a);
  at::ScalarType real = c10::toRealValueType(self.scalar_type());
  at::Tensor v = a[2].isTensor() ? rp(a[2].toTensor(), real) : pair_of_scalar(a[2].toScalar(), real, self.device());
  return as_complex(at::where(a[1].toTensor().unsqueeze(-1), v, real_pairs(self)));
}

at::Tensor scatter_op(const std::string& base, const std::string& overload, Args a) {
  const at::Tensor self = self_of(a);
  at::ScalarType real = c10::toRealValueType(self.scalar_type());
  int64_t d = wrap(a[1].toInt(), self.dim());
  at::Tensor idx = pair_index(a[2].toTensor());
  at::Tensor p = real_pairs(self);
  TORCH_CHECK_NOT_IMPLEMENTED(overload != "reduce" && overload != "value_reduce", "[aten::", base, ".", overload,
                              "] complex tpu tensors support scatter without reduce=; got reduce=");
  if (a[3].isTensor()) {
    at::Tensor src = rp(a[3].toTensor(), real);
    return as_complex(base == "scatter_add" ? p.scatter_add(d, idx, src) : p.scatter(d, idx, src));
  }
  // scatter.value: a complex scalar, written part by part
  at::Tensor v = pair_of_scalar(a[3].toScalar(), real, self.device());
  std::vector<int64_t> shape(idx.sizes().begin(), idx.sizes().end());
  return as_complex(p.scatter(d, idx, v.expand(shape)));
}

at::Tensor pad_op(Args a) {
  const at::Tensor self = self_of(a);
  at::Tensor p = real_pairs(self);
  c10::complex<double> v = a.size() > 2 && !a[2].isNone() ? a[2].toScalar().toComplexDouble() : 0.0;
  at::Tensor re = at::constant_pad_nd(p.select(-1, 0), a[1].toIntVector(), v.real());
  at::Tensor im = at::constant_pad_nd(p.select(-1, 1), a[1].toIntVector(), v.imag());
  return as_complex(at::stack({re, im}, -1));
}

at::Tensor div_op(const std::string& overload, Args a) {
  TORCH_CHECK_NOT_IMPLEMENTED(overload != "Tensor_mode" && overload != "Scalar_mode", "[aten::div.", overload,
                              "] complex tpu tensors support div without rounding_mode");
  at::Tensor x = a[0].toTensor();
  at::Tensor y = a[1].isTensor() ? a[1].toTensor() : at::Tensor();
  at::ScalarType real = real_type({x, y});
  at::Tensor px = rp(x, real);
  at::Tensor xr = px.select(-1, 0), xi = px.select(-1, 1);
  if (!y.defined() && !a[1].toScalar().isComplex()) {
    double s = a[1].toScalar().toDouble();
    return as_complex(at::stack({xr / s, xi / s}, -1));
  }
  if (y.defined() && !y.is_complex()) {
    at::Tensor yr = y.to(real);
    return as_complex(at::stack({xr / yr, xi / yr}, -1));
  }
  at::Tensor py = y.defined() ? rp(y, real) : pair_of_scalar(a[1].toScalar(), real, x.device());
  at::Tensor yr = py.select(-1, 0), yi = py.select(-1, 1);
  at::Tensor den = yr * yr + yi * yi;
  return as_complex(at::stack({(xr * yr + xi * yi) / den, (xi * yr - xr * yi) / den}, -1));
}

}  // namespace

at::Tensor shape_op(const std::string& base, const std::string& overload, Args a) {
  if (base == "cat" || base == "stack") return cat_like(base, a);
  if (base == "where") return where_op(overload, a);
  if (base == "div") return div_op(overload, a);
  const at::Tensor self = self_of(a);
  if (!self.is_complex()) return at::Tensor();  // a complex operand elsewhere: not ours
  at::ScalarType real = c10::toRealValueType(self.scalar_type());
  const int64_t rank = self.dim();
  at::Tensor p = real_pairs(self);
  if (base == "index_select") return as_complex(p.index_select(wrap(a[1].toInt(), rank), a[2].toTensor()));
  if (base == "gather") return as_complex(p.gather(wrap(a[1].toInt(), rank), pair_index(a[2].toTensor())));
  if (base == "index" && overload == "Tensor") return as_complex(at::index(p, a[1].toOptionalTensorList()));
  if ((base == "index_put" || base == "_index_put_impl") && a[2].isTensor())
    return as_complex(p.index_put(a[1].toOptionalTensorList(), rp(a[2].toTensor(), real), a[3].toBool()));
  if (base == "index_add") {
    c10::Scalar alpha = a.size() > 4 ? a[4].toScalar() : c10::Scalar(1);
    TORCH_CHECK_NOT_IMPLEMENTED(!alpha.isComplex(), "[aten::index_add] complex alpha on tpu");
    return as_complex(p.index_add(wrap(a[1].toInt(), rank), a[2].toTensor(), rp(a[3].toTensor(), real), alpha));
  }
  if (base == "scatter" || base == "scatter_add") return scatter_op(base, overload, a);
  if (base == "masked_fill") return masked_fill_op(a);
  if (base == "repeat") {
    std::vector<int64_t> r = a[1].toIntVector();
    r.push_back(1);
    return as_complex(p.repeat(r));
  }
  if (base == "flip") {
    std::vector<int64_t> dims = a[1].toIntVector();
    for (int64_t& d : dims) d = wrap(d, rank);
    return as_complex(p.flip(dims));
  }
  if (base == "roll") {
    std::vector<int64_t> dims = a[2].toIntVector();
    if (dims.empty()) return as_complex(p.reshape({-1, 2}).roll(a[1].toIntVector(), {0}).reshape(p.sizes()));
    for (int64_t& d : dims) d = wrap(d, rank);
    return as_complex(p.roll(a[1].toIntVector(), dims));
  }
  if (base == "constant_pad_nd") return pad_op(a);
  if (base == "slice_scatter") {
    std::optional<int64_t> start = a[3].toOptional<int64_t>(), end = a[4].toOptional<int64_t>();
    return as_complex(p.slice_scatter(rp(a[1].toTensor(), real), wrap(a[2].toInt(), rank), start, end, a[5].toInt()));
  }
  if (base == "select_scatter")
    return as_complex(p.select_scatter(rp(a[1].toTensor(), real), wrap(a[2].toInt(), rank), a[3].toInt()));
  if (base == "diagonal_scatter")
    return as_complex(p.diagonal_scatter(rp(a[1].toTensor(), real), a[2].toInt(), wrap(a[3].toInt(), rank),
                                         wrap(a[4].toInt(), rank)));
  if (base == "abs") return at::sqrt(p.select(-1, 0).square() + p.select(-1, 1).square());
  if (base == "angle") return at::atan2(p.select(-1, 1), p.select(-1, 0));
  return at::Tensor();
}

}  // namespace torch_tpu::lowering::complex
