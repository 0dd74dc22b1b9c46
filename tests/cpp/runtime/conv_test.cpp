// convolution and reduce_window on the host against scalar references: 1-d/2-d/3-d,
// strides, padding (negative too), lhs/rhs dilation, groups; f32 at the three precisions,
// f64, bf16, f16, integers; empty shapes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> stride, lo, hi, ld, rd;
  int64_t groups;
};

ir::Attrs attrs_of(const ConvCase& c, ir::Precision p) {
  ir::Attrs a;
  a.window_strides = c.stride, a.pad_lo = c.lo, a.pad_hi = c.hi, a.lhs_dilation = c.ld,
  a.rhs_dilation = c.rd, a.groups = c.groups, a.precision = p;
  return a;
}

// Straight from the StableHLO definition, in double; `round` maps each operand value.
std::vector<double> reference(const ConvCase& c, const Shape& out, const Tensor& x, const Tensor& w,
                              double (*round)(double)) {
  size_t S = c.x.size() - 2;
  int64_t N = c.x[0], C = c.x[1], O = c.w[0], Cg = C / c.groups, Og = O / c.groups;
  std::vector<double> y(ir::numel(out), 0.0);
  Shape osp(out.begin() + 2, out.end()), ksp(c.w.begin() + 2, c.w.end());
  int64_t op = ir::numel(osp), kp = ir::numel(ksp);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t q = 0; q < op; ++q) {
        double acc = 0;
        for (int64_t ci = 0; ci < Cg; ++ci)
          for (int64_t k = 0; k < kp; ++k) {
            int64_t qi = q, ki = k, xi = n * C + (o / Og) * Cg + ci;
            std::vector<int64_t> pos(S);
            bool ok = true;
            for (int64_t d = static_cast<int64_t>(S) - 1; d >= 0; --d) {
              int64_t od = qi % osp[d], kd = ki % ksp[d];
              qi /= osp[d], ki /= ksp[d];
              int64_t p = od * c.stride[d] + kd * c.rd[d] - c.lo[d];
              if (p < 0 || p % c.ld[d] != 0 || p / c.ld[d] >= c.x[2 + d]) ok = false;
              pos[d] = p / std::max<int64_t>(1, c.ld[d]);
            }
            if (!ok) continue;
            for (size_t d = 0; d < S; ++d) xi = xi * c.x[2 + d] + pos[d];
            acc += round(x.get(xi)) * round(w.get((o * Cg + ci) * kp + k));
          }
        y[(n * O + o) * op + q] = acc;
      }
  return y;
}

double ident(double v) { return v; }
double to_bf16(double v) { return round_to(DType::BF16, v); }

