// Reductions against a naive reference (every reducer x dtype x dim pattern, including
// empty ones), f32 sum accuracy on long rows/columns, and argmax/argmin with NaN.
#include <algorithm>
#include <cmath>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using ir::Reducer;

// Naive reduction in double / wrapped int64 of x over `dims`.
Tensor reference(const Tensor& x, const std::vector<int64_t>& dims, Reducer r, const Shape& out_shape) {
  Tensor out(x.dtype, out_shape);
  bool fl = ir::is_float(x.dtype), bl = x.dtype == DType::Bool;
  if (bl) r = (r == Reducer::Sum || r == Reducer::Max) ? Reducer::Or
                                                       : (r == Reducer::Prod || r == Reducer::Min) ? Reducer::And : r;
  std::vector<double> facc(out.numel());
  std::vector<int64_t> iacc(out.numel());
  for (int64_t o = 0; o < out.numel(); ++o) {
    facc[o] = r == Reducer::Sum ? 0 : r == Reducer::Prod ? 1 : r == Reducer::Max ? -INFINITY : INFINITY;
    iacc[o] = r == Reducer::Prod ? 1 : r == Reducer::And ? (bl ? 1 : -1) : 0;
    if (!fl && (r == Reducer::Max || r == Reducer::Min)) iacc[o] = INT64_MIN;  // sentinel
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (size_t d = x.shape.size(); d-- > 0;) {
      int64_t idx = rem % x.shape[d];
      rem /= x.shape[d];
      if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) {
        o += idx * mul;
        mul *= x.shape[d];
      }
    }
    double v = x.get(i);
    int64_t iv = x.geti(i);
    switch (r) {
      case Reducer::Sum: facc[o] += v; iacc[o] = static_cast<int64_t>(uint64_t(iacc[o]) + uint64_t(iv)); break;
      case Reducer::Prod: facc[o] *= v; iacc[o] = static_cast<int64_t>(uint64_t(iacc[o]) * uint64_t(iv)); break;
      case Reducer::Max:
        facc[o] = std::isnan(v) || std::isnan(facc[o]) ? NAN : std::max(facc[o], v);
        iacc[o] = iacc[o] == INT64_MIN ? iv : std::max(iacc[o], iv);
        break;
      case Reducer::Min:
        facc[o] = std::isnan(v) || std::isnan(facc[o]) ? NAN : std::min(facc[o], v);
        iacc[o] = iacc[o] == INT64_MIN ? iv : std::min(iacc[o], iv);
        break;
      case Reducer::And: iacc[o] &= iv; break;
      case Reducer::Or: iacc[o] |= iv; break;
    }
  }
  for (int64_t o = 0; o < out.numel(); ++o) {
    if (fl) out.set(o, facc[o]);
    else out.seti(o, iacc[o]);
  }
  return out;
}

TEST(HostReduce, AllReducersDtypesPatterns) {
  Shape xs = {3, 4, 2, 5};
  std::vector<std::vector<int64_t>> patterns = {{3}, {0}, {1, 2}, {0, 1, 2, 3}, {0, 2}, {1, 3}, {}, {0, 3}};
  for (DType d : all_dtypes())
    for (Reducer r : {Reducer::Sum, Reducer::Prod, Reducer::Max, Reducer::Min, Reducer::And, Reducer::Or}) {
      if (ir::is_float(d) && (r == Reducer::And || r == Reducer::Or)) continue;
      Tensor x = make(d, xs, [&](int64_t i) {
        if (d == DType::Bool) return double(i % 7 != 0);
        if (r == Reducer::Prod) return double(1 + (i % 3 == 0)) * (i % 5 == 0 ? -1 : 1);
        return double((i * 37) % 23) - (ir::is_int(d) && d != DType::U8 && d != DType::U64 ? 11 : 0) + (ir::is_float(d) ? 0.25 : 0);
      });
      for (const auto& dims : patterns) {
        Graph g;
        Value out = g.reduce(g.param(d, xs), r, dims);
        g.set_outputs({out});
        Tensor got = run(g, {x})[0];
        Tensor want = reference(x, dims, r, g.shape(out));
        for (int64_t i = 0; i < got.numel(); ++i) {
          if (ir::is_float(d))
            ASSERT_TRUE(close(got.get(i), want.get(i), ulp_tol(d) * 4, 1e-6))
                << ir::dtype_name(d) << " r" << int(r) << " pattern " << dims.size() << " got " << got.get(i) << " want " << want.get(i);
          else
            ASSERT_EQ(got.geti(i), want.geti(i)) << ir::dtype_name(d) << " r" << int(r) << " i" << i;
        }
      }
    }
}

