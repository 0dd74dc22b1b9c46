// gather / scatter / scatter_add / scatter_reduce on the host runtime against a scalar reference: every
// dtype, every axis, indices smaller than the operand, i32 and i64 indices, duplicates,
// out-of-range and negative indices (gather clamps, scatter skips), empty tensors, and
// shapes large enough to run multi-threaded.
#include <algorithm>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

ir::Attrs axis_attr(int64_t a) {
  ir::Attrs at;
  at.dims = {a};
  return at;
}

// Row-major multi-index of linear position p in shape s.
std::vector<int64_t> unravel(int64_t p, const Shape& s) {
  std::vector<int64_t> m(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    m[d] = p % s[d];
    p /= s[d];
  }
  return m;
}
int64_t ravel(const std::vector<int64_t>& m, const Shape& s) {
  int64_t p = 0;
  for (size_t d = 0; d < s.size(); ++d) p = p * s[d] + m[d];
  return p;
}

Tensor ref_gather(const Tensor& x, const Tensor& idx, int64_t axis) {
  Tensor out(x.dtype, idx.shape);
  size_t elem = ir::dtype_size(x.dtype);
  for (int64_t p = 0; p < idx.numel(); ++p) {
    auto m = unravel(p, idx.shape);
    m[axis] = std::clamp<int64_t>(idx.geti(p), 0, x.shape[axis] - 1);
    std::memcpy(out.bytes.data() + p * elem, x.bytes.data() + ravel(m, x.shape) * elem, elem);
  }
  return out;
}

// Sequential in row-major order: the last duplicate wins / every duplicate adds.
Tensor ref_scatter(const Tensor& x, const Tensor& idx, const Tensor& u, int64_t axis, bool add) {
  Tensor out = x;
  size_t elem = ir::dtype_size(x.dtype);
  for (int64_t p = 0; p < idx.numel(); ++p) {
    auto m = unravel(p, idx.shape);
    int64_t v = idx.geti(p);
    if (v < 0 || v >= x.shape[axis]) continue;
    m[axis] = v;
    int64_t t = ravel(m, x.shape);
    if (!add) {
      std::memcpy(out.bytes.data() + t * elem, u.bytes.data() + p * elem, elem);
    } else if (ir::is_float(x.dtype)) {
      out.set(t, out.get(t) + u.get(p));  // rounds each add to the dtype
    } else if (x.dtype == DType::Bool) {
      out.seti(t, out.geti(t) | u.geti(p));
    } else {
      out.seti(t, static_cast<int64_t>(static_cast<uint64_t>(out.geti(t)) + static_cast<uint64_t>(u.geti(p))));
    }
  }
  return out;
}

double value_for(DType d, int64_t i) {
  if (d == DType::Bool) return (i * 7) % 3 == 0;
  if (d == DType::U8 || d == DType::U64) return (i * 37) % 101;
  return ((i * 37) % 101) - 50 + (ir::is_float(d) ? 0.25 : 0);
}

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  size_t n = got.numel() * ir::dtype_size(got.dtype);
  for (size_t b = 0; b < n; ++b)
    ASSERT_EQ(got.bytes[b], want.bytes[b]) << what << " at byte " << b;
}

struct Case {
  Shape x, idx;
  int64_t axis;
};
// Axis first / middle / last; indices smaller than the operand in other dims; size-1 dims.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{7}, {12}, 0},          {{5, 4}, {9, 4}, 0},       {{5, 4}, {3, 2}, 0},
      {{4, 6}, {4, 9}, 1},     {{4, 6}, {2, 3}, 1},       {{3, 5, 4}, {3, 8, 4}, 1},
      {{3, 5, 4}, {2, 6, 3}, 1}, {{3, 5, 4}, {3, 5, 6}, 2}, {{3, 1, 4}, {3, 1, 7}, 2},
      {{6, 1, 5}, {9, 1, 5}, 0}, {{2, 3, 4, 5}, {2, 2, 4, 5}, 1}, {{2, 3, 4, 5}, {1, 3, 4, 2}, 2},
  };
  return c;
}

// Indices with duplicates, and (when `wild`) negative and too-large values.
Tensor make_indices(DType it, const Shape& s, int64_t n, bool wild) {
  return make(it, s, [&](int64_t i) {
    int64_t v = (i * 13 + i / 3) % std::max<int64_t>(n, 1);
    if (wild && i % 5 == 1) v = -1 - (i % 3);
    if (wild && i % 7 == 3) v = n + (i % 4);
    return double(v);
  });
}

