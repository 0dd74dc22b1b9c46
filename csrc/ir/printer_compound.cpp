// StableHLO printers for the IR ops that expand to more than one line: reduce (with its
// reducer region), argmax/argmin (a variadic reduce over (value, index)), dot_general
// (with f32 accumulation for 16-bit floats) and the rng ops (rng_bit_generator + bit
// manipulation). Rows in printer.cpp point here.
#include "base/error.h"
#include "ir/printer_internal.h"

namespace torch_tpu::ir::printer {
namespace {

std::string scalar(DType t) { return tensor_type({}, t); }

// The reducer op and its identity (the init value of stablehlo.reduce).
struct ReducerInfo {
  const char* op;
  std::string init;
};
ReducerInfo reducer_info(Reducer r, DType t) {
  switch (r) {
    case Reducer::Sum: return {"add", literal(t, 0, 0)};
    case Reducer::Prod: return {"multiply", literal(t, 1, 1)};
    case Reducer::Max: return {"maximum", lowest(t)};
    case Reducer::Min: return {"minimum", highest(t)};
    case Reducer::And: return {"and", literal(t, 0, -1)};
    case Reducer::Or: return {"or", literal(t, 0, 0)};
  }
  TPU_CHECK(false, "[stablehlo] unknown reducer ", static_cast<int>(r));
  return {};
}

}  // namespace

void emit_min_max(Emitter& e, int id, const std::string& res, const char* op, const std::string& a,
                  const std::string& b, const Shape& s, DType t) {
  std::string ty = tensor_type(s, t);
  if (!is_float(t)) {
    e.line(res, op, {a, b}, {ty, ty}, "", ty);
    return;
  }
  std::string bt = tensor_type(s, DType::Bool);
  std::string m = e.tmp(id, op, {a, b}, {ty, ty}, "", ty);
  std::string a_nan = e.tmp(id, "compare", {a, a}, {ty, ty}, compare_attrs(Cmp::NE, t), bt);
  std::string m2 = e.tmp(id, "select", {a_nan, a, m}, {bt, ty, ty}, "", ty);
  std::string b_nan = e.tmp(id, "compare", {b, b}, {ty, ty}, compare_attrs(Cmp::NE, t), bt);
  e.line(res, "select", {b_nan, b, m2}, {bt, ty, ty}, "", ty);
}

// Opens a region `({ ^bb0(args):` and returns the block argument names.
std::vector<std::string> open_region(Emitter& e, int id, const std::vector<std::string>& types) {
  std::vector<std::string> args;
  e.out() << "({\n" << std::string(e.indent(), ' ') << "^bb0(";
  for (size_t i = 0; i < types.size(); ++i) {
    args.push_back(e.fresh(id));
    e.out() << (i ? ", " : "") << args.back() << ": " << types[i];
  }
  e.out() << "):\n";
  e.set_indent(e.indent() + 2);
  return args;
}

// Writes `"stablehlo.return"(vals)`, closes the region and starts the op's tail.
void close_region(Emitter& e, const std::vector<std::string>& vals, const std::string& type) {
  e.out() << std::string(e.indent(), ' ') << "\"stablehlo.return\"(";
  for (size_t i = 0; i < vals.size(); ++i) e.out() << (i ? ", " : "") << vals[i];
  e.out() << ") : (";
  for (size_t i = 0; i < vals.size(); ++i) e.out() << (i ? ", " : "") << type;
  e.set_indent(e.indent() - 2);
  e.out() << ") -> ()\n" << std::string(e.indent(), ' ') << "})";
}

// Writes the operand list and types of a reduce and its result types.
void reduce_tail(Emitter& e, const std::vector<int64_t>& dims, const std::vector<std::string>& in,
                 const std::vector<std::string>& out) {
  e.out() << " {dimensions = " << i64_array(dims) << "} : (";
  for (size_t i = 0; i < in.size(); ++i) e.out() << (i ? ", " : "") << in[i];
  e.out() << ") -> ";
  if (out.size() > 1) e.out() << "(";
  for (size_t i = 0; i < out.size(); ++i) e.out() << (i ? ", " : "") << out[i];
  e.out() << (out.size() > 1 ? ")\n" : "\n");
}

void begin_op(Emitter& e, const std::string& res, const char* op,
              const std::vector<std::string>& args) {
  e.out() << std::string(e.indent(), ' ') << res << " = \"stablehlo." << op << "\"(";
  for (size_t i = 0; i < args.size(); ++i) e.out() << (i ? ", " : "") << args[i];
  e.out() << ") ";
}

void emit_reduce(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  int x = n.operands[0];
  DType t = n.dtype;
  ReducerInfo r = reducer_info(n.attrs.reducer, t);
  std::string s = scalar(t);
  std::string init = e.splat(id, r.init, {}, t);
  begin_op(e, e.name(id), "reduce", {e.name(x), init});
  auto a = open_region(e, id, {s, s});
  std::string v;
  if (n.attrs.reducer == Reducer::Max || n.attrs.reducer == Reducer::Min) {
    v = e.fresh(id);
    emit_min_max(e, id, v, r.op, a[0], a[1], {}, t);
  } else {
    v = e.tmp(id, r.op, {a[0], a[1]}, {s, s}, "", s);
  }
  close_region(e, {v}, s);
  reduce_tail(e, n.attrs.dims, {e.type(x), s}, {e.type(id)});
}

// Reduces (value, index) pairs; the pick is a total order in which NaN is the extreme (as
// torch.argmax/argmin propagate NaN) and ties go to the lower index, so the reducer is
// associative and commutative as stablehlo.reduce requires.
void emit_arg_reduce(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  const Node& xn = e.graph().nodes()[n.operands[0]];
  bool is_max = n.op == OpCode::ArgMax;
  DType t = xn.dtype;
  int64_t dim = n.attrs.dims.at(0);
  std::string vs = scalar(t), is = scalar(DType::I64), bs = scalar(DType::Bool);
  std::string idx = e.tmp(id, "iota", {}, {}, "iota_dimension = " + std::to_string(dim) + " : i64",
                          tensor_type(xn.shape, DType::I64));
  std::string v0 = e.splat(id, is_max ? lowest(t) : highest(t), {}, t);
  std::string i0 = e.splat(id, "0", {}, DType::I64);
  std::string res = e.fresh(id);
  begin_op(e, res + ":2", "reduce", {e.name(n.operands[0]), idx, v0, i0});
  auto a = open_region(e, id, {vs, is, vs, is});
  auto cmp = [&](Cmp c, const std::string& l, const std::string& r, const std::string& ty,
                 DType dt) { return e.tmp(id, "compare", {l, r}, {ty, ty}, compare_attrs(c, dt), bs); };
  auto logic = [&](const char* op, const std::string& l, const std::string& r) {
    return e.tmp(id, op, {l, r}, {bs, bs}, "", bs);
  };
  std::string pick = cmp(is_max ? Cmp::GT : Cmp::LT, a[0], a[2], vs, t);
  std::string tie = cmp(Cmp::EQ, a[0], a[2], vs, t);
  if (is_float(t)) {
    std::string xnan = cmp(Cmp::NE, a[0], a[0], vs, t), ynan = cmp(Cmp::NE, a[2], a[2], vs, t);
    std::string ynum = e.tmp(id, "not", {ynan}, {bs}, "", bs);
    pick = logic("or", pick, logic("and", xnan, ynum));
    tie = logic("or", tie, logic("and", xnan, ynan));
  }
  std::string lower = cmp(Cmp::LT, a[1], a[3], is, DType::I64);
  std::string pick_idx = logic("or", pick, logic("and", tie, lower));
  std::string v = e.tmp(id, "select", {pick, a[0], a[2]}, {bs, vs, vs}, "", vs);
  std::string i = e.tmp(id, "select", {pick_idx, a[1], a[3]}, {bs, is, is}, "", is);
  e.out() << std::string(e.indent(), ' ') << "\"stablehlo.return\"(" << v << ", " << i
          << ") : (" << vs << ", " << is << ") -> ()\n";
  e.set_indent(e.indent() - 2);
  e.out() << std::string(e.indent(), ' ') << "})";
  reduce_tail(e, n.attrs.dims, {tensor_type(xn.shape, t),
                                tensor_type(xn.shape, DType::I64), vs, is},
              {tensor_type(n.shape, t), e.type(id)});
  e.set_name(id, res + "#1");
}

void emit_dot(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  const Attrs& a = n.attrs;
  std::string dims;
  auto field = [&](const char* name, const std::vector<int64_t>& v) {
    if (v.empty()) return;  // StableHLO omits empty dimension lists
    dims += std::string(dims.empty() ? "" : ", ") + name + " = [";
    for (size_t i = 0; i < v.size(); ++i) dims += (i ? ", " : "") + std::to_string(v[i]);
    dims += "]";
  };
  field("lhs_batching_dimensions", a.lhs_batch);
  field("rhs_batching_dimensions", a.rhs_batch);
  field("lhs_contracting_dimensions", a.lhs_contract);
  field("rhs_contracting_dimensions", a.rhs_contract);
  static const char* const kPrec[] = {"DEFAULT", "HIGH", "HIGHEST"};
  std::string p = std::string("#stablehlo<precision ") + kPrec[static_cast<int>(a.precision)] + ">";
  std::string attrs = "dot_dimension_numbers = #stablehlo.dot<" + dims +
                      ">, precision_config = [" + p + ", " + p + "]";
  int l = n.operands[0], r = n.operands[1];
  // 16-bit floats accumulate in f32 (the IR's contract), then round once.
  bool widen = n.dtype == DType::F16 || n.dtype == DType::BF16;
  std::string acc = widen ? e.fresh(id) : e.name(id);
  std::string acc_type = tensor_type(n.shape, widen ? DType::F32 : n.dtype);
  e.line(acc, "dot_general", {e.name(l), e.name(r)}, {e.type(l), e.type(r)}, attrs, acc_type);
  if (widen) e.line(e.name(id), "convert", {acc}, {acc_type}, "", e.type(id));
}

namespace {

// Uniform [0, 1) floats of shape s and float type t from the Philox bits of `state`: the
// top mantissa bits OR'ed into the exponent of 1.0 give [1, 2), minus 1 (exact, never 1.0).
// Sets `next` to the output state. `res` names the result ("" = a temporary).
std::string uniform(Emitter& e, int id, const std::string& state, std::string& next,
                    const Shape& s, DType t, const std::string& res) {
  struct Bits {
    DType f;
    int width, mantissa;
    const char* one;  // the bits of 1.0
  };
  static const Bits kBits[] = {{DType::F16, 16, 10, "15360"},
                               {DType::BF16, 16, 7, "16256"},
                               {DType::F32, 32, 23, "1065353216"},
                               {DType::F64, 64, 52, "4607182418800017408"}};
  const Bits* b = &kBits[0];
  while (b->f != t) ++b;
  // The unsigned integer type of t's width (ui16/ui32 are not IR dtypes).
  std::string ut = tensor_type(s, DType::U64);
  ut.replace(ut.rfind("ui64"), 4, "ui" + std::to_string(b->width));
  std::string st = tensor_type({2}, DType::U64), ft = tensor_type(s, t);
  std::string gen = e.fresh(id);
  e.line(gen + ":2", "rng_bit_generator", {state}, {st},
         "rng_algorithm = #stablehlo<rng_algorithm PHILOX>", "(" + st + ", " + ut + ")");
  next = gen + "#0";
  auto constant = [&](const std::string& lit) {
    return e.tmp(id, "constant", {}, {}, "value = dense<" + lit + "> : " + ut, ut);
  };
  std::string shift = constant(std::to_string(b->width - b->mantissa));
  std::string top = e.tmp(id, "shift_right_logical", {gen + "#1", shift}, {ut, ut}, "", ut);
  std::string mant = e.tmp(id, "or", {top, constant(b->one)}, {ut, ut}, "", ut);
  std::string in12 = e.tmp(id, "bitcast_convert", {mant}, {ut}, "", ft);
  std::string one = e.splat(id, literal(t, 1.0, 1), s, t);
  return e.line(res.empty() ? e.fresh(id) : res, "subtract", {in12, one}, {ft, ft}, "", ft);
}

}  // namespace

// rng_uniform: `uniform` in the node's type. rng_normal: Box-Muller on two uniforms,
// sqrt(-2 log(1 - u1)) * cos(2 pi u2), computed in f32 (f64 for f64) and rounded once.
void emit_rng(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  std::string state = e.name(n.operands[0]), next, unused;
  if (n.op == OpCode::RngUniform) {
    uniform(e, id, state, next, n.shape, n.dtype, e.name(id));
    return;
  }
  DType work = n.dtype == DType::F64 ? DType::F64 : DType::F32;
  bool narrow = work != n.dtype;
  std::string wt = tensor_type(n.shape, work);
  std::string u1 = uniform(e, id, state, next, n.shape, work, "");
  std::string u2 = uniform(e, id, next, unused, n.shape, work, "");
  auto bin = [&](const char* op, const std::string& l, const std::string& r,
                 const std::string& res = "") {
    return e.line(res.empty() ? e.fresh(id) : res, op, {l, r}, {wt, wt}, "", wt);
  };
  auto un = [&](const char* op, const std::string& x) { return e.tmp(id, op, {x}, {wt}, "", wt); };
  std::string one = e.splat(id, literal(work, 1.0, 1), n.shape, work);
  std::string m2 = e.splat(id, literal(work, -2.0, -2), n.shape, work);
  std::string tau = e.splat(id, literal(work, 6.283185307179586, 6), n.shape, work);
  std::string r = un("sqrt", bin("multiply", m2, un("log", bin("subtract", one, u1))));
  std::string z = bin("multiply", r, un("cosine", bin("multiply", tau, u2)),
                      narrow ? "" : e.name(id));
  if (narrow) e.line(e.name(id), "convert", {z}, {wt}, "", e.type(id));
}

}  // namespace torch_tpu::ir::printer