TEST(HostReduce, EmptyGivesIdentity) {
  Graph g;
  Value x = g.param(DType::F32, {3, 0});
  Value xi = g.param(DType::I32, {0});
  g.set_outputs({g.reduce(x, Reducer::Sum, {1}), g.reduce(x, Reducer::Prod, {1}),
                 g.reduce(x, Reducer::Max, {1}), g.reduce(x, Reducer::Min, {1}),
                 g.reduce(xi, Reducer::Max, {0}), g.reduce(xi, Reducer::And, {0})});
  auto r = run(g, {Tensor(DType::F32, {3, 0}), Tensor(DType::I32, {0})});
  EXPECT_EQ(r[0].get(2), 0);
  EXPECT_EQ(r[1].get(2), 1);
  EXPECT_EQ(r[2].get(2), -INFINITY);
  EXPECT_EQ(r[3].get(2), INFINITY);
  EXPECT_EQ(r[4].geti(0), INT32_MIN);
  EXPECT_EQ(r[5].geti(0), -1);
}

TEST(HostReduce, NaNPropagatesInMaxMin) {
  Graph g;
  Value x = g.param(DType::F32, {2, 100});
  g.set_outputs({g.reduce(x, Reducer::Max, {1}), g.reduce(x, Reducer::Min, {0})});
  Tensor t = make(DType::F32, {2, 100}, [](int64_t i) { return i == 37 ? NAN : double(i); });
  auto r = run(g, {t});
  EXPECT_TRUE(std::isnan(r[0].get(0)));
  EXPECT_EQ(r[0].get(1), 199);
  EXPECT_TRUE(std::isnan(r[1].get(37)));
  EXPECT_EQ(r[1].get(36), 36);
}

TEST(HostReduce, F32SumIsAccurate) {
  // Long rows, long columns and a reduce-all that splits across threads: error near
  // float epsilon relative to the exact (double) sum, not n * epsilon.
  int64_t n = 1 << 20;
  Tensor x = make(DType::F32, {n}, [](int64_t i) { return 1.0 + ((i * 7919) % 1000) * 1e-4; });
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += x.get(i);
  Graph g;
  Value p = g.param(DType::F32, {n});
  g.set_outputs({g.reduce(p, Reducer::Sum, {0}), g.reduce(g.reshape(p, {4096, 256}), Reducer::Sum, {0}),
                 g.reduce(g.reshape(p, {256, 4096}), Reducer::Sum, {1})});
  auto r = run(g, {x});
  EXPECT_NEAR(r[0].get(0), exact, exact * 1e-6);
  double col = 0, colx = 0, row = 0, rowx = 0;
  for (int64_t i = 0; i < 4096; ++i) colx += x.get(i * 256 + 5);
  col = r[1].get(5);
  for (int64_t i = 0; i < 4096; ++i) rowx += x.get(7 * 4096 + i);
  row = r[2].get(7);
  EXPECT_NEAR(col, colx, colx * 1e-6);
  EXPECT_NEAR(row, rowx, rowx * 1e-6);
}

