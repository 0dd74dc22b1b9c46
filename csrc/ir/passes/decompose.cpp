// decompose_composites: the graph copy that replaces each tpu.* node by StableHLO/CHLO ops,
// the emitter helpers, and the small lowerings (hypot, erfcx, gcd). Bessel / Airy functions
// are in decompose_special.cpp, the orthogonal polynomials in decompose_poly.cpp.
#include "ir/passes/decompose.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "ir/passes/decompose_internal.h"

namespace torch_tpu::ir {
namespace decomp {

Value Ew::is_inf(Value a) const {
  return eq(abs(a), c(std::numeric_limits<double>::infinity()));
}

Value Ew::horner(const double* coef, size_t n, Value z, bool lead_one) const {
  Value r = lead_one ? add(z, c(coef[0])) : c(coef[0]);
  for (size_t i = 1; i < n; ++i) r = add(mul(r, z), c(coef[i]));
  return r;
}

Value Ew::chbevl(Value x, const double* coef, size_t n) const {
  // b0 = x*b1 - b2 + c[i], starting b0 = c[0], b1 = b2 = 0; result (b0 - b2) / 2.
  Value b0 = c(coef[0]), b1 = c(0), b2 = c(0);
  for (size_t i = 1; i < n; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = add(sub(mul(x, b1), b2), c(coef[i]));
  }
  return mul(c(0.5), sub(b0, b2));
}

namespace {

// std::hypot without overflow: max * sqrt(1 + (min/max)^2); +inf if either is inf (even
// with a NaN, as C's hypot), 0 when both are 0, NaN otherwise propagated by max.
Value hypot(const Ew& e, Value a, Value b) {
  Value ax = e.abs(a), ay = e.abs(b);
  Value m = e.bin(OpCode::Max, ax, ay), mn = e.bin(OpCode::Min, ax, ay);
  Value r = e.div(mn, m);
  Value h = e.mul(m, e.sqrt(e.add(e.c(1), e.mul(r, r))));
  h = e.sel(e.eq(m, e.c(0)), e.c(0), h);
  return e.sel(e.lor(e.is_inf(a), e.is_inf(b)), e.c(std::numeric_limits<double>::infinity()), h);
}

// The host's erfcx (special_math.h) in f64: exp(x^2) erfc(x) for x < 26 (NaN goes to the
// other branch and stays NaN), else 1/(x sqrt(pi)) times the asymptotic series in 1/x^2.
Value erfcx(const Ew& e, Value x) {
  Value xx = e.mul(x, x);
  Value small = e.mul(e.exp(xx), e.un(OpCode::Erfc, x));
  Value r = e.div(e.c(1), xx);
  Value s = e.add(e.sub(e.c(1), e.div(r, e.c(2))), e.div(e.mul(e.mul(e.c(3), r), r), e.c(4)));
  s = e.sub(s, e.div(e.mul(e.mul(e.mul(e.c(15), r), r), r), e.c(8)));
  Value big = e.div(s, e.mul(x, e.c(std::sqrt(3.14159265358979323846))));
  return e.sel(e.lt(x, e.c(26)), small, big);
}

// Euclid steps that suffice for every pair of the width (Lame: the worst case is a pair of
// consecutive Fibonacci numbers; counted for magnitudes up to 2^(w-1) signed, 2^w - 1
// unsigned, either order). gcd_test checks these worst cases.
int gcd_steps(DType t) {
  switch (t) {
    case DType::U8: return 12;
    case DType::I8: return 10;
    case DType::I16: return 22;
    case DType::I32: return 45;
    case DType::I64: return 91;
    case DType::U64: return 92;
    default: break;
  }
  TPU_CHECK(false, "[decompose] gcd of an unsupported dtype; got ", dtype_name(t),
            ", expected an integer dtype");
  return 0;
}

// std::gcd as the host computes it (int64 / uint64, result cast back): Euclid on the signed
// values with the truncating remainder (|a % b| = |a| mod |b|), then |result|, which wraps
// to INT_MIN exactly when the host's cast of 2^(w-1) does (gcd(INT_MIN, 0) = INT_MIN).
Value gcd(const Ew& e, Value a, Value b) {
  Value zero = e.c(0);
  for (int i = 0, steps = gcd_steps(e.t); i < steps; ++i) {
    Value nz = e.ne(b, zero);
    Value r = e.bin(OpCode::Rem, a, b);
    a = e.sel(nz, b, a);
    b = e.sel(nz, r, b);
  }
  bool is_unsigned = e.t == DType::U8 || e.t == DType::U64;
  return is_unsigned ? a : e.abs(a);
}

DType compute_dtype(OpCode op, DType t) {
  if (op == OpCode::Erfcx) return DType::F64;
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

// One composite node: operands converted to the compute dtype (16-bit floats through f32,
// as the host widens them), the family's lowering, the result rounded back (f64 -> f32 ->
// 16-bit, the host's two roundings).
Value lower(Graph& g, const Node& n, std::vector<Value> in) {
  DType t = n.dtype, ct = compute_dtype(n.op, t);
  Ew e{g, n.shape, ct};
  for (Value& v : in) v = g.convert(g.convert(v, is_float(t) && t != DType::F64 ? DType::F32 : t), ct);
  Value r;
  switch (n.op) {
    case OpCode::Gcd: r = gcd(e, in[0], in[1]); break;
    case OpCode::Hypot: r = hypot(e, in[0], in[1]); break;
    case OpCode::Erfcx: r = erfcx(e, in[0]); break;
    case OpCode::AiryAi: r = airy_ai(e, in[0]); break;
    case OpCode::BesselJ0: case OpCode::BesselJ1: case OpCode::BesselY0: case OpCode::BesselY1:
    case OpCode::BesselI0: case OpCode::BesselI1: case OpCode::BesselK0: case OpCode::BesselK1:
      r = bessel(e, n.op, in[0]);
      break;
    default:
      TPU_CHECK(n.operands.size() == 2, "[decompose] no decomposition for ", op_info(n.op).hlo,
                "; got ", n.operands.size(), " operands, expected a known composite");
      r = orthogonal_poly(e, n.op, in[0], in[1]);
      break;
  }
  if (ct == DType::F64 && t != DType::F64) r = g.convert(r, DType::F32);
  return g.convert(r, t);
}

}  // namespace
}  // namespace decomp

bool is_composite(OpCode op) { return std::strncmp(op_info(op).hlo, "tpu.", 4) == 0; }

bool has_composites(const Graph& g) {
  for (const Node& n : g.nodes())
    if (!n.is_param && is_composite(n.op)) return true;
  return false;
}

std::vector<std::string> undecomposable_ops(const Graph&) {
  // Every tpu.* row of ops.def has a decomposition (decompose_test checks each one).
  return {};
}

int64_t max_exact_degree(OpCode op, DType) {
  return (op == OpCode::LaguerreL || op == OpCode::LegendreP) ? kPolyMaxDegree : -1;
}

Graph decompose_composites(const Graph& g) {
  Graph out;
  std::vector<Value> remap(g.nodes().size());
  for (size_t id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.nodes()[id];
    if (n.is_param) {
      remap[id] = out.param(n.dtype, n.shape);
      continue;
    }
    std::vector<Value> ops;
    for (int o : n.operands) ops.push_back(remap[o]);
    remap[id] = is_composite(n.op) ? decomp::lower(out, n, std::move(ops))
                                   : out.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
  }
  std::vector<Value> outs;
  for (Value v : g.outputs()) outs.push_back(remap[v.id]);
  out.set_outputs(std::move(outs));
  out.verify();
  return out;
}

}  // namespace torch_tpu::ir
