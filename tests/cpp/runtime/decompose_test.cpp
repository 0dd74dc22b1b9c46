// decompose_composites (ir/passes/decompose.h): each tpu.* op, every dtype it accepts, run
// on the host runtime twice, as the host's own kernel (the reference) and decomposed into
// StableHLO ops, on inputs that reach every branch; the results must agree within the
// per-op tolerance below, and the decomposed graph must print without any "tpu." op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "ir/passes/decompose.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double eps(DType t) {
  switch (t) {
    case DType::F16: return 0x1p-10;
    case DType::BF16: return 0x1p-7;
    case DType::F32: return 0x1p-23;
    default: return 0x1p-52;
  }
}

// Allowed |decomposed - host| = ulps * eps(dtype) * max(|host|, floor): `floor` turns the
// bound into an absolute one where the function crosses zero (J, Y, Chebyshev, ...).
struct Tol {
  double ulps;
  double floor;
};

Graph single_op(OpCode op, DType t, int64_t n, int arity) {
  Graph g;
  Value a = g.param(t, {n});
  Value r = arity == 1 ? g.unary(op, a) : g.binary(op, a, g.param(t, {n}));
  g.set_outputs({r});
  return g;
}

// Runs op on (a[i], b[i]) both ways; returns the largest error in units of eps * scale.
double compare(OpCode op, DType t, const std::vector<double>& a, const std::vector<double>& b, Tol tol,
               const std::function<bool(double, double)>& skip = nullptr) {
  const int arity = b.empty() ? 1 : 2;
  const int64_t n = static_cast<int64_t>(a.size());
  Graph g = single_op(op, t, n, arity);
  Graph d = ir::decompose_composites(g);
  EXPECT_FALSE(ir::has_composites(d)) << ir::op_info(op).hlo;
  EXPECT_EQ(d.to_stablehlo().find("tpu."), std::string::npos) << ir::op_info(op).hlo;
  std::vector<Tensor> in = {make(t, {n}, [&](int64_t i) { return a[i]; })};
  if (arity == 2) in.push_back(make(t, {n}, [&](int64_t i) { return b[i]; }));
  Tensor ref = run(g, in)[0], got = run(d, in)[0];
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = in[0].get(i), y = arity == 2 ? in[1].get(i) : 0.0;
    if (skip && skip(x, y)) continue;
    double r = ref.get(i), v = got.get(i);
    if ((std::isnan(r) && std::isnan(v)) || r == v) continue;
    double err = std::abs(v - r) / (eps(t) * std::max(std::abs(r), tol.floor));
    if (std::isnan(err)) err = kInf;
    worst = std::max(worst, err);
    EXPECT_LE(err, tol.ulps) << "[decompose] " << ir::op_info(op).hlo << " " << ir::dtype_name(t) << " at ("
                             << x << ", " << y << "); got " << v << ", expected " << r;
  }
  std::printf("[decompose] %-34s %-4s max error %.3g ulp (of max(|host|, %g))\n", ir::op_info(op).hlo,
              ir::dtype_name(t), worst, tol.floor);
  return worst;
}

const std::vector<DType> kFloats = {DType::F32, DType::F64, DType::BF16, DType::F16};

// Special values, branch points of every unary approximation, and a dense sweep.
std::vector<double> unary_inputs() {
  std::vector<double> v = {0.0, -0.0, 1e-30, 1e-8, 1e-5, 2e-5, 0.1, 0.5, 1, 2, 2.0899, 2.09, 2.0901, 3, 4.99,
                           5, 5.01, 7.99, 8, 8.01, 10, 20, 25.9, 26, 27, 40, 60, 88, 89, 92, 100, 103.8, 104,
                           300, 700, 711, 720, 1e5, 1e10, 1e30, kInf, kNaN};
  size_t base = v.size();
  for (size_t i = 1; i < base; ++i) v.push_back(-v[i]);
  for (int i = -600; i <= 600; ++i) v.push_back(i * 0.05 + 0.0123);
  return v;
}

struct UnaryCase {
  OpCode op;
  Tol f32, f64, half;
};

