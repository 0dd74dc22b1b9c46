// complex64/complex128 tensors on tpu, as pairs of reals: a complex tensor's storage holds
// (re, im) pairs, view_as_real / view_as_complex are free views, and the arithmetic a model's
// rotary embedding and its backward need (polar, mul, add/sub, neg, conj, clone, sum,
// fill/zero, copies) runs as real ops on the [..., 2] views; the index/cat/scatter families
// are complex_shape.cpp. Any other op on a complex tpu tensor raises NotImplementedError
// naming it (no silent wrong result).
#include <ATen/ATen.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include "lowering/from_aten/complex.h"
#include "lowering/from_aten/transfer.h"

namespace torch_tpu::lowering::complex {
namespace {

bool is_complex_tpu(const at::Tensor& t) { return t.defined() && t.is_privateuseone() && t.is_complex(); }

bool is_complex_tpu(const c10::IValue& v) {
  if (v.isTensor()) return is_complex_tpu(v.toTensor());
  if (v.isTensorList()) {  // cat / stack
    for (const at::Tensor& t : v.toTensorList()) if (is_complex_tpu(t)) return true;
  }
  return false;
}

at::Tensor pairs(const at::Tensor& t) { return real_pairs(t); }

// A real or complex operand as (re, im); a real one has im = 0 (an undefined tensor).
std::pair<at::Tensor, at::Tensor> parts(const c10::IValue& v, at::ScalarType real_type) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.is_complex()) {
      at::Tensor p = t.is_privateuseone() ? pairs(t) : at::view_as_real(t.resolve_conj());
      return {p.select(-1, 0), p.select(-1, 1)};
    }
    return {t, at::Tensor()};
  }
  c10::Scalar s = v.toScalar();
  if (s.isComplex()) {
    c10::complex<double> c = s.toComplexDouble();
    return {at::scalar_tensor(c.real(), at::TensorOptions().dtype(real_type)),
            at::scalar_tensor(c.imag(), at::TensorOptions().dtype(real_type))};
  }
  return {at::scalar_tensor(s.toDouble(), at::TensorOptions().dtype(real_type)), at::Tensor()};
}

at::Tensor make(const at::Tensor& re, const at::Tensor& im) {
  at::Tensor i = im.defined() ? im : at::zeros_like(re);
  std::vector<int64_t> shape = at::infer_size(re.sizes(), i.sizes());
  return at::view_as_complex(at::stack({re.expand(shape), i.expand(shape)}, -1).contiguous());
}

at::Tensor add_parts(const at::Tensor& x, const at::Tensor& y, double alpha) {
  if (!x.defined() && !y.defined()) return at::Tensor();
  if (!y.defined()) return x;
  at::Tensor ys = alpha == 1.0 ? y : y * alpha;
  return x.defined() ? x + ys : ys;
}

at::Tensor mul_parts_re(const std::pair<at::Tensor, at::Tensor>& a, const std::pair<at::Tensor, at::Tensor>& b) {
  at::Tensor r = a.first * b.first;
  if (a.second.defined() && b.second.defined()) r = r - a.second * b.second;
  return r;
}

at::Tensor mul_parts_im(const std::pair<at::Tensor, at::Tensor>& a, const std::pair<at::Tensor, at::Tensor>& b) {
  at::Tensor r;
  if (b.second.defined()) r = a.first * b.second;
  if (a.second.defined()) r = r.defined() ? r + a.second * b.first : a.second * b.first;
  return r;
}

// Writes `value` (complex) into `dst` (a complex tpu tensor), in place.
void assign(const at::Tensor& dst, const at::Tensor& value) {
  TORCH_CHECK(!dst.is_conj(), "[complex] writing into a conjugate view of a tpu tensor is not supported; "
              "got a tensor with the conj bit, expected a resolved tensor (resolve_conj())");
  at::view_as_real(dst).copy_(pairs(value.to(dst.scalar_type())).expand(at::view_as_real(dst).sizes()));
}

at::ScalarType real_of(at::ScalarType t) { return c10::toRealValueType(t); }

