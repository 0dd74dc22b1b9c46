// The orthogonal polynomials and Airy Ai of torch.special on the host runtime against
// closed forms and tabulated values (f64 and f32), plus the integer-degree rules PyTorch
// CPU uses (n truncated, n < 0 -> 0, endpoints exact, both the recurrence and the
// trigonometric branch for large n).
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {


// Runs op(x[i], n[i]) in dtype d.
std::vector<double> eval(OpCode op, DType d, const std::vector<double>& x, const std::vector<double>& n) {
  int64_t k = static_cast<int64_t>(x.size());
  Graph g;
  Value px = g.param(d, {k}), pn = g.param(d, {k});
  g.set_outputs({g.binary(op, px, pn)});
  Tensor out = run(g, {make(d, {k}, [&](int64_t i) { return x[i]; }), make(d, {k}, [&](int64_t i) { return n[i]; })})[0];
  std::vector<double> r(k);
  for (int64_t i = 0; i < k; ++i) r[i] = out.get(i);
  return r;
}

// Closed forms of degree n at x.
double ref(OpCode op, double x, int n) {
  auto cheb = [&](int kind, double y) {
    double t = std::acos(y);
    switch (kind) {
      case 0: return std::cos(n * t);
      case 1: return std::sin((n + 1) * t) / std::sin(t);
      case 2: return std::cos((n + 0.5) * t) / std::cos(t / 2);
      default: return std::sin((n + 0.5) * t) / std::sin(t / 2);
    }
  };
  switch (op) {
    case OpCode::ChebyshevT: return cheb(0, x);
    case OpCode::ChebyshevU: return cheb(1, x);
    case OpCode::ChebyshevV: return cheb(2, x);
    case OpCode::ChebyshevW: return cheb(3, x);
    case OpCode::ShiftedChebyshevT: return cheb(0, 2 * x - 1);
    case OpCode::ShiftedChebyshevU: return cheb(1, 2 * x - 1);
    case OpCode::ShiftedChebyshevV: return cheb(2, 2 * x - 1);
    case OpCode::ShiftedChebyshevW: return cheb(3, 2 * x - 1);
    case OpCode::HermiteH: {
      double h[] = {1, 2 * x, 4 * x * x - 2, 8 * x * x * x - 12 * x, 16 * std::pow(x, 4) - 48 * x * x + 12};
      return h[n];
    }
    case OpCode::HermiteHe: {
      double h[] = {1, x, x * x - 1, x * x * x - 3 * x, std::pow(x, 4) - 6 * x * x + 3};
      return h[n];
    }
    case OpCode::LaguerreL: {
      double l[] = {1, 1 - x, (x * x - 4 * x + 2) / 2, (-x * x * x + 9 * x * x - 18 * x + 6) / 6,
                    (std::pow(x, 4) - 16 * x * x * x + 72 * x * x - 96 * x + 24) / 24};
      return l[n];
    }
    case OpCode::LegendreP: {
      double p[] = {1, x, (3 * x * x - 1) / 2, (5 * x * x * x - 3 * x) / 2, (35 * std::pow(x, 4) - 30 * x * x + 3) / 8};
      return p[n];
    }
    default: return NAN;
  }
}

TEST(HostSpecialPoly, ClosedFormsLowDegree) {
  const OpCode ops[] = {OpCode::ChebyshevT, OpCode::ChebyshevU, OpCode::ChebyshevV, OpCode::ChebyshevW,
                        OpCode::ShiftedChebyshevT, OpCode::ShiftedChebyshevU, OpCode::ShiftedChebyshevV,
                        OpCode::ShiftedChebyshevW, OpCode::HermiteH, OpCode::HermiteHe, OpCode::LaguerreL,
                        OpCode::LegendreP};
  for (OpCode op : ops)
    for (DType d : {DType::F64, DType::F32}) {
      bool shifted = op == OpCode::ShiftedChebyshevT || op == OpCode::ShiftedChebyshevU ||
                     op == OpCode::ShiftedChebyshevV || op == OpCode::ShiftedChebyshevW;
      std::vector<double> xs = shifted ? std::vector<double>{0.1, 0.3, 0.55, 0.8, 0.95}
                                       : std::vector<double>{-0.9, -0.35, 0.2, 0.6, 0.85};
      std::vector<double> x, n;
      for (double v : xs)
        for (int k = 0; k <= 4; ++k) {
          x.push_back(v);
          n.push_back(k + 0.75);  // truncated toward zero: degree k
        }
      std::vector<double> got = eval(op, d, x, n);
      double tol = d == DType::F64 ? 1e-12 : 2e-5;
      for (size_t i = 0; i < x.size(); ++i) {
        double want = ref(op, round_to(d, x[i]), static_cast<int>(n[i]));
        EXPECT_NEAR(got[i], want, tol * std::max(1.0, std::abs(want)))
            << ir::op_info(op).hlo << " " << ir::dtype_name(d) << " x=" << x[i] << " n=" << n[i];
      }
    }
}

TEST(HostSpecialPoly, HighDegreeTrigBranchAndEndpoints) {
  // n = 20 takes the trigonometric form inside (-1, 1); must agree with the closed form.
  std::vector<double> got = eval(OpCode::ChebyshevT, DType::F64, {0.3, -0.7}, {20, 20});
  EXPECT_NEAR(got[0], std::cos(20 * std::acos(0.3)), 1e-12);
  EXPECT_NEAR(got[1], std::cos(20 * std::acos(-0.7)), 1e-12);
  got = eval(OpCode::ChebyshevU, DType::F64, {0.3}, {15});
  EXPECT_NEAR(got[0], std::sin(16 * std::acos(0.3)) / std::sin(std::acos(0.3)), 1e-11);
  // Endpoints: T_n(-1) = (-1)^n, U_n(1) = n + 1, V_n(-1) = (-1)^n (2n + 1), W_n(1) = 2n + 1.
  EXPECT_EQ(eval(OpCode::ChebyshevT, DType::F32, {-1, -1}, {3, 4}), (std::vector<double>{-1, 1}));
  EXPECT_EQ(eval(OpCode::ChebyshevU, DType::F32, {1, -1}, {5, 5}), (std::vector<double>{6, -6}));
  EXPECT_EQ(eval(OpCode::ChebyshevV, DType::F32, {-1, 1}, {3, 3}), (std::vector<double>{-7, 1}));
  EXPECT_EQ(eval(OpCode::ChebyshevW, DType::F32, {1, -1}, {3, 3}), (std::vector<double>{7, -1}));
  EXPECT_EQ(eval(OpCode::ShiftedChebyshevU, DType::F32, {1, 0}, {5, 5}), (std::vector<double>{6, -6}));
  EXPECT_EQ(eval(OpCode::LegendreP, DType::F32, {-1, 1}, {3, 3}), (std::vector<double>{-1, 1}));
  // Negative, NaN and infinite degrees give 0; Hermite H beyond its f32 limit (128) is NaN.
  EXPECT_EQ(eval(OpCode::LegendreP, DType::F32, {0.5, 0.5, 0.5}, {-1, NAN, INFINITY}), (std::vector<double>{0, 0, 0}));
  EXPECT_TRUE(std::isnan(eval(OpCode::HermiteH, DType::F32, {0.5}, {129})[0]));
  EXPECT_FALSE(std::isnan(eval(OpCode::HermiteH, DType::F64, {0.5}, {129})[0]));
  EXPECT_EQ(eval(OpCode::LaguerreL, DType::F32, {0}, {7})[0], 1);
}

TEST(HostSpecialPoly, AiryAiTable) {
  // torch.special.airy_ai on CPU in float64, across the three branches.
  const double xs[] = {-10, -5, -2.5, -1, 0, 1, 2.5, 5, 10};
  const double want[] = {0.04024123848644196, 0.35076100902415286, -0.11232483666261353, 0.5355608832923521,
                         0.3550280538878172, 0.13529241631288144, 0.015725923380470484, 0.00010834442813607433,
                         1.1047532552898654e-10};
  for (DType d : {DType::F64, DType::F32}) {
    int64_t k = 9;
    Graph g;
    Value px = g.param(d, {k});
    g.set_outputs({g.unary(OpCode::AiryAi, px)});
    Tensor out = run(g, {make(d, {k}, [&](int64_t i) { return xs[i]; })})[0];
    for (int64_t i = 0; i < k; ++i)
      EXPECT_NEAR(out.get(i), want[i], (d == DType::F64 ? 1e-12 : 1e-5) * std::max(1e-3, std::abs(want[i])))
          << ir::dtype_name(d) << " x=" << xs[i];
  }
  Graph g;
  Value px = g.param(DType::F32, {3});
  g.set_outputs({g.unary(OpCode::AiryAi, px)});
  Tensor out = run(g, {make(DType::F32, {3}, [](int64_t i) { return std::vector<double>{INFINITY, -INFINITY, 200}[i]; })})[0];
  EXPECT_TRUE(std::isnan(out.get(0)));
  EXPECT_TRUE(std::isnan(out.get(1)));
  EXPECT_EQ(out.get(2), 0);
}

}  // namespace
}  // namespace torch_tpu::host::testing
