// sort / argsort and cumsum / cumprod on the host runtime against scalar references: every
// dtype, every axis, both directions, ties (stability), NaN (largest), -0.0 == 0.0, empty
// tensors, and lines long or many enough to run multi-threaded.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

ir::Attrs sort_attr(int64_t dim, bool desc) {
  ir::Attrs a;
  a.dims = {dim};
  a.ivalue = desc;
  return a;
}

// The stable sorting permutation of each line, with torch's order on floats.
Tensor ref_argsort(const Tensor& x, int64_t axis, bool desc) {
  Tensor out(DType::I64, x.shape);
  int64_t n = x.shape[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  bool fl = ir::is_float(x.dtype);
  auto less = [&](int64_t a, int64_t b) {  // strict order on element positions
    if (fl) {
      double u = x.get(a), v = x.get(b);
      if (std::isnan(u) || std::isnan(v)) return desc ? (std::isnan(u) && !std::isnan(v)) : (!std::isnan(u) && std::isnan(v));
      return desc ? u > v : u < v;
    }
    if (x.dtype == DType::U64) {
      uint64_t u, v;
      std::memcpy(&u, x.bytes.data() + a * 8, 8);
      std::memcpy(&v, x.bytes.data() + b * 8, 8);
      return desc ? u > v : u < v;
    }
    return desc ? x.geti(a) > x.geti(b) : x.geti(a) < x.geti(b);
  };
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> pos(n);
      for (int64_t k = 0; k < n; ++k) pos[k] = (o * n + k) * inner + i;
      std::vector<int64_t> perm(n);
      std::iota(perm.begin(), perm.end(), 0);
      std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return less(pos[a], pos[b]); });
      for (int64_t k = 0; k < n; ++k) out.seti(pos[k], perm[k]);
    }
  return out;
}

// Values with many ties, negatives, and for floats NaN, +-inf and both zeros.
double sort_value(DType d, int64_t i) {
  if (d == DType::Bool) return (i * 5) % 3 == 0;
  int64_t v = (i * 37 + i / 7) % 23;
  if (d == DType::U8 || d == DType::U64) return double(v * 11 % 256);
  if (!ir::is_float(d)) return double(v - 11) * (d == DType::I8 ? 10 : 1000);
  switch (i % 11) {
    case 2: return NAN;
    case 4: return -0.0;
    case 5: return 0.0;
    case 7: return INFINITY;
    case 8: return -INFINITY;
    case 9: return -NAN;
    default: return (v - 11) * 0.5;
  }
}

TEST(HostSort, AllDtypesAxesDirections) {
  std::vector<std::pair<Shape, int64_t>> cases = {{{17}, 0}, {{4, 9}, 1}, {{9, 4}, 0}, {{3, 5, 4}, 1},
                                                  {{2, 3, 40}, 2}, {{1, 1}, 0}};
  for (DType d : all_dtypes())
    for (auto& [shape, axis] : cases)
      for (bool desc : {false, true}) {
        Tensor x = make(d, shape, [&](int64_t i) { return sort_value(d, i); });
        Graph g;
        Value p = g.param(d, shape);
        g.set_outputs({g.op(OpCode::Sort, {p}, sort_attr(axis, desc)),
                       g.op(OpCode::ArgSort, {p}, sort_attr(axis, desc))});
        auto out = run(g, {x});
        Tensor want = ref_argsort(x, axis, desc);
        std::string what = std::string(ir::dtype_name(d)) + " " + ir::shape_str(shape) + " axis " +
                           std::to_string(axis) + (desc ? " desc" : " asc");
        int64_t inner = 1;
        for (size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
        size_t elem = ir::dtype_size(d);
        for (int64_t i = 0; i < x.numel(); ++i) {
          ASSERT_EQ(out[1].geti(i), want.geti(i)) << what << " at " << i;
          // sort's values are the operand's elements in that order, bit for bit.
          int64_t line_start = i - ((i / inner) % shape[axis]) * inner;
          int64_t src = line_start + want.geti(i) * inner;
          ASSERT_EQ(std::memcmp(out[0].bytes.data() + i * elem, x.bytes.data() + src * elem, elem), 0)
              << what << " value at " << i;
        }
      }
}

TEST(HostSort, NanZerosAndStability) {
  Graph g;
  Value p = g.param(DType::F32, {8});
  g.set_outputs({g.op(OpCode::ArgSort, {p}, sort_attr(0, false)), g.op(OpCode::ArgSort, {p}, sort_attr(0, true))});
  std::vector<double> v = {NAN, 0.0, -1.0, -0.0, INFINITY, -NAN, 0.0, -1.0};
  Tensor x = make(DType::F32, {8}, [&](int64_t i) { return v[i]; });
  auto out = run(g, {x});
  std::vector<int64_t> asc = {2, 7, 1, 3, 6, 4, 0, 5}, desc = {0, 5, 4, 1, 3, 6, 2, 7};
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(out[0].geti(i), asc[i]) << i;
    EXPECT_EQ(out[1].geti(i), desc[i]) << i;
  }
}

