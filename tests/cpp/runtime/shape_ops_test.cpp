// Data-movement and leaf ops against index-arithmetic references, swept over dtypes:
// broadcast_in_dim, reshape, transpose, slice, concatenate, reverse, iota, constant.
#include <cmath>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

// Multi-index of flat index i in `shape`.
std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t r = 0;
  for (size_t d = 0; d < shape.size(); ++d) r = r * shape[d] + idx[d];
  return r;
}

class HostShapeOps : public ::testing::TestWithParam<DType> {};

TEST_P(HostShapeOps, TransposeSliceReverseBroadcast) {
  DType d = GetParam();
  Shape xs = {3, 4, 5};
  Tensor x = make(d, xs, [&](int64_t i) { return d == DType::Bool ? i % 3 == 0 : i % 120; });
  Graph g;
  Value p = g.param(d, xs);
  Value tr = g.transpose(p, {2, 0, 1});
  Value sl = g.slice(p, {1, 0, 1}, {3, 4, 5}, {1, 2, 3});
  ir::Attrs ra;
  ra.dims = {0, 2};
  Value rv = g.op(OpCode::Reverse, {p}, ra);
  Value row = g.slice(p, {0, 0, 0}, {1, 4, 1}, {1, 1, 1});  // [1, 4, 1]
  Value bc = g.broadcast(row, {2, 4, 3, 5}, {0, 1, 3});     // [1,4,1] -> dims 0,1,3
  Value rs = g.reshape(tr, {5, 12});
  g.set_outputs({tr, sl, rv, bc, rs});
  auto r = run(g, {x});
  for (int64_t i = 0; i < r[0].numel(); ++i) {
    auto o = unravel(i, g.shape(tr));
    ASSERT_EQ(r[0].geti(i), x.geti(ravel({o[1], o[2], o[0]}, xs)));
    ASSERT_EQ(r[4].geti(i), r[0].geti(i));
  }
  for (int64_t i = 0; i < r[1].numel(); ++i) {
    auto o = unravel(i, g.shape(sl));
    ASSERT_EQ(r[1].geti(i), x.geti(ravel({1 + o[0], 2 * o[1], 1 + 3 * o[2]}, xs)));
  }
  for (int64_t i = 0; i < r[2].numel(); ++i) {
    auto o = unravel(i, xs);
    ASSERT_EQ(r[2].geti(i), x.geti(ravel({2 - o[0], o[1], 4 - o[2]}, xs)));
  }
  for (int64_t i = 0; i < r[3].numel(); ++i) {
    auto o = unravel(i, {2, 4, 3, 5});
    ASSERT_EQ(r[3].geti(i), x.geti(ravel({0, o[1], 0}, xs)));
  }
}

// optimization_barrier is the identity on the host: between fused elementwise ops, as a
// graph output, and on a parameter returned as is.
TEST(HostShapeOps, OptimizationBarrierIsTheIdentity) {
  Shape xs = {64, 33};
  Tensor x = make(DType::F32, xs, [](int64_t i) { return 0.02 * (i % 97) - 1; });
  Graph g;
  Value p = g.param(DType::F32, xs);
  Value e = g.unary(OpCode::Exp, g.binary(OpCode::Mul, p, p));
  Value b = g.op(OpCode::OptimizationBarrier, {e});
  Value y = g.binary(OpCode::Add, b, g.unary(OpCode::Negate, b));  // e - e = 0 where finite
  Value z = g.binary(OpCode::Mul, b, p);
  g.set_outputs({y, z, b, g.op(OpCode::OptimizationBarrier, {p})});
  auto r = run(g, {x});
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = x.get(i), ev = r[2].get(i);
    ASSERT_NEAR(ev, std::exp(v * v), 1e-6 * ev) << i;
    ASSERT_EQ(r[1].get(i), ev * v) << i;
    ASSERT_EQ(r[0].get(i), 0.0f) << i;
    ASSERT_EQ(r[3].get(i), v) << i;
  }
}