TEST(Decompose, UnarySpecialFunctions) {
  // f32 evaluates Cephes in f32 against the host's f64 libstdc++ value rounded once: a few
  // ulp; J/Y (and Ai for x < 0) oscillate, so near a zero the bound is absolute (floor).
  const std::vector<UnaryCase> cases = {
      {OpCode::Erfcx, {1, 1e-300}, {1, 1e-300}, {1, 1e-30}},
      // f64 J/Y: the reference (libstdc++) itself is off by up to ~7e-12 for x >= 27 (at
      // 700 and 1e10 the decomposition matches mpmath to 15 digits, the host does not).
      {OpCode::BesselJ0, {8, 0.25}, {2e5, 0.25}, {1, 0.25}},
      {OpCode::BesselJ1, {8, 0.25}, {2e5, 0.25}, {1, 0.25}},
      {OpCode::BesselY0, {32, 0.25}, {2e5, 0.25}, {1, 0.25}},
      {OpCode::BesselY1, {32, 0.25}, {2e5, 0.25}, {1, 0.25}},
      // f64 I: the host is off by up to 5e-14 relative for x > 15 (I0(26), I0(711): the
      // decomposition matches mpmath, the host does not).
      {OpCode::BesselI0, {8, 1e-300}, {512, 1e-300}, {1, 1e-30}},
      {OpCode::BesselI1, {16, 1e-300}, {512, 1e-300}, {1, 1e-30}},
      {OpCode::BesselK0, {8, 1e-38}, {16, 1e-300}, {1, 1e-30}},
      {OpCode::BesselK1, {8, 1e-38}, {16, 1e-300}, {1, 1e-30}},
      {OpCode::AiryAi, {8, 0.1}, {8, 0.1}, {1, 0.1}},
  };
  std::vector<double> x = unary_inputs(), x_ik;
  // Past 720 the host's I/K kernels (libstdc++) lose digits; overflow, underflow and +-inf
  // (NaN for I, as PyTorch's Cephes kernels) are checked at a few points.
  for (double v : x)
    if (!(std::abs(v) > 720)) x_ik.push_back(v);
  for (double v : {1e9, -1e9, 2147483647.0, kInf, -kInf}) x_ik.push_back(v);
  for (const UnaryCase& c : cases)
    for (DType t : kFloats) {
      Tol tol = t == DType::F32 ? c.f32 : t == DType::F64 ? c.f64 : c.half;
      bool ik = c.op >= OpCode::BesselI0 && c.op <= OpCode::BesselK1;
      compare(c.op, t, ik ? x_ik : x, {}, tol);
    }
}

TEST(Decompose, Hypot) {
  std::vector<double> a, b;
  const std::vector<double> v = {0, -0.0, 1e-310, 1e-40, 1e-20, 0.3, 1, 3, 4, 1e20, 1e38, 3e38, 1e300, kInf, -kInf, kNaN, -2.5};
  for (double x : v)
    for (double y : v) a.push_back(x), b.push_back(y);
  for (int i = 0; i < 400; ++i) a.push_back(std::sin(i) * std::exp(i % 40 - 20.0)), b.push_back(std::cos(3 * i) * 7);
  for (DType t : kFloats) compare(OpCode::Hypot, t, a, b, {2, 1e-300});
}

TEST(Decompose, Gcd) {
  for (DType t : {DType::U8, DType::I8, DType::I16, DType::I32, DType::I64, DType::U64}) {
    std::vector<int64_t> a, b;
    const int bits = static_cast<int>(ir::dtype_size(t) * 8);
    const bool is_signed = t != DType::U8 && t != DType::U64;
    const int64_t min = is_signed ? (bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1))) : 0;
    const int64_t max = bits == 64 ? (is_signed ? INT64_MAX : -1) : (int64_t{1} << (bits - (is_signed ? 1 : 0))) - 1;
    const std::vector<int64_t> v = {0, 1, -1, 2, 6, -9, 12, 35, 64, min, max, min + 1, max - 1};
    for (int64_t x : v)
      for (int64_t y : v) a.push_back(x), b.push_back(y);
    // Worst cases of Euclid: consecutive Fibonacci numbers that fit, both orders.
    uint64_t f0 = 1, f1 = 1;
    uint64_t limit = bits == 64 ? (is_signed ? (uint64_t{1} << 63) : ~uint64_t{0}) : (uint64_t{1} << (bits - (is_signed ? 1 : 0))) - 1;
    while (f1 <= limit - f0 && f0 + f1 <= limit) {
      uint64_t f2 = f0 + f1;
      a.push_back(static_cast<int64_t>(f2)), b.push_back(static_cast<int64_t>(f1));
      a.push_back(static_cast<int64_t>(f1)), b.push_back(static_cast<int64_t>(f2));
      if (is_signed) a.push_back(-static_cast<int64_t>(f1)), b.push_back(static_cast<int64_t>(f2));
      f0 = f1, f1 = f2;
    }
    for (int i = 0; i < 300; ++i) a.push_back(int64_t{1103515245} * i + 12345), b.push_back(int64_t{69069} * i * i + 7);
    const int64_t n = static_cast<int64_t>(a.size());
    Graph g = single_op(OpCode::Gcd, t, n, 2);
    Graph d = ir::decompose_composites(g);
    EXPECT_EQ(d.to_stablehlo().find("tpu."), std::string::npos);
    Tensor ta(t, {n}), tb(t, {n});
    for (int64_t i = 0; i < n; ++i) ta.seti(i, a[i]), tb.seti(i, b[i]);
    Tensor ref = run(g, {ta, tb})[0], got = run(d, {ta, tb})[0];
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (ref.geti(i) != got.geti(i) && bad++ < 5)
        ADD_FAILURE() << "[decompose] gcd " << ir::dtype_name(t) << " (" << ta.geti(i) << ", " << tb.geti(i)
                      << "); got " << got.geti(i) << ", expected " << ref.geti(i);
    std::printf("[decompose] tpu.gcd %-4s %lld pairs, %d differ\n", ir::dtype_name(t), static_cast<long long>(n), bad);
  }
}