TEST(HostIndexing, GatherAllDtypesAxesAndShapes) {
  for (DType d : all_dtypes())
    for (DType it : {DType::I64, DType::I32})
      for (const Case& c : cases()) {
        Tensor x = make(d, c.x, [&](int64_t i) { return value_for(d, i); });
        Tensor idx = make_indices(it, c.idx, c.x[c.axis], /*wild=*/true);
        Graph g;
        g.set_outputs({g.op(OpCode::Gather, {g.param(d, c.x), g.param(it, c.idx)}, axis_attr(c.axis))});
        expect_same_bits(run(g, {x, idx})[0], ref_gather(x, idx, c.axis),
                         std::string("gather ") + ir::dtype_name(d) + " " + ir::shape_str(c.idx));
      }
}

TEST(HostIndexing, ScatterAndScatterAddAllDtypesAxesAndShapes) {
  for (bool add : {false, true})
    for (DType d : all_dtypes())
      for (DType it : {DType::I64, DType::I32})
        for (const Case& c : cases()) {
          Tensor x = make(d, c.x, [&](int64_t i) { return value_for(d, i); });
          Tensor u = make(d, c.idx, [&](int64_t i) { return value_for(d, i * 5 + 3); });
          Tensor idx = make_indices(it, c.idx, c.x[c.axis], /*wild=*/true);
          Graph g;
          OpCode op = add ? OpCode::ScatterAdd : OpCode::Scatter;
          g.set_outputs({g.op(op, {g.param(d, c.x), g.param(it, c.idx), g.param(d, c.idx)},
                              axis_attr(c.axis))});
          expect_same_bits(run(g, {x, idx, u})[0], ref_scatter(x, idx, u, c.axis, add),
                           std::string(add ? "scatter_add " : "scatter ") + ir::dtype_name(d) +
                               " " + ir::shape_str(c.idx) + " axis " + std::to_string(c.axis));
        }
}

// scatter_reduce (prod / max / min) against the sequential reference: duplicates combine in
// row-major order, NaN propagates through max/min, i1 uses and/or, out-of-range is skipped.
TEST(HostIndexing, ScatterReduceProdMaxMin) {
  using ir::Reducer;
  for (Reducer r : {Reducer::Prod, Reducer::Max, Reducer::Min})
    for (DType d : {DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64, DType::U8, DType::I8, DType::Bool})
      for (DType it : {DType::I64, DType::I32}) {
        Shape xs = {4, 3}, is = {6, 3};
        Tensor x = make(d, xs, [&](int64_t k) { return d == DType::Bool ? (k % 3 != 0) : double(k % 5) - 1; });
        Tensor u = make(d, is, [&](int64_t k) { return d == DType::Bool ? (k % 2) : double((k * 7) % 9) - 3; });
        if (ir::is_float(d)) u.set(4, NAN);
        Tensor idx = make(it, is, [](int64_t k) { return double(std::vector<int64_t>{0, 2, 2, 1, 7, 2}[k / 3]); });
        ir::Attrs at = axis_attr(0);
        at.reducer = r;
        Graph g;
        g.set_outputs({g.op(OpCode::ScatterReduce, {g.param(d, xs), g.param(it, is), g.param(d, is)}, at)});
        Tensor out = run(g, {x, idx, u})[0];
        Tensor want = x;
        for (int64_t p = 0; p < idx.numel(); ++p) {
          int64_t row = idx.geti(p), col = p % 3;
          if (row < 0 || row >= 4) continue;
          int64_t t = row * 3 + col;
          double a = want.get(t), b = u.get(p), v;
          if (d == DType::Bool) v = r == Reducer::Max ? double(a || b) : double(a && b);
          else if (r == Reducer::Prod) v = a * b;
          else if (std::isnan(a) || std::isnan(b)) v = NAN;
          else v = r == Reducer::Max ? std::max(a, b) : std::min(a, b);
          if (ir::is_float(d)) want.set(t, v);
          else want.seti(t, static_cast<int64_t>(v));
        }
        for (int64_t k = 0; k < want.numel(); ++k) {
          double got = out.get(k), w = want.get(k);
          EXPECT_TRUE((std::isnan(got) && std::isnan(w)) || got == w)
              << ir::dtype_name(d) << " reducer " << static_cast<int>(r) << " at " << k << ": got " << got << ", want " << w;
        }
      }
}

TEST(HostIndexing, OutOfRangeSemantics) {
  Graph g;
  Value x = g.param(DType::F32, {4}), i = g.param(DType::I64, {5}), u = g.param(DType::F32, {5});
  g.set_outputs({g.op(OpCode::Gather, {x, i}, axis_attr(0)),
                 g.op(OpCode::Scatter, {x, i, u}, axis_attr(0)),
                 g.op(OpCode::ScatterAdd, {x, i, u}, axis_attr(0))});
  Tensor xt = make(DType::F32, {4}, [](int64_t k) { return 10.0 * (k + 1); });
  Tensor it(DType::I64, {5});
  for (int64_t k = 0; k < 5; ++k) it.seti(k, std::vector<int64_t>{-1, 4, 2, 2, 100}[k]);
  Tensor ut = make(DType::F32, {5}, [](int64_t k) { return k + 1.0; });
  auto out = run(g, {xt, it, ut});
  std::vector<double> gather = {10, 40, 30, 30, 40};        // clamped
  std::vector<double> scatter = {10, 20, 4, 40};             // 4 wins over 3; rest skipped
  std::vector<double> scatter_add = {10, 20, 30 + 3 + 4, 40};
  for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(out[0].get(k), gather[k]) << k;
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(out[1].get(k), scatter[k]) << k;
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(out[2].get(k), scatter_add[k]) << k;
}

