// Convolution: convolution_overrideable (what aten::convolution reaches for PrivateUse1:
// conv1d/2d/3d, transposed, groups, bias) and convolution_backward_overrideable, all as IR
// convolutions (docs/decisions/convolution.md has the derivations):
//   forward        conv(x, w; stride s, pad p, rhs dilation d, groups G)
//   input grad     conv(gy lhs-dilated by s, w flipped with its two feature dims swapped per
//                  group; pad d(k-1)-p low, rhs dilation d); one group: w as stored, the conv's
//                  kernel_transposed + kernel_reversed attrs say how it is read
//   weight grad    conv(x as [Cg, G*N, X], gy as [O, N, Y]; window stride d, rhs dilation s),
//                  transposed to [O, Cg, k]; one group: gy as stored and the result in place
//                  (kernel_transposed, result_transposed)
//   transposed     its forward is the input grad above; its input grad is the plain forward
//                  with the same w; its weight grad is the weight grad with x and gy swapped.
// f32 convolutions use the matmul precision (TPU DEFAULT: bf16 operands, f32 sums).
#include "base/error.h"
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
};

ConvParams params(Args a, int first) {
  ConvParams p;
  p.stride = a[first].toIntVector();
  p.padding = a[first + 1].toIntVector();
  p.dilation = a[first + 2].toIntVector();
  p.transposed = a[first + 3].toBool();
  p.output_padding = a[first + 4].toIntVector();
  p.groups = a[first + 5].toInt();
  return p;
}

void check_input(Lower& L, const at::Tensor& x, const at::Tensor& w, const ConvParams& p) {
  int64_t S = x.dim() - 2;
  TORCH_CHECK(S >= 1 && S <= 3 && w.dim() == x.dim(), "[", L.op(), "] expected a 3-D, 4-D or 5-D input and a weight of the ",
              "same rank; got input ", x.sizes(), " and weight ", w.sizes());
  TORCH_CHECK(x.scalar_type() == w.scalar_type(), "[", L.op(), "] input and weight dtypes differ; got ",
              x.scalar_type(), " and ", w.scalar_type(), ", expected the same");
  TORCH_CHECK(x.scalar_type() != at::kBool && !at::isComplexType(x.scalar_type()), "[", L.op(),
              "] unsupported dtype; got ", x.scalar_type(), ", expected a floating point or integer type");
  for (const auto* v : {&p.stride, &p.padding, &p.dilation})
    TORCH_CHECK(static_cast<int64_t>(v->size()) == S, "[", L.op(), "] expected ", S,
                " entries per stride/padding/dilation; got ", v->size());
  TORCH_CHECK(p.groups >= 1, "[", L.op(), "] non-positive groups is not supported; got ", p.groups);
}

ir::Precision precision_for(DType t) { return t == DType::F32 ? matmul_precision() : ir::Precision::Highest; }

std::vector<int64_t> iota_perm(size_t n) {
  std::vector<int64_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(i);
  return p;
}

// w [A, B, k...] seen as G groups of A/G: -> [G*B, A/G, k...], spatially reversed.
Value flip_kernel(Lower& L, Value w, int64_t G) {
  ir::Shape s = L.g.shape(w);
  size_t S = s.size() - 2;
  int64_t A = s[0], B = s[1];
  ir::Shape g5 = {G, A / G, B};
  g5.insert(g5.end(), s.begin() + 2, s.end());
  std::vector<int64_t> perm = {0, 2, 1};
  for (size_t i = 0; i < S; ++i) perm.push_back(3 + static_cast<int64_t>(i));
  Value t = L.g.transpose(L.g.reshape(w, g5), perm);
  ir::Shape out = {G * B, A / G};
  out.insert(out.end(), s.begin() + 2, s.end());
  t = L.g.reshape(t, out);
  ir::Attrs rev;
  for (size_t i = 0; i < S; ++i) rev.dims.push_back(2 + static_cast<int64_t>(i));
  return L.g.op(OpCode::Reverse, {t}, rev);
}

ir::Attrs window(size_t S, int64_t groups, ir::Precision prec) {
  ir::Attrs a;
  a.window_strides.assign(S, 1), a.pad_lo.assign(S, 0), a.pad_hi.assign(S, 0);
  a.lhs_dilation.assign(S, 1), a.rhs_dilation.assign(S, 1);
  a.groups = groups;
  a.precision = prec;
  return a;
}