TEST(HostReduce, Bf16SumAccumulatesInFloat) {
  int64_t n = 4096;
  Graph g;
  Value p = g.param(DType::BF16, {n});
  g.set_outputs({g.reduce(p, Reducer::Sum, {0})});
  auto r = run(g, {make(DType::BF16, {n}, [](int64_t) { return 1.0; })});
  EXPECT_EQ(r[0].get(0), 4096);  // a bf16 accumulator would stop at 256
}

TEST(HostReduce, ArgMaxArgMin) {
  for (DType d : all_dtypes()) {
    Shape xs = {3, 5, 4};
    Tensor x = make(d, xs, [&](int64_t i) { return d == DType::Bool ? (i % 5 == 2) : double((i * 7) % 11); });
    for (int64_t dim = 0; dim < 3; ++dim)
      for (OpCode op : {OpCode::ArgMax, OpCode::ArgMin}) {
        Graph g;
        ir::Attrs a;
        a.dims = {dim};
        Value v = g.op(op, {g.param(d, xs)}, a);
        g.set_outputs({v});
        Tensor got = run(g, {x})[0];
        ASSERT_EQ(got.dtype, DType::I64);
        Shape os = g.shape(v);
        for (int64_t o = 0; o < got.numel(); ++o) {
          int64_t outer = 1, inner = 1;
          for (int64_t k = 0; k < dim; ++k) outer *= xs[k];
          for (int64_t k = dim + 1; k < 3; ++k) inner *= xs[k];
          int64_t ai = o / inner, ki = o % inner, best = 0;
          for (int64_t rr = 1; rr < xs[dim]; ++rr) {
            double v0 = x.get((ai * xs[dim] + best) * inner + ki), v1 = x.get((ai * xs[dim] + rr) * inner + ki);
            if (op == OpCode::ArgMax ? v1 > v0 : v1 < v0) best = rr;
          }
          ASSERT_EQ(got.geti(o), best) << ir::dtype_name(d) << " dim " << dim;
        }
      }
  }
}

TEST(HostReduce, ArgMaxNaNIsExtreme) {
  Graph g;
  ir::Attrs a;
  a.dims = {1};
  Value x = g.param(DType::F32, {2, 6});
  g.set_outputs({g.op(OpCode::ArgMax, {x}, a), g.op(OpCode::ArgMin, {x}, a)});
  std::vector<double> v = {1, 9, NAN, 3, NAN, 0, 5, 5, 1, 1, 7, 7};
  auto r = run(g, {make(DType::F32, {2, 6}, [&](int64_t i) { return v[i]; })});
  EXPECT_EQ(r[0].geti(0), 2);  // first NaN
  EXPECT_EQ(r[1].geti(0), 2);
  EXPECT_EQ(r[0].geti(1), 4);  // first of the ties
  EXPECT_EQ(r[1].geti(1), 2);
}

}  // namespace
}  // namespace torch_tpu::host::testing