// The result type of a binary op's operands (PyTorch's promotion).
at::ScalarType result_type(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) return at::result_type(a.toTensor(), b.toTensor());
  return a.isTensor() ? at::result_type(a.toTensor(), b.toScalar()) : at::result_type(b.toTensor(), a.toScalar());
}

}  // namespace

at::Tensor real_pairs(const at::Tensor& t) {
  if (!t.is_conj()) return at::view_as_real(t);
  at::Tensor p = at::view_as_real(at::_conj(t));  // the stored values; negate the imaginary part
  return at::stack({p.select(-1, 0), p.select(-1, 1).neg()}, -1);
}

bool maybe_run(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool unknown_ok) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  auto args = torch::jit::last(*stack, n);
  bool any = false;
  for (const c10::IValue& a : args) any |= is_complex_tpu(a);
  if (!any) return false;

  const std::string& name = schema.name();  // "aten::mul"
  const std::string& overload = schema.overload_name();
  std::string base = name.substr(name.find("::") + 2);
  bool inplace = !base.empty() && base.back() == '_';
  if (inplace) base.pop_back();
  bool out_variant = overload == "out" || overload.size() > 4 && overload.substr(overload.size() - 4) == "_out";
  TORCH_CHECK_NOT_IMPLEMENTED(!out_variant, "[", name, ".", overload, "] complex tpu tensors support only the "
                              "functional and in-place forms; got out=");

  at::Tensor result;
  if (base == "mul" || base == "add" || base == "sub" || base == "rsub") {
    at::ScalarType rt = result_type(args[0], args[1]);
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isComplexType(rt), "[", name, "] complex operands promote to a complex type");
    at::ScalarType real = real_of(rt);
    auto a = parts(args[0], real), b = parts(args[1], real);
    if (base == "mul") {
      result = make(mul_parts_re(a, b), mul_parts_im(a, b));
    } else {
      double alpha = n > 2 && !args[2].isNone() ? args[2].toScalar().toDouble() : 1.0;
      if (base == "rsub") std::swap(a, b);
      double s = base == "add" ? alpha : -alpha;
      result = make(add_parts(a.first, b.first, s), add_parts(a.second, b.second, s));
    }
    result = result.to(rt);
  } else if (base == "neg") {
    result = at::view_as_complex(pairs(args[0].toTensor()).neg().contiguous());
  } else if (base == "_conj_physical" || base == "conj_physical") {
    at::Tensor p = pairs(args[0].toTensor());
    result = at::view_as_complex(at::stack({p.select(-1, 0), p.select(-1, 1).neg()}, -1));
  } else if (base == "clone") {
    result = at::view_as_complex(pairs(args[0].toTensor()).clone().contiguous());
  } else if (base == "sum" && (overload == "dim_IntList" || overload.empty())) {
    const at::Tensor& x = args[0].toTensor();
    at::Tensor p = pairs(x);
    std::vector<int64_t> dims;
    bool keep = false;
    if (overload == "dim_IntList") {
      if (!args[1].isNone()) dims = args[1].toIntList().vec();
      keep = args[2].toBool();
    }
    if (dims.empty())
      for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
    for (int64_t& d : dims) d = c10::maybe_wrap_dim(d, x.dim());
    // dtype=: a complex one sums the pairs in its real type; a real one sums the real parts
    // (CPU casts first, discarding the imaginary parts).
    const c10::IValue& dt = args[overload.empty() ? 1 : 3];
    if (!dt.isNone() && !c10::isComplexType(dt.toScalarType())) {
      result = p.select(-1, 0).to(dt.toScalarType()).sum(dims, keep);
    } else {
      if (!dt.isNone()) p = p.to(real_of(dt.toScalarType()));
      result = at::view_as_complex(p.sum(dims, keep).contiguous());
    }
  } else if (base == "fill" && overload == "Scalar") {
    at::Tensor self = args[0].toTensor();  // a copy: drop() frees the stack's
    c10::complex<double> v = args[1].toScalar().toComplexDouble();
    at::Tensor p = at::view_as_real(self);
    p.select(-1, 0).fill_(v.real());
    p.select(-1, 1).fill_(v.imag());
    torch::jit::drop(*stack, n);
    torch::jit::push(*stack, self);
    return true;
  } else if (base == "zero") {
    at::Tensor self = args[0].toTensor();
    at::view_as_real(self).zero_();
    torch::jit::drop(*stack, n);
    torch::jit::push(*stack, self);
    return true;
  } else if (at::Tensor r = shape_op(base, overload, args); r.defined()) {
    result = r;
  } else {
    if (unknown_ok) return false;
    TORCH_CHECK_NOT_IMPLEMENTED(false, "[", name, (overload.empty() ? "" : "."), overload,
                                "] complex tensors on tpu support polar, view_as_real/view_as_complex, mul, add, "
                                "sub, div, neg, conj, abs, angle, clone, sum, fill_, zero_, copies, views, "
                                "index/index_select/gather/scatter/index_put/index_add, cat/stack, where, "
                                "masked_fill, flip/roll/repeat, constant_pad_nd and the *_scatter ops; got this op "
                                "on a complex tensor");
  }
  if (inplace) {
    at::Tensor self = args[0].toTensor();
    assign(self, result);
    result = self;
  }
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, result);
  return true;
}