std::vector<ConvCase> cases() {
  return {
      {{2, 3, 9}, {4, 3, 3}, {1}, {0}, {0}, {1}, {1}, 1},                       // 1-d plain
      {{1, 4, 11}, {6, 2, 4}, {3}, {2}, {1}, {1}, {2}, 2},                      // stride, pad, rhs dil, groups
      {{2, 2, 7}, {3, 2, 3}, {1}, {-1}, {-2}, {2}, {1}, 1},                     // lhs dil, negative pad
      {{2, 3, 8, 7}, {5, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, {1, 1}, {1, 2}, 1},  // 2-d
      {{1, 6, 6, 5}, {6, 1, 3, 3}, {1, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 6},  // depthwise
      {{2, 4, 5, 4}, {2, 2, 2, 3}, {1, 1}, {1, 2}, {1, 2}, {2, 3}, {1, 1}, 2},  // 2-d lhs dil + groups
      {{1, 2, 5, 4, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1}, {1, 0, 0}, {1, 1, 1}, {2, 1, 1}, 1},  // 3-d
      {{2, 2, 4, 3, 3}, {2, 1, 2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 0, -1}, {2, 1, 2}, {1, 1, 1}, 2},
  };
}

void check(const ConvCase& c, DType d, ir::Precision p, double (*round)(double), double rel) {
  Graph g;
  Value x = g.param(d, c.x), w = g.param(d, c.w);
  Value y = g.conv(x, w, attrs_of(c, p));
  g.set_outputs({y});
  Tensor tx = make(d, c.x, [](int64_t i) { return std::sin(0.37 * i + 0.1) * 2; });
  Tensor tw = make(d, c.w, [](int64_t i) { return std::cos(0.53 * i) * 1.5; });
  Tensor out = run(g, {tx, tw})[0];
  std::vector<double> want = reference(c, g.shape(y), tx, tw, round);
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_TRUE(close(out.get(i), want[i], rel, rel * 4)) << "case x" << ir::shape_str(c.x) << " "
        << ir::dtype_name(d) << " at " << i << ": got " << out.get(i) << ", want " << want[i];
}

TEST(HostConv, F32HighestAndF64) {
  for (const ConvCase& c : cases()) {
    check(c, DType::F32, ir::Precision::Highest, ident, 1e-5);
    check(c, DType::F64, ir::Precision::Default, ident, 1e-12);  // f64 ignores the precision
    check(c, DType::I32, ir::Precision::Default, ident, 0);      // integers: exact
    check(c, DType::I64, ir::Precision::Default, ident, 0);
  }
}

TEST(HostConv, F32DefaultRoundsOperandsToBf16) {
  // DEFAULT = exact products of bf16-rounded operands with f32 sums: tight against a
  // reference on rounded operands, and visibly different from the f32 result.
  for (const ConvCase& c : cases()) check(c, DType::F32, ir::Precision::Default, to_bf16, 1e-5);
}

TEST(HostConv, F32HighIsNearlyF32) {
  for (const ConvCase& c : cases()) check(c, DType::F32, ir::Precision::High, ident, 1e-4);
  // HIGH is much closer to f32 than DEFAULT on one case with values that bf16 cannot hold.
  ConvCase c = cases()[3];
  auto err = [&](ir::Precision p) {
    Graph g;
    Value x = g.param(DType::F32, c.x), w = g.param(DType::F32, c.w);
    Value y = g.conv(x, w, attrs_of(c, p));
    g.set_outputs({y});
    Tensor tx = make(DType::F32, c.x, [](int64_t i) { return 1 + i * 1e-3; });
    Tensor tw = make(DType::F32, c.w, [](int64_t i) { return 1 - i * 7e-4; });
    Tensor out = run(g, {tx, tw})[0];
    std::vector<double> want = reference(c, g.shape(y), tx, tw, ident);
    double e = 0;
    for (int64_t i = 0; i < out.numel(); ++i) e = std::max(e, std::fabs(out.get(i) - want[i]) / std::fabs(want[i]));
    return e;
  };
  double def = err(ir::Precision::Default), high = err(ir::Precision::High), top = err(ir::Precision::Highest);
  EXPECT_GT(def, 1e-4);
  EXPECT_LT(high, 1e-5);
  EXPECT_LT(top, 1e-6);
}

// attrs.ivalue = 1: bf16 operands, f32 result (the host plan's DEFAULT form on CPUs with a
// native bf16 kernel; widened to f32 elsewhere and for shapes the bf16 kernels do not take:
// groups, lhs dilation, negative padding): the f32 sums of the exact products.
TEST(HostConv, MixedBf16OperandsF32Result) {
  for (const ConvCase& c : cases()) {
    Graph g;
    Value x = g.param(DType::BF16, c.x), w = g.param(DType::BF16, c.w);
    ir::Attrs a = attrs_of(c, ir::Precision::Default);
    a.ivalue = 1;
    Value y = g.conv(x, w, a);
    ASSERT_EQ(g.dtype(y), DType::F32);
    g.set_outputs({y});
    Tensor tx = make(DType::BF16, c.x, [](int64_t i) { return std::sin(0.37 * i + 0.1) * 2; });
    Tensor tw = make(DType::BF16, c.w, [](int64_t i) { return std::cos(0.53 * i) * 1.5; });
    Tensor out = run(g, {tx, tw})[0];
    std::vector<double> want = reference(c, g.shape(y), tx, tw, ident);
    for (int64_t i = 0; i < out.numel(); ++i)
      ASSERT_TRUE(close(out.get(i), want[i], 1e-5, 4e-5)) << "case x" << ir::shape_str(c.x) << " at " << i
                                                         << ": got " << out.get(i) << ", want " << want[i];
  }
  Graph g;  // only bf16 operands may ask for an f32 result
  Value x = g.param(DType::F32, {1, 2, 5}), w = g.param(DType::F32, {3, 2, 2});
  ir::Attrs a = attrs_of(cases()[0], ir::Precision::Default);
  a.ivalue = 1;
  EXPECT_THROW(g.conv(x, w, a), std::exception);
}

// kernel_transposed / kernel_reversed / result_transposed: the conv reads rhs [i, o, k...]
// swapped and spatially flipped, and writes [O, N, spatial]; it equals the plain conv of that
// kernel materialized (then transposed), bit for bit, in every dtype path (f32 at each
// precision, the mixed bf16 one, f64 and integers by direct loops).
TEST(HostConv, TransposedReversedKernel) {
  for (const ConvCase& c : cases()) {
    for (DType d : {DType::F32, DType::F64, DType::I32, DType::BF16})
      for (ir::Precision p : {ir::Precision::Default, ir::Precision::High, ir::Precision::Highest})
        for (int mode = 1; mode < 8; ++mode) {
          bool tr = mode & 1, rev = mode & 2, tres = mode & 4;
          if (tr && c.groups != 1) continue;  // a transposed kernel needs one group
          Shape ws = c.w;
          if (tr) std::swap(ws[0], ws[1]);
          Graph g;
          Value x = g.param(d, c.x), w = g.param(d, ws);
          // The canonical kernel by IR ops, and the same conv reading w through the attrs.
          Value k = tr ? g.transpose(w, [&] {
            std::vector<int64_t> perm = {1, 0};
            for (size_t i = 2; i < ws.size(); ++i) perm.push_back(static_cast<int64_t>(i));
            return perm;
          }()) : w;
          if (rev) {
            ir::Attrs ra;
            for (size_t i = 2; i < ws.size(); ++i) ra.dims.push_back(static_cast<int64_t>(i));
            k = g.op(OpCode::Reverse, {k}, ra);
          }
          ir::Attrs a = attrs_of(c, p);
          if (d == DType::BF16) a.ivalue = 1;  // the mixed form
          Value y0 = g.conv(x, k, a);
          if (tres) {
            std::vector<int64_t> perm = {1, 0};
            for (size_t i = 2; i < c.x.size(); ++i) perm.push_back(static_cast<int64_t>(i));
            y0 = g.transpose(y0, perm);
          }
          a.kernel_transposed = tr, a.kernel_reversed = rev, a.result_transposed = tres;
          Value y1 = g.conv(x, w, a);
          ASSERT_EQ(g.shape(y0), g.shape(y1));
          g.set_outputs({y0, y1});
          Tensor tx = make(d, c.x, [](int64_t i) { return std::sin(0.37 * i + 0.1) * 2; });
          Tensor tw = make(d, ws, [](int64_t i) { return std::cos(0.53 * i) * 1.5; });
          auto out = run(g, {tx, tw});
          size_t bytes = out[0].numel() * ir::dtype_size(out[0].dtype);
          ASSERT_EQ(std::memcmp(out[0].bytes.data(), out[1].bytes.data(), bytes), 0)
              << "case x" << ir::shape_str(c.x) << " " << ir::dtype_name(d) << " precision " << static_cast<int>(p)
              << " transposed " << tr << " reversed " << rev;
        }
  }
  Graph g;  // a transposed kernel needs one group
  Value x = g.param(DType::F32, {1, 4, 5}), w = g.param(DType::F32, {2, 2, 3});
  ConvCase c = cases()[1];
  ir::Attrs a = attrs_of(c, ir::Precision::Highest);
  a.kernel_transposed = true;
  EXPECT_THROW(g.conv(x, w, a), std::exception);
}

TEST(HostConv, SixteenBitFloats) {
  for (const ConvCase& c : cases()) {
    check(c, DType::BF16, ir::Precision::Default, ident, 1.0 / 64);
    check(c, DType::F16, ir::Precision::Default, ident, 1.0 / 512);
  }
}

TEST(HostConv, EmptyShapes) {
  // No input features: the result is all zeros; no batch / empty result: nothing to do.
  for (ConvCase c : {ConvCase{{2, 0, 5}, {3, 0, 2}, {1}, {0}, {0}, {1}, {1}, 1},
                     ConvCase{{0, 2, 5}, {3, 2, 2}, {1}, {0}, {0}, {1}, {1}, 1},
                     ConvCase{{1, 2, 2}, {3, 2, 4}, {1}, {0}, {0}, {1}, {1}, 1}}) {
    Graph g;
    Value x = g.param(DType::F32, c.x), w = g.param(DType::F32, c.w);
    Value y = g.conv(x, w, attrs_of(c, ir::Precision::Highest));
    g.set_outputs({y});
    Tensor out = run(g, {Tensor(DType::F32, c.x), Tensor(DType::F32, c.w)})[0];
    EXPECT_EQ(out.shape, g.shape(y));
    for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.get(i), 0.0);
  }
}

TEST(HostReduceWindow, SumMaxMinWithPaddingAndDilation) {
  Shape xs = {2, 7, 6};
  for (DType d : {DType::F32, DType::BF16, DType::F64, DType::I32}) {
    Tensor x = make(d, xs, [](int64_t i) { return (i * 7) % 11 - 5; });
    for (ir::Reducer r : {ir::Reducer::Sum, ir::Reducer::Max, ir::Reducer::Min}) {
      ir::Attrs a;
      a.window = {1, 3, 2}, a.window_strides = {1, 2, 1}, a.pad_lo = {0, 1, 0}, a.pad_hi = {0, 2, 1};
      a.lhs_dilation = {1, 2, 1}, a.rhs_dilation = {1, 1, 2}, a.reducer = r;
      Graph g;
      Value y = g.reduce_window(g.param(d, xs), a);
      g.set_outputs({y});
      Tensor out = run(g, {x})[0];
      const Shape& os = g.shape(y);
      for (int64_t i = 0; i < out.numel(); ++i) {
        int64_t o0 = i / (os[1] * os[2]), o1 = i / os[2] % os[1], o2 = i % os[2];
        double acc = r == ir::Reducer::Sum ? 0 : r == ir::Reducer::Max ? -INFINITY : INFINITY;
        for (int64_t k1 = 0; k1 < 3; ++k1)
          for (int64_t k2 = 0; k2 < 2; ++k2) {
            int64_t p1 = o1 * 2 + k1 - 1, p2 = o2 + 2 * k2;
            if (p1 < 0 || p1 % 2 || p1 / 2 >= xs[1] || p2 >= xs[2]) continue;
            double v = x.get((o0 * xs[1] + p1 / 2) * xs[2] + p2);
            acc = r == ir::Reducer::Sum ? acc + v : r == ir::Reducer::Max ? std::max(acc, v) : std::min(acc, v);
          }
        if (d == DType::I32 && std::isinf(acc)) acc = acc > 0 ? 2147483647.0 : -2147483648.0;
        ASSERT_EQ(out.get(i), acc) << ir::dtype_name(d) << " reducer " << static_cast<int>(r) << " at " << i;
      }
    }
  }
}

TEST(HostReduceWindow, MaxPropagatesNan) {
  Graph g;
  ir::Attrs a;
  a.window = {2}, a.window_strides = {2}, a.pad_lo = a.pad_hi = {0}, a.lhs_dilation = a.rhs_dilation = {1};
  a.reducer = ir::Reducer::Max;
  g.set_outputs({g.reduce_window(g.param(DType::F32, {4}), a)});
  Tensor x = make(DType::F32, {4}, [](int64_t i) { return i == 1 ? NAN : i; });
  Tensor out = run(g, {x})[0];
  EXPECT_TRUE(std::isnan(out.get(0)));
  EXPECT_EQ(out.get(1), 3.0);
}

}  // namespace
}  // namespace torch_tpu::host::testing
