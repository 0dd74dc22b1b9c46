// Every unary/binary op of ops.def on every allowed dtype against a scalar reference:
// float math in double (rounded to the dtype, one-ulp tolerance), integer math exact
// with the documented wrap / divide-by-zero rules. Plus compare, select, clamp, convert.
#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

const std::vector<double> kFloatVals = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.7, -3.7,
                                        1e-3, 100.0, -57.25, 0.75, INFINITY, -INFINITY, NAN};

std::vector<int64_t> int_vals(DType d) {
  if (d == DType::Bool) return {0, 1};
  int64_t bits = 8 * ir::dtype_size(d);
  bool is_unsigned = d == DType::U8 || d == DType::U64;
  int64_t mx = bits == 64 ? (is_unsigned ? -1 : INT64_MAX)
                          : (is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1);
  int64_t mn = is_unsigned ? 0 : (bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1)));
  return {0, 1, 2, 3, 7, 100, -1, -3, -8, mx, mn};
}

double ref_float(OpCode op, double x, double y) {
  switch (op) {
    case OpCode::Abs: return std::fabs(x);
    case OpCode::Negate: return -x;
    case OpCode::Sign: return std::isnan(x) ? x : (x > 0) - (x < 0);
    case OpCode::Exp: return std::exp(x);
    case OpCode::Expm1: return std::expm1(x);
    case OpCode::Log: return std::log(x);
    case OpCode::Log1p: return std::log1p(x);
    case OpCode::Sqrt: return std::sqrt(x);
    case OpCode::Rsqrt: return 1 / std::sqrt(x);
    case OpCode::Cbrt: return std::cbrt(x);
    case OpCode::Tanh: return std::tanh(x);
    case OpCode::Logistic: return 1 / (1 + std::exp(-x));
    case OpCode::Sin: return std::sin(x);
    case OpCode::Cos: return std::cos(x);
    case OpCode::Tan: return std::tan(x);
    case OpCode::Erf: return std::erf(x);
    case OpCode::Floor: return std::floor(x);
    case OpCode::Ceil: return std::ceil(x);
    case OpCode::RoundEven: return std::nearbyint(x);
    case OpCode::Add: return x + y;
    case OpCode::Sub: return x - y;
    case OpCode::Mul: return x * y;
    case OpCode::Div: return x / y;
    case OpCode::Rem: return std::fmod(x, y);
    case OpCode::Pow: return std::pow(x, y);
    case OpCode::Max: return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
    case OpCode::Min: return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
    case OpCode::Atan2: return std::atan2(x, y);
    default: ADD_FAILURE() << "no float reference"; return 0;
  }
}