bool copy(const at::Tensor& src, const at::Tensor& dst) {
  if (!src.is_complex() && !dst.is_complex()) return false;
  TORCH_CHECK(!dst.is_conj(), "[aten::copy_] writing into a conjugate view is not supported on tpu");
  if (!src.is_complex()) {  // real into complex: imaginary part 0
    at::Tensor re = src.to(src.options().dtype(real_of(dst.scalar_type())));
    at::Tensor p = at::stack({re, at::zeros_like(re)}, -1);
    if (!p.device().is_privateuseone()) p = p.to(dst.device());
    transfer::copy(p.expand(at::view_as_real(dst).sizes()), at::view_as_real(dst));
    return true;
  }
  if (!dst.is_complex()) {  // complex into real: the real part, as CPU (which warns)
    TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
    at::Tensor re = (src.is_privateuseone() ? pairs(src) : at::view_as_real(src.resolve_conj())).select(-1, 0);
    dst.copy_(re);
    return true;
  }
  at::Tensor s = src.scalar_type() == dst.scalar_type() ? src : src.to(dst.scalar_type());
  at::Tensor sp = s.is_privateuseone() ? pairs(s) : at::view_as_real(s.resolve_conj());
  transfer::copy(sp.expand(at::view_as_real(dst).sizes()), at::view_as_real(dst));
  return true;
}

namespace {

at::Tensor polar(const at::Tensor& abs, const at::Tensor& angle) {
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "[aten::polar] abs and angle must have the same dtype; got ",
              abs.scalar_type(), " and ", angle.scalar_type());
  TORCH_CHECK(abs.scalar_type() == at::kFloat || abs.scalar_type() == at::kDouble,
              "[aten::polar] expected float or double abs and angle; got ", abs.scalar_type());
  return make(abs * at::cos(angle), abs * at::sin(angle));
}

// The conjugate's values (what copies and resolve_conj materialize conj views with).
at::Tensor conj_physical(const at::Tensor& self) {
  if (!self.is_complex()) return self.clone();
  at::Tensor p = pairs(self);
  return at::view_as_complex(at::stack({p.select(-1, 0), p.select(-1, 1).neg()}, -1));
}

at::Tensor& conj_physical_(at::Tensor& self) {
  if (!self.is_complex()) return self;
  TORCH_CHECK(!self.is_conj(), "[aten::conj_physical_] writing into a conjugate view is not supported on tpu");
  at::view_as_real(self).select(-1, 1).neg_();
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_conj_physical", conj_physical);
  m.impl("conj_physical_", conj_physical_);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("polar", polar);
}

// Copies into or out of tpu see conjugate views as they are (complex::copy materializes
// them): the Conjugate fallback would resolve them with a copy, which is this copy again.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace
}  // namespace torch_tpu::lowering::complex