// y = conv(x, w): x [N, C, X...], w [O, C/G, k...].
Value conv_forward(Lower& L, Value x, Value w, const ConvParams& p) {
  size_t S = L.g.shape(x).size() - 2;
  ir::Attrs a = window(S, p.groups, precision_for(L.g.dtype(x)));
  a.window_strides = p.stride, a.pad_lo = p.padding, a.pad_hi = p.padding, a.rhs_dilation = p.dilation;
  return L.g.conv(x, w, a);
}

// The gradient of conv_forward(x, w) with respect to x, given gy [N, O, Y...] and the input's
// spatial sizes X: the transposed convolution.
Value conv_data_grad(Lower& L, Value gy, Value w, const ConvParams& p, const ir::Shape& X) {
  const ir::Shape& ys = L.g.shape(gy);
  const ir::Shape& ws = L.g.shape(w);
  size_t S = ys.size() - 2;
  ir::Attrs a = window(S, p.groups, precision_for(L.g.dtype(gy)));
  for (size_t i = 0; i < S; ++i) {
    int64_t k = ws[2 + i], Y = ys[2 + i];
    a.lhs_dilation[i] = p.stride[i];
    a.rhs_dilation[i] = p.dilation[i];
    a.pad_lo[i] = p.dilation[i] * (k - 1) - p.padding[i];
    a.pad_hi[i] = X[i] - 1 - (Y - 1) * p.stride[i] + p.padding[i];
  }
  if (p.groups == 1) {  // the weight as stored: the kernel read transposed and reversed
    a.kernel_transposed = a.kernel_reversed = true;
    return L.g.conv(gy, w, a);
  }
  return L.g.conv(gy, flip_kernel(L, w, p.groups), a);
}

// The gradient of conv_forward(x, w) with respect to w (of spatial sizes K), given gy.
Value conv_weight_grad(Lower& L, Value x, Value gy, const ConvParams& p, const ir::Shape& K) {
  ir::Shape xs = L.g.shape(x);
  const ir::Shape ys = L.g.shape(gy);
  size_t S = xs.size() - 2;
  int64_t N = xs[0], C = xs[1], G = p.groups, Cg = C / G;
  ir::Attrs a = window(S, G, precision_for(L.g.dtype(x)));
  std::vector<int64_t> start(xs.size(), 0), limit = xs, step(xs.size(), 1);
  for (size_t i = 0; i < S; ++i) {
    int64_t X = xs[2 + i], Y = ys[2 + i];
    a.window_strides[i] = p.dilation[i];
    a.rhs_dilation[i] = p.stride[i];
    a.pad_lo[i] = p.padding[i];
    a.pad_hi[i] = (K[i] - 1) * p.dilation[i] + (Y - 1) * p.stride[i] + 1 - X - p.padding[i];
    if (a.pad_hi[i] < 0) {  // the input's tail that no window reached: slice it off
      limit[2 + i] = X + a.pad_hi[i];
      a.pad_hi[i] = 0;
    }
  }
  if (limit != xs) {
    x = L.g.slice(x, start, limit, step);
    xs = L.g.shape(x);
  }
  // x [N, C, X] -> [N, G, Cg, X] -> [Cg, G, N, X] -> [Cg, G*N, X]
  ir::Shape x5 = {N, G, Cg};
  x5.insert(x5.end(), xs.begin() + 2, xs.end());
  std::vector<int64_t> perm = {2, 1, 0};
  for (size_t i = 0; i < S; ++i) perm.push_back(3 + static_cast<int64_t>(i));
  ir::Shape lhs_shape = {Cg, G * N};
  lhs_shape.insert(lhs_shape.end(), xs.begin() + 2, xs.end());
  Value lhs = L.g.reshape(L.g.transpose(L.g.reshape(x, x5), perm), lhs_shape);
  std::vector<int64_t> swap01 = iota_perm(S + 2);
  std::swap(swap01[0], swap01[1]);
  if (G == 1) {  // gy read as the kernel [i = N, o = O, Y], the result written as [O, C, K]
    a.kernel_transposed = a.result_transposed = true;
    return L.g.conv(lhs, gy, a);
  }
  Value rhs = L.g.transpose(gy, swap01);  // [O, N, Y]
  Value r = L.g.conv(lhs, rhs, a);        // [Cg, O, K]
  return L.g.transpose(r, swap01);
}

ir::Shape spatial(const ir::Shape& s) { return ir::Shape(s.begin() + 2, s.end()); }

Value crop(Lower& L, Value v, const ir::Shape& shape) {
  if (L.g.shape(v) == shape) return v;
  return L.g.slice(v, std::vector<int64_t>(shape.size(), 0), shape, std::vector<int64_t>(shape.size(), 1));
}