const std::vector<double> kPolyX = {-3, -1.5, -1.0001, -1, -0.999, -0.7, -0.5, -0.1, 0, 0.1, 0.25, 0.3, 0.5, 0.7,
                                    0.75, 0.99, 1, 1.0001, 1.001, 1.5, 2, 5, 40, kNaN, kInf, -kInf, 1e-7, -1e-7};
const std::vector<double> kPolyN = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 30, 63, 64, 65, 66, 100, 127, 128, 129, 200, 511,
                                    512, 513, 1000, 1e6, -1, -0.5, 0.5, 2.7, kNaN, kInf, -kInf, 1e19};

void poly_grid(std::vector<double>& a, std::vector<double>& b) {
  for (double x : kPolyX)
    for (double n : kPolyN) a.push_back(x), b.push_back(n);
}

TEST(Decompose, ChebyshevFamilies) {
  std::vector<double> a, b;
  poly_grid(a, b);
  for (OpCode op : {OpCode::ChebyshevT, OpCode::ChebyshevU, OpCode::ChebyshevV, OpCode::ChebyshevW,
                    OpCode::ShiftedChebyshevT, OpCode::ShiftedChebyshevU, OpCode::ShiftedChebyshevV,
                    OpCode::ShiftedChebyshevW})
    for (DType t : kFloats) {
      // n <= 64: the host's recurrence / trig form, op for op (a few ulp from cos / sin);
      // n > 64 at |y| > 1: cosh/sinh of n acosh|y|, whose argument carries ~n a ulp.
      compare(op, t, a, b, {512, 1}, [](double, double n) { return n > 64 && n < kInf; });
      compare(op, t, a, b, {t == DType::F64 ? 4e5 : 1e5, 1});
    }
}

TEST(Decompose, HermiteLaguerreLegendre) {
  std::vector<double> a, b;
  poly_grid(a, b);
  for (OpCode op : {OpCode::HermiteH, OpCode::HermiteHe, OpCode::LaguerreL, OpCode::LegendreP})
    for (DType t : kFloats) {
      bool bounded = op == OpCode::LaguerreL || op == OpCode::LegendreP;
      EXPECT_EQ(ir::max_exact_degree(op, t), bounded ? ir::kPolyMaxDegree : -1);
      auto above = [&](double, double n) { return bounded && n > ir::kPolyMaxDegree && n < 9.2e18; };
      compare(op, t, a, b, {512, 1}, above);
    }
}

// Above the bound Laguerre / Legendre give NaN, except where the host's special cases hold
// for every n (Laguerre at x == 0, Legendre at |x| == 1).
TEST(Decompose, LaguerreLegendreAboveBoundAreNaN) {
  for (OpCode op : {OpCode::LaguerreL, OpCode::LegendreP}) {
    std::vector<double> x = {0.3, -0.2, 0, 1, -1}, n(5, ir::kPolyMaxDegree + 1);
    Graph g = single_op(op, DType::F32, 5, 2);
    Tensor r = run(ir::decompose_composites(g), {make(DType::F32, {5}, [&](int64_t i) { return x[i]; }),
                                                 make(DType::F32, {5}, [&](int64_t i) { return n[i]; })})[0];
    EXPECT_TRUE(std::isnan(r.get(0)) && std::isnan(r.get(1)));
    if (op == OpCode::LaguerreL) EXPECT_EQ(r.get(2), 1);
    else EXPECT_TRUE(r.get(3) == 1 && r.get(4) == -1);
  }
}

TEST(Decompose, KeepsOtherNodesParamsAndOutputs) {
  Graph g;
  Value a = g.param(DType::F32, {3}), b = g.param(DType::F32, {3});
  Value h = g.binary(OpCode::Hypot, a, b);
  g.set_outputs({g.binary(OpCode::Add, h, a), b, g.unary(OpCode::BesselJ0, b)});
  EXPECT_TRUE(ir::has_composites(g));
  EXPECT_TRUE(ir::undecomposable_ops(g).empty());
  Graph d = ir::decompose_composites(g);
  EXPECT_EQ(d.num_params(), 2);
  ASSERT_EQ(d.outputs().size(), 3u);
  EXPECT_FALSE(ir::has_composites(d));
  std::vector<Tensor> in = {make(DType::F32, {3}, [](int64_t i) { return 3.0 * i; }),
                            make(DType::F32, {3}, [](int64_t i) { return 4.0 * i; })};
  auto want = run(g, in), got = run(d, in);
  EXPECT_FLOAT_EQ(got[0].get(1), 5 + 3);
  EXPECT_EQ(got[1].get(2), 8);
  EXPECT_NEAR(got[2].get(0), want[2].get(0), 1e-6);
  Graph plain;
  plain.set_outputs({plain.unary(OpCode::Exp, plain.param(DType::F32, {2}))});
  EXPECT_FALSE(ir::has_composites(plain));
}

}  // namespace
}  // namespace torch_tpu::host::testing