TEST(HostIndexing, EmptyTensors) {
  for (DType d : {DType::F32, DType::I8, DType::BF16}) {
    Graph g;
    Value x = g.param(d, {0, 3}), i = g.param(DType::I64, {0, 3});
    Value x2 = g.param(d, {4, 3}), i2 = g.param(DType::I64, {0, 3}), u2 = g.param(d, {0, 3});
    Value x3 = g.param(d, {0, 3}), i3 = g.param(DType::I64, {2, 3}), u3 = g.param(d, {2, 3});
    g.set_outputs({g.op(OpCode::Gather, {x, i}, axis_attr(0)),
                   g.op(OpCode::ScatterAdd, {x2, i2, u2}, axis_attr(0)),
                   g.op(OpCode::Scatter, {x3, i3, u3}, axis_attr(0))});
    Tensor xs2 = make(d, {4, 3}, [](int64_t k) { return double(k); });
    Tensor i3t = make(DType::I64, {2, 3}, [](int64_t k) { return double(k % 2); });
    auto out = run(g, {Tensor(d, {0, 3}), Tensor(DType::I64, {0, 3}), xs2, Tensor(DType::I64, {0, 3}),
                       Tensor(d, {0, 3}), Tensor(d, {0, 3}), i3t, make(d, {2, 3}, [](int64_t) { return 1.0; })});
    EXPECT_EQ(out[0].numel(), 0);
    expect_same_bits(out[1], xs2, "scatter_add with no updates is a copy");
    EXPECT_EQ(out[2].numel(), 0);
  }
}

// index_select / embedding shapes, large enough to run on several threads; sums over many
// duplicates are exact in f32 (small integers) and must equal the sequential reference.
TEST(HostIndexing, EmbeddingShapesMultithreaded) {
  const int64_t V = 300, D = 96, N = 4000;
  Tensor w = make(DType::F32, {V, D}, [](int64_t k) { return double(k % 1000) * 0.5; });
  Tensor idx(DType::I64, {N, D});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) idx.seti(n * D + d, (n * 7919) % V);
  Tensor grad = make(DType::F32, {N, D}, [](int64_t k) { return double(k % 17) - 8; });
  Graph g;
  Value wv = g.param(DType::F32, {V, D}), iv = g.param(DType::I64, {N, D}), gv = g.param(DType::F32, {N, D});
  Value zero = g.constant(0, DType::F32, {V, D});
  g.set_outputs({g.op(OpCode::Gather, {wv, iv}, axis_attr(0)),
                 g.op(OpCode::ScatterAdd, {zero, iv, gv}, axis_attr(0)),
                 g.op(OpCode::Scatter, {wv, iv, gv}, axis_attr(0))});
  auto out = run(g, {w, idx, grad});
  expect_same_bits(out[0], ref_gather(w, idx, 0), "embedding gather");
  expect_same_bits(out[1], ref_scatter(Tensor(DType::F32, {V, D}), idx, grad, 0, true), "embedding backward");
  expect_same_bits(out[2], ref_scatter(w, idx, grad, 0, false), "scatter last wins");
  // Along the last axis (topk-style gather) with many rows.
  Tensor x = make(DType::BF16, {512, 200}, [](int64_t k) { return double(k % 251); });
  Tensor ix = make(DType::I32, {512, 150}, [](int64_t k) { return double((k * 31) % 200); });
  Tensor u = make(DType::BF16, {512, 150}, [](int64_t k) { return double(k % 5); });
  Graph h;
  Value xv = h.param(DType::BF16, {512, 200}), jv = h.param(DType::I32, {512, 150}), uv = h.param(DType::BF16, {512, 150});
  h.set_outputs({h.op(OpCode::Gather, {xv, jv}, axis_attr(1)), h.op(OpCode::ScatterAdd, {xv, jv, uv}, axis_attr(1))});
  auto o2 = run(h, {x, ix, u});
  expect_same_bits(o2[0], ref_gather(x, ix, 1), "row gather");
  expect_same_bits(o2[1], ref_scatter(x, ix, u, 1, true), "row scatter_add");
}

}  // namespace
}  // namespace torch_tpu::host::testing
