// rng_uniform / rng_normal: Philox known-answer, the documented counter mapping,
// determinism (same state -> same bits, independent of thread count), range, and
// mean/variance sanity.
#include <omp.h>

#include <cmath>

#include "runtime/host/kernels.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

Tensor state(uint64_t seed, uint64_t offset) {
  Tensor s(DType::U64, {2});
  std::memcpy(s.data(), &seed, 8);
  std::memcpy(static_cast<uint8_t*>(s.data()) + 8, &offset, 8);
  return s;
}

Tensor draw(OpCode op, DType d, int64_t n, uint64_t seed, uint64_t offset) {
  Graph g;
  g.set_outputs({g.op(op, {g.param(DType::U64, {2})}, {}, {n}, d)});
  return run(g, {state(seed, offset)})[0];
}

TEST(HostRng, PhiloxKnownAnswer) {
  // Random123 known-answer vector: philox4x32-10, counter = 0, key = 0.
  Philox r = philox4x32_10(0, 0);
  EXPECT_EQ(r.w[0], 0x6627e8d5u);
  EXPECT_EQ(r.w[1], 0xe169c58du);
  EXPECT_EQ(r.w[2], 0xbc57ac4cu);
  EXPECT_EQ(r.w[3], 0x9b00dbd8u);
}

TEST(HostRng, UniformMappingAndDeterminism) {
  Tensor u = draw(OpCode::RngUniform, DType::F32, 10, 42, 7);
  for (int64_t i = 0; i < 10; ++i) {
    Philox r = philox4x32_10(7 + i / 4, 42);
    ASSERT_EQ(u.get(i), (r.w[i % 4] >> 8) * 0x1p-24);
  }
  Tensor u2 = draw(OpCode::RngUniform, DType::F32, 10, 42, 7);
  EXPECT_EQ(u.bytes, u2.bytes);
  // Offset by one counter shifts the stream by 4 elements.
  Tensor u3 = draw(OpCode::RngUniform, DType::F32, 6, 42, 8);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(u3.get(i), u.get(i + 4));
  Tensor other = draw(OpCode::RngUniform, DType::F32, 10, 43, 7);
  EXPECT_NE(u.bytes, other.bytes);
}

TEST(HostRng, IndependentOfThreadCount) {
  int64_t n = 1 << 18;
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor a = draw(OpCode::RngNormal, DType::F32, n, 5, 0);
  omp_set_num_threads(std::max(2, saved));
  Tensor b = draw(OpCode::RngNormal, DType::F32, n, 5, 0);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.bytes, b.bytes);
}

TEST(HostRng, RangeAndMoments) {
  int64_t n = 200000;
  for (DType d : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    Tensor u = draw(OpCode::RngUniform, d, n, 123, 0);
    Tensor z = draw(OpCode::RngNormal, d, n, 123, 1000000);
    double su = 0, su2 = 0, sz = 0, sz2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      double x = u.get(i);
      ASSERT_GE(x, 0.0);
      ASSERT_LT(x, 1.0) << ir::dtype_name(d);
      su += x, su2 += x * x;
      double y = z.get(i);
      ASSERT_TRUE(std::isfinite(y));
      sz += y, sz2 += y * y;
    }
    double mu = su / n, vu = su2 / n - mu * mu, mz = sz / n, vz = sz2 / n - mz * mz;
    double grid = d == DType::BF16 ? 1.0 / 256 : d == DType::F16 ? 1.0 / 2048 : 0;
    EXPECT_NEAR(mu, 0.5 - grid / 2, 0.005) << ir::dtype_name(d);
    EXPECT_NEAR(vu, 1.0 / 12, 0.003) << ir::dtype_name(d);
    EXPECT_NEAR(mz, 0.0, 0.01) << ir::dtype_name(d);
    EXPECT_NEAR(vz, 1.0, 0.02) << ir::dtype_name(d);
  }
}

TEST(HostRng, DoubleUses53Bits) {
  Tensor u = draw(OpCode::RngUniform, DType::F64, 3, 9, 2);
  Philox r = philox4x32_10(2, 9);
  uint64_t bits = ((static_cast<uint64_t>(r.w[0]) << 32) | r.w[1]) >> 11;
  EXPECT_EQ(u.get(0), bits * 0x1p-53);
}

}  // namespace
}  // namespace torch_tpu::host::testing