// convolution_overrideable(input, weight, bias?, stride, padding, dilation, transposed,
//                          output_padding, groups)
std::vector<Value> convolution(Lower& L, Args a) {
  const at::Tensor &input = a[0].toTensor(), &weight = a[1].toTensor();
  ConvParams p = params(a, 3);
  check_input(L, input, weight, p);
  DType dt = to_ir(input.scalar_type(), L.op());
  Value x = L.in(input), w = L.in(weight), y;
  if (has_tensor(a[2]))
    TORCH_CHECK(a[2].toTensor().scalar_type() == input.scalar_type(), "[", L.op(), "] bias dtype differs from input; got ",
                a[2].toTensor().scalar_type(), ", expected ", input.scalar_type());
  if (p.transposed) {
    ir::Shape X;
    for (size_t i = 0; i < p.stride.size(); ++i) {
      int64_t k = weight.size(2 + i);
      TORCH_CHECK(i < p.output_padding.size() && p.output_padding[i] < std::max(p.stride[i], p.dilation[i]), "[",
                  L.op(), "] output padding must be smaller than either stride or dilation; got output_padding ",
                  c10::IntArrayRef(p.output_padding), ", stride ", c10::IntArrayRef(p.stride), ", dilation ",
                  c10::IntArrayRef(p.dilation));
      X.push_back((input.size(2 + i) - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (k - 1) +
                  p.output_padding[i] + 1);
      TORCH_CHECK(X.back() > 0, "[", L.op(), "] output size is too small; got input ", input.sizes(),
                  " giving output size ", X.back(), " in spatial dim ", i);
    }
    y = conv_data_grad(L, x, w, p, X);
  } else {
    y = conv_forward(L, x, w, p);
  }
  if (has_tensor(a[2])) {
    DType ct = opmath(dt);
    ir::Shape bs(L.g.shape(y).size(), 1);
    bs[1] = a[2].toTensor().numel();
    Value b = L.g.reshape(L.in(a[2].toTensor(), ct), bs);
    y = L.g.convert(bin(L, OpCode::Add, L.g.convert(y, ct), b), dt);
  }
  return one(y);
}

// convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation,
//   transposed, output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias);
// results not asked for by output_mask are undefined tensors.
void convolution_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  auto a = torch::jit::last(*stack, n);
  const at::Tensor &go = a[0].toTensor(), &input = a[1].toTensor(), &weight = a[2].toTensor();
  Lower L("aten::convolution_backward_overrideable");
  ConvParams p = params(a, 3);
  auto mask = a[9].toBoolList();
  check_input(L, input, weight, p);
  DType dt = to_ir(input.scalar_type(), L.op());
  std::vector<Value> outs;
  std::vector<int> which;
  try {
    Value gy = L.in(go), w = L.in(weight);
    if (mask[0]) {
      ir::Shape X = spatial(shape_of(input));
      // A transposed conv's output_padding may exceed its stride (up to dilation - 1): the
      // plain conv of gy then has trailing positions beyond the input, which are cropped.
      outs.push_back(p.transposed ? crop(L, conv_forward(L, gy, w, p), shape_of(input))
                                  : conv_data_grad(L, gy, w, p, X));
      which.push_back(0);
    }
    if (mask[1]) {
      Value x = L.in(input);
      ir::Shape K = spatial(shape_of(weight));
      outs.push_back(p.transposed ? conv_weight_grad(L, gy, x, p, K) : conv_weight_grad(L, x, gy, p, K));
      which.push_back(1);
    }
    if (mask[2]) {
      std::vector<int64_t> dims = {0};
      for (int64_t i = 2; i < go.dim(); ++i) dims.push_back(i);
      outs.push_back(L.g.convert(L.g.reduce(L.g.convert(gy, opmath(dt)), ir::Reducer::Sum, dims), dt));
      which.push_back(2);
    }
  } catch (const torch_tpu::Error& e) {
    TORCH_CHECK(false, "[", L.op(), "] ", e.what());
  }
  std::vector<at::Tensor> res(3);
  if (!outs.empty()) {
    std::vector<at::Tensor> got = L.run(outs);
    for (size_t i = 0; i < which.size(); ++i) res[which[i]] = got[i];
  }
  torch::jit::drop(*stack, n);
  for (auto& t : res) torch::jit::push(*stack, t);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {{"convolution_overrideable", convolution}});
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution_backward>());
}

}  // namespace
}  // namespace torch_tpu::lowering
