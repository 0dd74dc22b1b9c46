// StableHLO printers of the windowed ops: convolution (canonical dimension numbers, f32
// accumulation for 16-bit floats as dot_general) and reduce_window (the reducer's identity
// as init value, one region).
#include "base/error.h"
#include "ir/printer_internal.h"

namespace torch_tpu::ir::printer {
namespace {

// dense<[[lo, hi], ...]> : tensor<Rx2xi64>
std::string padding(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  std::string r = "dense<";
  if (lo.empty()) return r + "> : tensor<0x2xi64>";
  r += "[";
  for (size_t i = 0; i < lo.size(); ++i)
    r += std::string(i ? ", " : "") + "[" + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  return r + "]> : tensor<" + std::to_string(lo.size()) + "x2xi64>";
}

}  // namespace

void emit_conv(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  const Attrs& a = n.attrs;
  size_t s = n.shape.size() - 2;
  std::string sp;
  for (size_t i = 0; i < s; ++i) sp += ", " + std::to_string(i);
  std::string dn = "#stablehlo.conv<[b, f" + sp + "]x[" + (a.kernel_transposed ? "i, o" : "o, i") + sp +
                   "]->[" + (a.result_transposed ? "f, b" : "b, f") + sp + "]>";
  static const char* const kPrec[] = {"DEFAULT", "HIGH", "HIGHEST"};
  std::string p = std::string("#stablehlo<precision ") + kPrec[static_cast<int>(a.precision)] + ">";
  std::string attrs = "batch_group_count = 1 : i64, dimension_numbers = " + dn +
                      ", feature_group_count = " + std::to_string(a.groups) +
                      " : i64, lhs_dilation = " + i64_array(a.lhs_dilation) +
                      ", padding = " + padding(a.pad_lo, a.pad_hi) + ", precision_config = [" + p +
                      ", " + p + "], rhs_dilation = " + i64_array(a.rhs_dilation) +
                      ", window_strides = " + i64_array(a.window_strides);
  int l = n.operands[0], r = n.operands[1];
  std::string kernel = e.name(r);
  if (a.kernel_reversed) {  // a reverse of the kernel (XLA's support of window_reversal varies)
    std::vector<int64_t> dims;
    for (size_t i = 0; i < s; ++i) dims.push_back(2 + static_cast<int64_t>(i));
    kernel = e.tmp(id, "reverse", {kernel}, {e.type(r)}, "dimensions = " + i64_array(dims), e.type(r));
  }
  bool widen = n.dtype == DType::F16 || n.dtype == DType::BF16;
  std::string acc = widen ? e.fresh(id) : e.name(id);
  std::string acc_type = tensor_type(n.shape, widen ? DType::F32 : n.dtype);
  e.line(acc, "convolution", {e.name(l), kernel}, {e.type(l), e.type(r)}, attrs, acc_type);
  if (widen) e.line(e.name(id), "convert", {acc}, {acc_type}, "", e.type(id));
}

void emit_reduce_window(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  const Attrs& a = n.attrs;
  int x = n.operands[0];
  DType t = n.dtype;
  std::string s = tensor_type({}, t);
  const char* op = a.reducer == Reducer::Sum ? "add" : a.reducer == Reducer::Max ? "maximum" : "minimum";
  std::string init_lit = a.reducer == Reducer::Sum ? literal(t, 0, 0)
                         : a.reducer == Reducer::Max ? lowest(t)
                                                     : highest(t);
  std::string init = e.splat(id, init_lit, {}, t);
  begin_op(e, e.name(id), "reduce_window", {e.name(x), init});
  auto args = open_region(e, id, {s, s});
  std::string v;
  if (a.reducer == Reducer::Sum) {
    v = e.tmp(id, op, {args[0], args[1]}, {s, s}, "", s);
  } else {
    v = e.fresh(id);
    emit_min_max(e, id, v, op, args[0], args[1], {}, t);
  }
  close_region(e, {v}, s);
  e.out() << " {base_dilations = " << i64_array(a.lhs_dilation)
          << ", padding = " << padding(a.pad_lo, a.pad_hi)
          << ", window_dilations = " << i64_array(a.rhs_dilation)
          << ", window_dimensions = " << i64_array(a.window)
          << ", window_strides = " << i64_array(a.window_strides) << "} : (" << e.type(x) << ", "
          << s << ") -> " << e.type(id) << "\n";
}

}  // namespace torch_tpu::ir::printer
