// Graph::to_stablehlo: the module text, the printer table (one row per IR op) and literal
// formatting. Ops print in MLIR generic form ("stablehlo.add"(...) : (...) -> ...), which
// every StableHLO parser accepts and `mlir-opt --allow-unregistered-dialect` can check;
// the custom pretty forms drift between StableHLO versions (shared/notes/pjrt.md §4.4).
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "ir/printer_internal.h"

namespace torch_tpu::ir {
namespace printer {

std::string tensor_type(const Shape& s, DType t) {
  std::string r = "tensor<";
  for (int64_t d : s) r += std::to_string(d) + "x";
  return r + dtype_name(t) + ">";
}

std::string i64_array(const std::vector<int64_t>& v) {
  if (v.empty()) return "array<i64>";
  std::string r = "array<i64: ";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + ">";
}

namespace {

// Hex bit patterns of NaN, +inf, -inf: the only way to write them in a dense literal.
struct FloatBits {
  DType t;
  const char *nan, *inf, *ninf;
};
constexpr FloatBits kFloatBits[] = {
    {DType::F16, "0x7E00", "0x7C00", "0xFC00"},
    {DType::BF16, "0x7FC0", "0x7F80", "0xFF80"},
    {DType::F32, "0x7FC00000", "0x7F800000", "0xFF800000"},
    {DType::F64, "0x7FF8000000000000", "0x7FF0000000000000", "0xFFF0000000000000"},
};

std::string float_literal(double v, DType t) {
  const FloatBits* bits = nullptr;
  for (const FloatBits& b : kFloatBits)
    if (b.t == t) bits = &b;
  TPU_CHECK(bits, "[stablehlo] not a float type; got ", dtype_name(t));
  char buf[40];
  if (t == DType::F64) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  } else {
    // Round to f32 first, as the host kernels do; %.9g round-trips every f32.
    float f = static_cast<float>(v);
    if (t == DType::F16 && std::fabs(f) >= 65520.0f) f = f > 0 ? INFINITY : -INFINITY;
    v = f;
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  }
  if (std::isnan(v)) return bits->nan;
  if (std::isinf(v)) return v > 0 ? bits->inf : bits->ninf;
  std::string s = buf;
  // MLIR float literals need a '.': "1" -> "1.0", "1e+20" -> "1.0e+20".
  if (s.find('.') == std::string::npos) {
    size_t e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

bool is_unsigned(DType t) { return t == DType::U8 || t == DType::U64; }
int bits_of(DType t) { return static_cast<int>(dtype_size(t)) * 8; }

}  // namespace

std::string literal(DType t, double fv, int64_t iv) {
  if (is_float(t)) return float_literal(fv, t);
  if (is_bool(t)) return iv ? "true" : "false";
  if (is_unsigned(t)) {
    int w = bits_of(t);
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    return std::to_string(static_cast<uint64_t>(iv) & mask);
  }
  return std::to_string(iv);
}

std::string lowest(DType t) {
  if (is_float(t)) return literal(t, -INFINITY, 0);
  if (is_bool(t) || is_unsigned(t)) return literal(t, 0, 0);
  return std::to_string(static_cast<int64_t>(~0ull << (bits_of(t) - 1)));
}

std::string highest(DType t) {
  if (is_float(t)) return literal(t, INFINITY, 0);
  if (is_bool(t) || is_unsigned(t)) return literal(t, 0, -1);
  return std::to_string(static_cast<int64_t>(~0ull >> (65 - bits_of(t))));
}

std::string compare_attrs(Cmp dir, DType operand) {
  static const char* const kDirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  // compare_type follows the operand type, as XLA's own emitter does (i1 compares UNSIGNED).
  const char* type = is_float(operand)                          ? "FLOAT"
                     : (is_bool(operand) || is_unsigned(operand)) ? "UNSIGNED"
                                                                  : "SIGNED";
  return std::string("comparison_direction = #stablehlo<comparison_direction ") +
         kDirs[static_cast<int>(dir)] + ">, compare_type = #stablehlo<comparison_type " + type +
         ">";
}

Emitter::Emitter(const Graph& g) : g_(g), names_(g.nodes().size()) {
  for (size_t i = 0; i < names_.size(); ++i) {
    const Node& n = g.nodes()[i];
    names_[i] = n.is_param ? "%arg" + std::to_string(n.param_index) : "%" + std::to_string(i);
  }
}

std::string Emitter::type(int id) const {
  const Node& n = g_.nodes()[id];
  return tensor_type(n.shape, n.dtype);
}

std::string Emitter::line(const std::string& res, const std::string& op,
                          const std::vector<std::string>& args,
                          const std::vector<std::string>& arg_types, const std::string& attrs,
                          const std::string& result_type) {
  os_ << indent_ << res << " = \"" << (op.find('.') == std::string::npos ? "stablehlo." : "")
      << op << "\"(";
  for (size_t i = 0; i < args.size(); ++i) os_ << (i ? ", " : "") << args[i];
  os_ << ")";
  if (!attrs.empty()) os_ << " {" << attrs << "}";
  os_ << " : (";
  for (size_t i = 0; i < arg_types.size(); ++i) os_ << (i ? ", " : "") << arg_types[i];
  os_ << ") -> " << result_type << "\n";
  return res;
}

std::string Emitter::splat(int node, const std::string& lit, const Shape& s, DType t) {
  std::string ty = tensor_type(s, t);
  return tmp(node, "constant", {}, {}, "value = dense<" + lit + "> : " + ty, ty);
}

namespace {

// ---- The printer table: one row per IR op -----------------------------------------------
// A row gives the attribute dictionary of a plain one-line op (attrs), or a printer for
// ops that expand to several lines (emit). Unary/binary rows come from ops.def.
using AttrFn = std::string (*)(const Graph&, const Node&);
using EmitFn = void (*)(Emitter&, int);
struct Row {
  OpCode op;
  AttrFn attrs;
  EmitFn emit;
};

std::string compare_row_attrs(const Graph& g, const Node& n) {
  return compare_attrs(n.attrs.direction, g.nodes()[n.operands[0]].dtype);
}
std::string constant_attrs(const Graph&, const Node& n) {
  return "value = dense<" + literal(n.dtype, n.attrs.value, n.attrs.ivalue) +
         "> : " + tensor_type(n.shape, n.dtype);
}
std::string iota_attrs(const Graph&, const Node& n) {
  return "iota_dimension = " + std::to_string(n.attrs.dims.at(0)) + " : i64";
}
std::string broadcast_attrs(const Graph&, const Node& n) {
  return "broadcast_dimensions = " + i64_array(n.attrs.dims);
}
std::string transpose_attrs(const Graph&, const Node& n) { return "permutation = " + i64_array(n.attrs.dims); }
std::string slice_attrs(const Graph&, const Node& n) {
  return "start_indices = " + i64_array(n.attrs.start) + ", limit_indices = " +
         i64_array(n.attrs.limit) + ", strides = " + i64_array(n.attrs.stride);
}
std::string concat_attrs(const Graph&, const Node& n) {
  return "dimension = " + std::to_string(n.attrs.dims.at(0)) + " : i64";
}
std::string reverse_attrs(const Graph&, const Node& n) { return "dimensions = " + i64_array(n.attrs.dims); }

// A float converted to a narrow integer (u8, i8, i16) goes through i32, as PyTorch CPU's
// conversion does: XLA saturates out-of-range values (-4.4 -> u8 0), C++ on x86 truncates an
// int32 (-4.4 -> -4 -> u8 252), and the host runtime follows PyTorch.
void emit_convert(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  DType from = e.graph().nodes()[n.operands[0]].dtype;
  const std::string& x = e.name(n.operands[0]);
  if (is_float(from) && (n.dtype == DType::U8 || n.dtype == DType::I8 || n.dtype == DType::I16)) {
    std::string mid = tensor_type(n.shape, DType::I32);
    std::string w = e.tmp(id, "convert", {x}, {e.type(n.operands[0])}, "", mid);
    e.line(e.name(id), "convert", {w}, {mid}, "", e.type(id));
    return;
  }
  e.line(e.name(id), "convert", {x}, {e.type(n.operands[0])}, "", e.type(id));
}

// atan prints as atan2(2x, 2), which is exact (2x only overflows where atan is pi/2 anyway):
// the XLA CPU plugin 0.11.2 computes both "chlo.atan" and atan2(x, 1) wrongly on arrays of
// 64 or more elements (values passed through, signs flipped; its vectorized atan path), and
// atan2 is StableHLO proper. tests/python/test_pjrt.py checks elementwise ops at 4096 elements.
void emit_atan(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  std::string two = e.splat(id, literal(n.dtype, 2.0, 2), n.shape, n.dtype);
  std::string x2 = e.tmp(id, "multiply", {e.name(n.operands[0]), two}, {e.type(id), e.type(id)}, "", e.type(id));
  e.line(e.name(id), "atan2", {x2, two}, {e.type(id), e.type(id)}, "", e.type(id));
}

void emit_binary_min_max(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  emit_min_max(e, id, e.name(id), n.op == OpCode::Max ? "maximum" : "minimum", e.name(n.operands[0]),
               e.name(n.operands[1]), n.shape, n.dtype);
}

constexpr EmitFn unary_emit(OpCode op) { return op == OpCode::Atan ? emit_atan : nullptr; }
constexpr EmitFn binary_emit(OpCode op) { return op == OpCode::Max || op == OpCode::Min ? emit_binary_min_max : nullptr; }

constexpr Row kRows[] = {
#define UNARY(name, hlo, dt) {OpCode::name, nullptr, unary_emit(OpCode::name)},
#define BINARY(name, hlo, dt, traits) {OpCode::name, nullptr, binary_emit(OpCode::name)},
#include "ir/ops.def"
    {OpCode::Compare, compare_row_attrs, nullptr},
    {OpCode::Select, nullptr, nullptr},
    {OpCode::Clamp, nullptr, nullptr},
    {OpCode::Convert, nullptr, emit_convert},
    {OpCode::Constant, constant_attrs, nullptr},
    {OpCode::Iota, iota_attrs, nullptr},
    {OpCode::Broadcast, broadcast_attrs, nullptr},
    {OpCode::Reshape, nullptr, nullptr},
    {OpCode::Transpose, transpose_attrs, nullptr},
    {OpCode::Slice, slice_attrs, nullptr},
    {OpCode::Concat, concat_attrs, nullptr},
    {OpCode::Reverse, reverse_attrs, nullptr},
    {OpCode::Reduce, nullptr, emit_reduce},
    {OpCode::ArgMax, nullptr, emit_arg_reduce},
    {OpCode::ArgMin, nullptr, emit_arg_reduce},
    {OpCode::Dot, nullptr, emit_dot},
    {OpCode::RngUniform, nullptr, emit_rng},
    {OpCode::RngNormal, nullptr, emit_rng},
    {OpCode::Gather, nullptr, emit_gather},
    {OpCode::Scatter, nullptr, emit_scatter},
    {OpCode::ScatterAdd, nullptr, emit_scatter},
    {OpCode::ScatterReduce, nullptr, emit_scatter},
    {OpCode::Sort, nullptr, emit_sort},
    {OpCode::ArgSort, nullptr, emit_sort},
    {OpCode::Cumsum, nullptr, emit_scan},
    {OpCode::Cumprod, nullptr, emit_scan},
    {OpCode::TriangularSolve, triangular_solve_attrs, nullptr},
    {OpCode::CustomCall, nullptr, emit_custom_call},
    {OpCode::Convolution, nullptr, emit_conv},
    {OpCode::ReduceWindow, nullptr, emit_reduce_window},
    {OpCode::OptimizationBarrier, nullptr, nullptr},
};

const Row& row_for(OpCode op) {
  for (const Row& r : kRows)
    if (r.op == op) return r;
  TPU_UNIMPLEMENTED("[stablehlo] no printer row for op ", op_info(op).name);
}

void emit_node(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  const Row& row = row_for(n.op);
  if (row.emit) return row.emit(e, id);
  std::vector<std::string> args, types;
  for (int o : n.operands) {
    args.push_back(e.name(o));
    types.push_back(e.type(o));
  }
  std::string attrs = row.attrs ? row.attrs(e.graph(), n) : "";
  e.line(e.name(id), op_info(n.op).hlo, args, types, attrs, e.type(id));
}

}  // namespace
}  // namespace printer

std::string Graph::to_stablehlo(const std::vector<int>& aliases) const {
  verify();
  TPU_CHECK(aliases.empty() || aliases.size() == static_cast<size_t>(num_params_),
            "[stablehlo] aliases need one entry per parameter; got ", aliases.size(), ", expected ", num_params_);
  printer::Emitter e(*this);
  std::ostringstream head;
  head << "module @main {\n  func.func public @main(";
  for (size_t i = 0, k = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].is_param) continue;
    head << (k++ ? ", " : "") << e.name(i) << ": " << e.type(i);
    int out = aliases.empty() ? -1 : aliases[nodes_[i].param_index];
    if (out >= 0) head << " {tf.aliasing_output = " << out << " : i32}";
  }
  head << ") -> (";
  for (size_t i = 0; i < outputs_.size(); ++i) head << (i ? ", " : "") << e.type(outputs_[i].id);
  head << ") {\n";
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (!nodes_[i].is_param) printer::emit_node(e, static_cast<int>(i));
  std::ostringstream tail;
  tail << "    return ";
  for (size_t i = 0; i < outputs_.size(); ++i) tail << (i ? ", " : "") << e.name(outputs_[i].id);
  tail << " : ";
  for (size_t i = 0; i < outputs_.size(); ++i) tail << (i ? ", " : "") << e.type(outputs_[i].id);
  tail << "\n  }\n}\n";
  return head.str() + e.out().str() + tail.str();
}

}  // namespace torch_tpu::ir