TEST(HostSort, EmptyAndLarge) {
  Graph g;
  Value e = g.param(DType::F32, {0, 5}), e2 = g.param(DType::I32, {3, 0});
  g.set_outputs({g.op(OpCode::Sort, {e}, sort_attr(0, false)), g.op(OpCode::ArgSort, {e2}, sort_attr(1, true))});
  auto out = run(g, {Tensor(DType::F32, {0, 5}), Tensor(DType::I32, {3, 0})});
  EXPECT_EQ(out[0].numel(), 0);
  EXPECT_EQ(out[1].numel(), 0);
  // Many rows (threads split rows) and one long i64 row (the wide-key path).
  for (auto [d, shape] : {std::pair{DType::BF16, Shape{64, 5000}}, std::pair{DType::I64, Shape{1, 70000}}}) {
    Tensor x = make(d, shape, [&](int64_t i) { return double((i * 7919) % 4001) - 2000; });
    Graph h;
    h.set_outputs({h.op(OpCode::ArgSort, {h.param(d, shape)}, sort_attr(1, true))});
    Tensor got = run(h, {x})[0], want = ref_argsort(x, 1, true);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(got.geti(i), want.geti(i)) << i;
  }
}

// Inclusive scan reference in double / wrapped uint64, rounded once per output.
Tensor ref_scan(const Tensor& x, int64_t axis, bool prod) {
  Tensor out(x.dtype, x.shape);
  int64_t n = x.shape[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double f = prod ? 1 : 0;
      uint64_t u = prod ? 1 : 0;
      for (int64_t k = 0; k < n; ++k) {
        int64_t p = (o * n + k) * inner + i;
        if (ir::is_float(x.dtype)) {
          f = prod ? f * x.get(p) : f + x.get(p);
          out.set(p, f);
        } else {
          uint64_t v = static_cast<uint64_t>(x.geti(p));
          u = prod ? u * v : u + v;
          out.seti(p, static_cast<int64_t>(u));
        }
      }
    }
  return out;
}

TEST(HostScan, CumsumCumprodAllDtypesAxes) {
  std::vector<std::pair<Shape, int64_t>> cases = {{{13}, 0}, {{4, 9}, 1}, {{9, 4}, 0}, {{3, 5, 300}, 1},
                                                  {{2, 3, 7}, 2}, {{0, 3}, 1}, {{3, 0}, 1}};
  for (DType d : all_dtypes()) {
    if (d == DType::Bool) continue;
    for (bool prod : {false, true})
      for (auto& [shape, axis] : cases) {
        Tensor x = make(d, shape, [&](int64_t i) {
          if (prod) return double(1 + (i % 3 == 0)) * (i % 5 == 0 && d != DType::U8 && d != DType::U64 ? -1 : 1);
          return double((i * 37) % 23) - (d == DType::U8 || d == DType::U64 ? 0 : 11) + (ir::is_float(d) ? 0.25 : 0);
        });
        Graph g;
        g.set_outputs({g.op(prod ? OpCode::Cumprod : OpCode::Cumsum, {g.param(d, shape)}, sort_attr(axis, false))});
        Tensor got = run(g, {x})[0], want = ref_scan(x, axis, prod);
        for (int64_t i = 0; i < got.numel(); ++i) {
          if (ir::is_float(d))
            ASSERT_TRUE(close(got.get(i), want.get(i), ulp_tol(d), 1e-30))
                << ir::dtype_name(d) << (prod ? " cumprod " : " cumsum ") << ir::shape_str(shape)
                << " at " << i << " got " << got.get(i) << " want " << want.get(i);
          else
            ASSERT_EQ(got.geti(i), want.geti(i)) << ir::dtype_name(d) << " at " << i;
        }
      }
  }
}

// bf16 cumsum accumulates in float: a long run of small values keeps growing, where a bf16
// accumulator would stall at 256 + 1 = 256.
TEST(HostScan, Bf16AccumulatesInFloat) {
  Graph g;
  g.set_outputs({g.op(OpCode::Cumsum, {g.param(DType::BF16, {1000})}, sort_attr(0, false))});
  Tensor got = run(g, {make(DType::BF16, {1000}, [](int64_t) { return 1.0; })})[0];
  EXPECT_EQ(got.get(999), 1000.0);
  EXPECT_EQ(got.get(300), round_to(DType::BF16, 301.0));
}

}  // namespace
}  // namespace torch_tpu::host::testing