namespace torch_tpu::host::testing {
namespace {

// reduce_row's fold replicated in scalar code: halves at reduce_split above 256 elements,
// 8 lanes, then a pairwise lane merge; with nan_max / nan_min as the combiner.
float fold_ref(const float* x, int64_t n, bool mx) {
  auto f = [&](float a, float b) { return mx ? nan_max(a, b) : nan_min(a, b); };
  if (n > 256) {
    int64_t h = reduce_split(n);
    return f(fold_ref(x, h, mx), fold_ref(x + h, n - h, mx));
  }
  float lane[8];
  for (float& l : lane) l = mx ? -INFINITY : INFINITY;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] = f(lane[j], x[i + j]);
  for (int j = 0; i < n; ++i, ++j) lane[j] = f(lane[j], x[i]);
  for (int w = 4; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = f(lane[j], lane[j + w]);
  return lane[0];
}

uint32_t bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

// The vectorized f32 max/min paths (row reductions, column reductions, maximum/minimum,
// clamp) give the scalar fold's bits: NaN anywhere (first, middle, tail lanes, several
// with payloads), +-0 ties, infinities, rows of lengths around the 8-lane and 256 splits.
TEST(HostReduce, F32MaxMinVectorPathsKeepScalarBits) {
  const int64_t cols[] = {1, 7, 8, 13, 64, 257, 600};
  for (int64_t C : cols) {
    const int64_t Rn = 11;
    Shape s = {Rn, C};
    std::vector<float> v(Rn * C);
    for (int64_t i = 0; i < Rn * C; ++i) {
      uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
      h ^= h >> 29;
      int k = static_cast<int>(h % 16);
      v[i] = k == 0 ? 0.0f : k == 1 ? -0.0f : k == 2 ? INFINITY : k == 3 ? -INFINITY
                                           : static_cast<float>(static_cast<int64_t>(h % 1000) - 500) / 8;
    }
    // NaNs (distinct payloads) in rows 1-4 at the start, middle, end and twice.
    auto nan = [](uint32_t payload) {
      uint32_t u = 0x7FC00000u | payload;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    };
    v[1 * C] = nan(1);
    v[2 * C + C / 2] = nan(2);
    v[3 * C + C - 1] = nan(3);
    v[4 * C + C / 3] = nan(4);
    v[4 * C + C - 1] = nan(5);
    Tensor x = make(DType::F32, s, [&](int64_t i) { return v[i]; });
    std::memcpy(x.bytes.data(), v.data(), v.size() * 4);  // exact bits (NaN payloads)
    for (bool mx : {true, false}) {
      Graph g;
      Value p = g.param(DType::F32, s), q = g.param(DType::F32, s);
      Reducer r = mx ? Reducer::Max : Reducer::Min;
      // rows; columns (the transpose's rows); elementwise against a shifted copy; clamp
      Value lo = g.broadcast(g.constant(-3.5, DType::F32), s, {}), hi = g.broadcast(g.constant(0.0, DType::F32), s, {});
      g.set_outputs({g.reduce(p, r, {1}), g.reduce(p, r, {0}), g.binary(mx ? OpCode::Max : OpCode::Min, p, q),
                     g.op(OpCode::Clamp, {lo, p, hi})});
      std::vector<float> sv(v.size());
      for (size_t i = 0; i < v.size(); ++i) sv[i] = v[(i + 5) % v.size()];
      Tensor y = make(DType::F32, s, [](int64_t) { return 0.0; });
      std::memcpy(y.bytes.data(), sv.data(), sv.size() * 4);
      auto out = run(g, {x, y});
      auto f32 = [](const Tensor& t, int64_t i) {
        float f;
        std::memcpy(&f, t.bytes.data() + 4 * i, 4);
        return f;
      };
      for (int64_t i = 0; i < Rn; ++i)
        ASSERT_EQ(bits(f32(out[0], i)), bits(fold_ref(v.data() + i * C, C, mx))) << "row " << i << " C " << C;
      for (int64_t j = 0; j < C; ++j) {  // columns: rows in order (C = 1 is a row: lanes)
        float want = mx ? -INFINITY : INFINITY;
        if (C == 1) {
          ASSERT_EQ(bits(f32(out[1], 0)), bits(fold_ref(v.data(), Rn, mx)));
          continue;
        }
        for (int64_t i = 0; i < Rn; ++i) want = mx ? nan_max(want, v[i * C + j]) : nan_min(want, v[i * C + j]);
        ASSERT_EQ(bits(f32(out[1], j)), bits(want)) << "column " << j << " C " << C;
      }
      for (int64_t i = 0; i < Rn * C; ++i) {
        float want = mx ? nan_max(v[i], sv[i]) : nan_min(v[i], sv[i]);
        ASSERT_EQ(bits(f32(out[2], i)), bits(want)) << "elementwise " << i;
        ASSERT_EQ(bits(f32(out[3], i)), bits(nan_min(nan_max(v[i], -3.5f), 0.0f))) << "clamp " << i;
      }
    }
  }
}

}  // namespace
}  // namespace torch_tpu::host::testing
