// bf16 / f16 conversions: bit-exact round-to-nearest-even on ties, NaN, inf, overflow,
// subnormals; checked against the hardware _Float16 conversion for f16.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/host/numeric.h"

namespace torch_tpu::host {
namespace {

TEST(Numeric, Bf16RoundNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  // Just above the tie rounds up.
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3F808001)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-1.0f), 0xBF80);
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  // Max finite float rounds to inf; max finite bf16 stays.
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(bf16_to_f32(0x7F7F)), 0x7F7F);
  // NaN stays NaN, including payloads that would round into inf.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu}) {
    uint16_t h = f32_to_bf16(bits_f32(nan));
    EXPECT_TRUE(std::isnan(bf16_to_f32(h))) << std::hex << nan;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000);
  }
  // Subnormals round like normals.
  EXPECT_EQ(f32_to_bf16(bits_f32(0x00008000)), 0x0000);
  EXPECT_EQ(f32_to_bf16(bits_f32(0x00018000)), 0x0002);
  EXPECT_EQ(round_bf16(3.14159265f), bf16_to_f32(0x4049));
}

TEST(Numeric, Bf16ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h);
  }
}

TEST(Numeric, F16MatchesHardware) {
  // Every f16 round-trips; a sweep of float bit patterns matches _Float16 conversion.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    _Float16 hw;
    uint16_t hb = static_cast<uint16_t>(h);
    std::memcpy(&hw, &hb, 2);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(hw)));
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(hw)) << h;
    ASSERT_EQ(f32_to_f16(f), h);
  }
  for (uint64_t u = 0; u < 0x100000000ull; u += 0x1234Bull) {
    float f = bits_f32(static_cast<uint32_t>(u));
    _Float16 hw = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &hw, 2);
    uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(got)));
      continue;
    }
    ASSERT_EQ(got, want) << std::hex << u;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // halfway past max finite -> inf
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);  // tie to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
}

TEST(Numeric, WrapArithmetic) {
  EXPECT_EQ(wrap_add<int32_t>(INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(wrap_mul<uint16_t>(65535, 65535), 1);
  EXPECT_EQ(wrap_sub<int8_t>(-128, 1), 127);
  EXPECT_TRUE(std::isnan(nan_max<double>(NAN, 1.0)));
  EXPECT_TRUE(std::isnan(nan_min<float>(1.0f, NAN)));
}

}  // namespace
}  // namespace torch_tpu::host