// Integer reference on int64 values; the caller wraps the result to the dtype.
int64_t ref_int(OpCode op, int64_t x, int64_t y, DType d) {
  bool uns = d == DType::U8 || d == DType::U64;
  auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (op) {
    case OpCode::Abs: return uns || x >= 0 ? x : static_cast<int64_t>(0 - ux);
    case OpCode::Negate: return static_cast<int64_t>(0 - ux);
    case OpCode::Sign: return uns ? x != 0 : (x > 0) - (x < 0);
    case OpCode::Not: return d == DType::Bool ? !x : ~x;
    case OpCode::Add: return d == DType::Bool ? (x | y) : static_cast<int64_t>(ux + uy);
    case OpCode::Sub: return static_cast<int64_t>(ux - uy);
    case OpCode::Mul: return static_cast<int64_t>(ux * uy);
    case OpCode::Div:
      if (y == 0) return -1;
      if (uns) return d == DType::U64 ? static_cast<int64_t>(ux / uy) : x / y;
      if (y == -1) return static_cast<int64_t>(0 - ux);
      return x / y;
    case OpCode::Rem:
      if (y == 0) return x;
      if (uns) return d == DType::U64 ? static_cast<int64_t>(ux % uy) : x % y;
      return y == -1 ? 0 : x % y;
    case OpCode::Pow: {
      if (!uns && y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
      uint64_t r = 1;
      for (int64_t i = 0; i < y; ++i) r *= ux;
      return static_cast<int64_t>(r);
    }
    case OpCode::Max:
      return uns && d == DType::U64 ? static_cast<int64_t>(std::max(ux, uy)) : std::max(x, y);
    case OpCode::Min:
      return uns && d == DType::U64 ? static_cast<int64_t>(std::min(ux, uy)) : std::min(x, y);
    case OpCode::And: return x & y;
    case OpCode::Or: return x | y;
    case OpCode::Xor: return x ^ y;
    default: ADD_FAILURE() << "no int reference"; return 0;
  }
}

struct OpRow {
  OpCode op;
  const char* name;
  int arity;
  uint8_t classes;
};
const std::vector<OpRow>& op_rows() {
  using ir::A, ir::B, ir::F, ir::I, ir::N;
  static const std::vector<OpRow> rows = {
#define UNARY(name, hlo, dt) {OpCode::name, #name, 1, dt},
#define BINARY(name, hlo, dt, traits) {OpCode::name, #name, 2, dt},
#include "ir/ops.def"
  };
  return rows;
}

// Ops added after this table was written (special functions, gcd, shifts) have no scalar
// reference here yet; they are judged against PyTorch by the OpInfo runner
// (python -m torch_tpu.opinfo). Rows are listed explicitly so that a new op must be placed.
bool has_reference(OpCode op) {
  switch (op) {
    case OpCode::Asin: case OpCode::Acos: case OpCode::Atan: case OpCode::Sinh:
    case OpCode::Cosh: case OpCode::Asinh: case OpCode::Acosh: case OpCode::Atanh:
    case OpCode::Erfc: case OpCode::ErfInv: case OpCode::Lgamma: case OpCode::Digamma:
    case OpCode::Erfcx: case OpCode::BesselI0: case OpCode::BesselI1: case OpCode::BesselJ0:
    case OpCode::BesselJ1: case OpCode::BesselY0: case OpCode::BesselY1: case OpCode::BesselK0:
    case OpCode::BesselK1: case OpCode::NextAfter: case OpCode::Hypot: case OpCode::Zeta:
    case OpCode::Gcd: case OpCode::ShiftLeft: case OpCode::ShiftRight: case OpCode::AiryAi:
    case OpCode::ChebyshevT: case OpCode::ChebyshevU: case OpCode::ChebyshevV: case OpCode::ChebyshevW:
    case OpCode::ShiftedChebyshevT: case OpCode::ShiftedChebyshevU: case OpCode::ShiftedChebyshevV:
    case OpCode::ShiftedChebyshevW: case OpCode::HermiteH: case OpCode::HermiteHe: case OpCode::LaguerreL:
    case OpCode::LegendreP:  // closed-form references in special_poly_test.cpp
      return false;
    default:
      return true;
  }
}

TEST(HostElementwise, AllOpsAllDtypes) {
  int checked = 0;
  for (const OpRow& row : op_rows()) {
    if (!has_reference(row.op)) continue;
    for (DType d : all_dtypes()) {
      if (!(row.classes & ir::dtype_class(d))) continue;
      bool fl = ir::is_float(d);
      // Operand pairs: all combinations of the value set (the same set for unary ops).
      std::vector<std::pair<double, double>> fpairs;
      std::vector<std::pair<int64_t, int64_t>> ipairs;
      if (fl) {
        for (double a : kFloatVals)
          for (double b : (row.arity == 1 ? std::vector<double>{0.0} : kFloatVals)) fpairs.push_back({a, b});
      } else {
        auto vals = int_vals(d);
        std::vector<int64_t> second = vals;
        if (row.op == OpCode::Pow) second = {0, 1, 2, 3, 7, -1, -2};
        if (d == DType::U8 || d == DType::U64 || d == DType::Bool)
          std::erase_if(second, [&](int64_t v) { return v < 0 && (v != -1 || row.op == OpCode::Pow); });
        for (int64_t a : vals)
          for (int64_t b : (row.arity == 1 ? std::vector<int64_t>{0} : second)) ipairs.push_back({a, b});
      }
      int64_t n = fl ? fpairs.size() : ipairs.size();
      Tensor x(d, {n}), y(d, {n});
      for (int64_t i = 0; i < n; ++i) {
        if (fl) x.set(i, fpairs[i].first), y.set(i, fpairs[i].second);
        else x.seti(i, ipairs[i].first), y.seti(i, ipairs[i].second);
      }
      Graph g;
      Value px = g.param(d, {n});
      if (row.arity == 1) {
        g.set_outputs({g.unary(row.op, px)});
      } else {
        Value py = g.param(d, {n});
        g.set_outputs({g.binary(row.op, px, py)});
      }
      std::vector<Tensor> ins = {x};
      if (row.arity == 2) ins.push_back(y);
      Tensor out = run(g, ins)[0];
      Tensor want(d, {n});
      for (int64_t i = 0; i < n; ++i) {
        if (fl) {
          // Reference from the (already rounded) stored inputs.
          want.set(i, ref_float(row.op, x.get(i), y.get(i)));
          double w = want.get(i);
          ASSERT_TRUE(close(out.get(i), w, ulp_tol(d), d == DType::F32 ? 1e-7 : 0))
              << row.name << " " << ir::dtype_name(d) << " x=" << x.get(i) << " y=" << y.get(i)
              << " got " << out.get(i) << " want " << w;
        } else {
          int64_t xi = x.geti(i), yi = y.geti(i);
          want.seti(i, ref_int(row.op, xi, yi, d));
          ASSERT_EQ(out.geti(i), want.geti(i))
              << row.name << " " << ir::dtype_name(d) << " x=" << xi << " y=" << yi;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

TEST(HostElementwise, BoolArithmeticIsLogical) {
  Graph g;
  Value a = g.param(DType::Bool, {4}), b = g.param(DType::Bool, {4});
  g.set_outputs({g.binary(OpCode::Add, a, b), g.binary(OpCode::Mul, a, b), g.unary(OpCode::Not, a)});
  auto outs = run(g, {make(DType::Bool, {4}, [](int64_t i) { return i & 1; }),
                      make(DType::Bool, {4}, [](int64_t i) { return i >> 1; })});
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(outs[0].geti(i), (i & 1) | (i >> 1));
    EXPECT_EQ(outs[1].geti(i), (i & 1) & (i >> 1));
    EXPECT_EQ(outs[2].geti(i), !(i & 1));
  }
}

TEST(HostElementwise, RoundEvenAndSignSpecials) {
  Graph g;
  Value x = g.param(DType::F32, {6});
  g.set_outputs({g.unary(OpCode::RoundEven, x), g.unary(OpCode::Sign, x)});
  std::vector<double> v = {0.5, 1.5, 2.5, -0.5, -2.5, NAN};
  auto outs = run(g, {make(DType::F32, {6}, [&](int64_t i) { return v[i]; })});
  std::vector<double> re = {0, 2, 2, -0.0, -2};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(outs[0].get(i), re[i]);
  EXPECT_TRUE(std::isnan(outs[0].get(5)));
  EXPECT_TRUE(std::isnan(outs[1].get(5)));
  EXPECT_EQ(outs[1].get(3), -1);
}

TEST(HostElementwise, CompareAllDirectionsAndNaN) {
  for (DType d : all_dtypes()) {
    std::vector<double> av = {1, 2, 3, 0}, bv = {2, 2, 1, 0};
    if (ir::is_float(d)) av[3] = NAN;
    if (d == DType::Bool) av = {0, 1, 1, 0}, bv = {1, 1, 0, 0};
    Tensor a = make(d, {4}, [&](int64_t i) { return av[i]; });
    Tensor b = make(d, {4}, [&](int64_t i) { return bv[i]; });
    Graph g;
    Value pa = g.param(d, {4}), pb = g.param(d, {4});
    std::vector<Value> outs;
    for (ir::Cmp c : {ir::Cmp::EQ, ir::Cmp::NE, ir::Cmp::LT, ir::Cmp::LE, ir::Cmp::GT, ir::Cmp::GE})
      outs.push_back(g.compare(c, pa, pb));
    g.set_outputs(outs);
    auto r = run(g, {a, b});
    for (int64_t i = 0; i < 4; ++i) {
      double x = a.get(i), y = b.get(i);
      bool want[6] = {x == y, x != y, x < y, x <= y, x > y, x >= y};
      for (int c = 0; c < 6; ++c)
        EXPECT_EQ(r[c].geti(i), want[c]) << ir::dtype_name(d) << " cmp " << c << " i " << i;
    }
  }
}

TEST(HostElementwise, SelectAndClampAllDtypes) {
  for (DType d : all_dtypes()) {
    Graph g;
    Value p = g.param(DType::Bool, {5}), t = g.param(d, {5}), f = g.param(d, {5});
    Value lo = g.constant(0, d), hi = g.constant(1, d);
    g.set_outputs({g.select(p, t, f), g.op(OpCode::Clamp, {lo, t, hi}),
                   g.op(OpCode::Clamp, {f, t, hi})});
    Tensor tp = make(DType::Bool, {5}, [](int64_t i) { return i % 2; });
    Tensor tt = make(d, {5}, [&](int64_t i) { return d == DType::Bool ? i % 2 : double(i) - 2; });
    Tensor tf = make(d, {5}, [](int64_t) { return 0; });
    auto r = run(g, {tp, tt, tf});
    for (int64_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r[0].get(i), i % 2 ? tt.get(i) : tf.get(i));
      double want = std::min(std::max(tt.get(i), 0.0), 1.0);
      if (d == DType::U8 || d == DType::U64) want = std::min(tt.get(i), 1.0);  // no negatives
      EXPECT_EQ(r[1].get(i), want) << ir::dtype_name(d);
      EXPECT_EQ(r[2].get(i), want) << ir::dtype_name(d);
    }
  }
}

TEST(HostElementwise, ClampPropagatesNaN) {
  Graph g;
  Value x = g.param(DType::F32, {2});
  g.set_outputs({g.op(OpCode::Clamp, {g.constant(0, DType::F32), x, g.constant(1, DType::F32)})});
  auto r = run(g, {make(DType::F32, {2}, [](int64_t i) { return i ? NAN : 5.0; })});
  EXPECT_EQ(r[0].get(0), 1.0);
  EXPECT_TRUE(std::isnan(r[0].get(1)));
}

TEST(HostElementwise, ConvertMatrix) {
  std::vector<double> fv = {0.0, 1.0, -1.0, 2.7, -2.7, 255.0, 300.5, 0.5};
  for (DType from : all_dtypes())
    for (DType to : all_dtypes()) {
      if (from == to) continue;
      int64_t n = fv.size();
      Tensor x = make(from, {n}, [&](int64_t i) { return fv[i]; });
      Graph g;
      g.set_outputs({g.convert(g.param(from, {n}), to)});
      Tensor y = run(g, {x})[0];
      for (int64_t i = 0; i < n; ++i) {
        double v = x.get(i), want;
        if (!ir::is_float(from) && !ir::is_float(to)) {  // exact integer wrap
          Tensor w(to, {1});
          w.seti(0, to == DType::Bool ? x.geti(i) != 0 : x.geti(i));
          EXPECT_EQ(y.geti(i), w.geti(0)) << ir::dtype_name(from) << "->" << ir::dtype_name(to);
          continue;
        }
        if (to == DType::Bool) want = v != 0;
        else if (ir::is_float(from) && !ir::is_float(to)) {
          Tensor w(to, {1});
          w.seti(0, static_cast<int64_t>(std::trunc(v)));  // truncate toward zero, wrap
          want = w.get(0);
        } else want = round_to(to, v);
        EXPECT_EQ(y.get(i), want) << ir::dtype_name(from) << "->" << ir::dtype_name(to) << " " << v;
      }
    }
}

TEST(HostElementwise, LargeParallelMatchesSmall) {
  int64_t n = 300000;
  Tensor x = make(DType::BF16, {n}, [](int64_t i) { return std::sin(i * 0.01) * 4; });
  Graph g;
  Value p = g.param(DType::BF16, {n});
  g.set_outputs({g.unary(OpCode::Tanh, p)});
  Tensor y = run(g, {x})[0];
  for (int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(y.get(i), round_to(DType::BF16, std::tanh(static_cast<float>(x.get(i)))));
}

}  // namespace
}  // namespace torch_tpu::host::testing
