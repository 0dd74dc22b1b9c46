// Shape/dtype rules of the windowed ops: convolution (canonical [b, f, 0..] layouts) and
// reduce_window. Semantics on their rows in ops.def; docs/decisions/convolution.md.
#include "base/error.h"
#include "ir/infer_internal.h"

namespace torch_tpu::ir {
namespace {

// Checks that every window field of `a` has `r` entries (strides/dilations >= 1, padding
// >= 0 unless allowed negative).
void check_fields(const char* op, const Attrs& a, size_t r, bool allow_negative_pad) {
  auto check = [&](const std::vector<int64_t>& v, const char* what, int64_t min) {
    TPU_CHECK(v.size() == r, "[", op, "] ", what, " needs one entry per windowed dim; got ", v.size(),
              ", expected ", r);
    for (int64_t x : v)
      TPU_CHECK(x >= min, "[", op, "] ", what, " out of range; got ", x, ", expected >= ", min);
  };
  check(a.window_strides, "window_strides", 1);
  check(a.lhs_dilation, "lhs_dilation", 1);
  check(a.rhs_dilation, "rhs_dilation", 1);
  int64_t pmin = allow_negative_pad ? INT64_MIN : 0;
  check(a.pad_lo, "pad_lo", pmin);
  check(a.pad_hi, "pad_hi", pmin);
}

// The result size of windowed dim i for input size x and window size k.
int64_t window_out(const char* op, const Attrs& a, size_t i, int64_t x, int64_t k) {
  int64_t in = x == 0 ? 0 : (x - 1) * a.lhs_dilation[i] + 1;
  int64_t padded = in + a.pad_lo[i] + a.pad_hi[i];
  int64_t win = k == 0 ? 0 : (k - 1) * a.rhs_dilation[i] + 1;
  TPU_CHECK(padded >= 0, "[", op, "] padded size of dim ", i, " is negative; got ", padded,
            ", expected >= 0");
  if (padded < win) return 0;
  return (padded - win) / a.window_strides[i] + 1;
}

void infer_conv(const Graph& g, Node& n) {
  const Node& l = g.nodes()[n.operands[0]];
  const Node& r = g.nodes()[n.operands[1]];
  const Attrs& a = n.attrs;
  TPU_CHECK(l.dtype == r.dtype, "[convolution] operand dtypes differ; got ", dtype_name(l.dtype),
            " and ", dtype_name(r.dtype));
  TPU_CHECK(!is_bool(l.dtype), "[convolution] unsupported dtype; got ", dtype_name(l.dtype),
            ", expected a float or integer type");
  size_t rank = l.shape.size();
  TPU_CHECK(rank >= 3 && rank <= 5, "[convolution] lhs must be [N, C, spatial...] with 1 to 3 spatial dims; got ",
            shape_str(l.shape));
  TPU_CHECK(r.shape.size() == rank, "[convolution] rhs rank mismatch; got ", shape_str(r.shape),
            ", expected rank ", rank);
  size_t s = rank - 2;
  check_fields("convolution", a, s, true);
  int64_t G = a.groups;
  TPU_CHECK(G >= 1, "[convolution] feature_group_count must be >= 1; got ", G);
  TPU_CHECK(!a.kernel_transposed || G == 1, "[convolution] a transposed kernel needs feature_group_count 1; got ", G);
  const int64_t ko = r.shape[a.kernel_transposed ? 1 : 0], ki = r.shape[a.kernel_transposed ? 0 : 1];
  TPU_CHECK(l.shape[1] % G == 0 && l.shape[1] / G == ki, "[convolution] input features ",
            "mismatch; got lhs ", shape_str(l.shape), " and rhs ", shape_str(r.shape),
            " with feature_group_count ", G, ", expected lhs features = the kernel's input features * ", G);
  TPU_CHECK(ko % G == 0, "[convolution] output features not divisible by ",
            "feature_group_count; got ", ko, " and ", G);
  TPU_CHECK(a.ivalue == 0 || (a.ivalue == 1 && l.dtype == DType::BF16),
            "[convolution] an f32 result (ivalue 1) needs bf16 operands; got ", dtype_name(l.dtype),
            " operands and ivalue ", a.ivalue);
  n.shape = a.result_transposed ? Shape{ko, l.shape[0]} : Shape{l.shape[0], ko};
  for (size_t i = 0; i < s; ++i) n.shape.push_back(window_out("convolution", a, i, l.shape[2 + i], r.shape[2 + i]));
  n.dtype = a.ivalue == 1 ? DType::F32 : l.dtype;
}

void infer_reduce_window(const Graph& g, Node& n) {
  const Node& x = g.nodes()[n.operands[0]];
  const Attrs& a = n.attrs;
  size_t r = x.shape.size();
  TPU_CHECK(a.window.size() == r, "[reduce_window] window needs one entry per dim; got ",
            a.window.size(), ", expected ", r);
  for (int64_t w : a.window)
    TPU_CHECK(w >= 1, "[reduce_window] window dimension out of range; got ", w, ", expected >= 1");
  check_fields("reduce_window", a, r, false);
  Reducer red = a.reducer;
  TPU_CHECK(red == Reducer::Sum || red == Reducer::Max || red == Reducer::Min,
            "[reduce_window] unsupported reducer; got ", static_cast<int>(red), ", expected sum, max or min");
  TPU_CHECK(!is_bool(x.dtype), "[reduce_window] unsupported dtype i1");
  n.shape.clear();
  for (size_t i = 0; i < r; ++i) n.shape.push_back(window_out("reduce_window", a, i, x.shape[i], a.window[i]));
  n.dtype = x.dtype;
}

}  // namespace

void infer_window(const Graph& g, Node& n) {
  if (n.op == OpCode::Convolution) return infer_conv(g, n);
  return infer_reduce_window(g, n);
}

}  // namespace torch_tpu::ir