// Iotas large enough to run per call (not folded) and split over threads, along each dim.
TEST(HostShapeOpsLarge, IotaAlongEachDim) {
  Shape s = {5, 300, 70};
  for (int64_t dim = 0; dim < 3; ++dim) {
    Graph g;
    g.set_outputs({g.iota(DType::I64, s, dim)});
    auto r = run(g, {});
    for (int64_t i = 0; i < ir::numel(s); ++i)
      ASSERT_EQ(r[0].geti(i), unravel(i, s)[dim]) << "dim " << dim << " at " << i;
  }
}

TEST_P(HostShapeOps, ConcatIotaConstant) {
  DType d = GetParam();
  Tensor a = make(d, {2, 3}, [&](int64_t i) { return d == DType::Bool ? 1 : i + 1; });
  Tensor b = make(d, {2, 1}, [&](int64_t i) { return d == DType::Bool ? 0 : 50 + i; });
  Graph g;
  Value pa = g.param(d, {2, 3}), pb = g.param(d, {2, 1});
  Value c1 = g.concat({pa, pb, pa}, 1);
  Value io = g.iota(d, {3, 4}, 1);
  Value k = g.constant(d == DType::Bool ? 1 : 7, d, {2, 2});
  g.set_outputs({c1, io, k});
  auto r = run(g, {a, b});
  ASSERT_EQ(g.shape(c1), (Shape{2, 7}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 7; ++j) {
      int64_t want = j < 3 ? a.geti(i * 3 + j) : j == 3 ? b.geti(i) : a.geti(i * 3 + j - 4);
      ASSERT_EQ(r[0].geti(i * 7 + j), want);
    }
  for (int64_t i = 0; i < 12; ++i) {
    Tensor w(d, {1});
    w.seti(0, i % 4);
    if (d == DType::Bool) w.seti(0, i % 4 != 0);
    ASSERT_EQ(r[1].geti(i), w.geti(0)) << ir::dtype_name(d);
  }
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(r[2].get(i), d == DType::Bool ? 1 : 7);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, HostShapeOps, ::testing::ValuesIn(all_dtypes()),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

TEST(HostShapeOpsMisc, FloatConstantsAndLargeTranspose) {
  Graph g;
  Value c = g.constant(0.1, DType::BF16, {3});
  Value n = g.constant(NAN, DType::F16, {});
  Value x = g.param(DType::F32, {300, 257});
  Value t = g.transpose(x, {1, 0});
  Value big = g.constant(2.5, DType::F32, {400, 400});  // above the folding limit
  g.set_outputs({c, n, t, big});
  Tensor xt = make(DType::F32, {300, 257}, [](int64_t i) { return i; });
  auto r = run(g, {xt});
  EXPECT_EQ(r[0].get(2), round_to(DType::BF16, 0.1));
  EXPECT_TRUE(std::isnan(r[1].get(0)));
  for (int64_t i = 0; i < 257; i += 7)
    for (int64_t j = 0; j < 300; j += 11) ASSERT_EQ(r[2].get(i * 300 + j), j * 257 + i);
  EXPECT_EQ(r[3].get(400 * 400 - 1), 2.5);
}

TEST(HostShapeOpsMisc, ZeroSizedShapes) {
  Graph g;
  Value x = g.param(DType::F32, {0, 3});
  Value y = g.param(DType::F32, {2, 3});
  g.set_outputs({g.concat({x, y}, 0), g.transpose(x, {1, 0})});
  auto r = run(g, {Tensor(DType::F32, {0, 3}), make(DType::F32, {2, 3}, [](int64_t i) { return i; })});
  EXPECT_EQ(r[0].get(5), 5);
  EXPECT_EQ(r[1].numel(), 0);
}

}  // namespace
}  // namespace torch_tpu::host::testing
