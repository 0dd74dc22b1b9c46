// Scalar numerics of the host runtime: bf16/f16 <-> float conversion (round to nearest
// even, NaN stays NaN), the storage/compute type of each IR dtype (DT<D>), wrap-around
// integer arithmetic, and the dtype dispatch macro. Header-only, branch-free where it
// matters so that loops over these helpers vectorize.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "base/error.h"
#include "ir/dtype.h"

namespace torch_tpu::host {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16: the upper half of a float. Rounding adds 0x7FFF plus the lowest kept bit
// (ties to even); a carry into the exponent rounds the max finite value up to inf.
inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;  // quiet the NaN, keep sign and payload top bits
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : r);
}
// Rounds a float to the nearest bf16 value and returns it as a float.
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// IEEE binary16 (after F. Giesen's branch-light conversions).
inline float f16_to_f32(uint16_t h) {
  const uint32_t shifted_exp = 0x7C00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7FFFu) << 13;
  uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  float denorm = bits_f32(o + (1u << 23)) - bits_f32(113u << 23);
  uint32_t r = exp == shifted_exp ? o + ((128u - 16u) << 23) : exp == 0 ? f32_bits(denorm) : o;
  return bits_f32(r | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}
inline uint16_t f32_to_f16(float f) {
  const uint32_t f32_inf = 255u << 23, f16_max = (127u + 16u) << 23;
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = f32_bits(f);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  // Subnormal results: let the FPU round by adding a magic number.
  uint32_t sub = f32_bits(bits_f32(x) + bits_f32(denorm_magic)) - denorm_magic;
  uint32_t mant_odd = (x >> 13) & 1u;
  uint32_t norm = (x + (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + mant_odd) >> 13;
  uint32_t o = x >= f16_max ? (x > f32_inf ? 0x7E00u : 0x7C00u) : x < (113u << 23) ? sub : norm;
  return static_cast<uint16_t>(o | (sign >> 16));
}

// DT<D>: storage type S (what memory holds), compute type C (what the math uses),
// load/store between them. Bool is stored as uint8 0/1 and computed as bool.
template <ir::DType D>
struct DT;
#define TPU_PLAIN_DT(name, T)                       \
  template <>                                       \
  struct DT<ir::DType::name> {                      \
    using S = T;                                    \
    using C = T;                                    \
    static C load(S s) { return s; }                \
    static S store(C c) { return c; }               \
  };
TPU_PLAIN_DT(U8, uint8_t)
TPU_PLAIN_DT(I8, int8_t)
TPU_PLAIN_DT(I16, int16_t)
TPU_PLAIN_DT(I32, int32_t)
TPU_PLAIN_DT(I64, int64_t)
TPU_PLAIN_DT(U64, uint64_t)
TPU_PLAIN_DT(F32, float)
TPU_PLAIN_DT(F64, double)
#undef TPU_PLAIN_DT
template <>
struct DT<ir::DType::Bool> {
  using S = uint8_t;
  using C = bool;
  static C load(S s) { return s != 0; }
  static S store(C c) { return c ? 1 : 0; }
};
template <>
struct DT<ir::DType::BF16> {
  using S = uint16_t;
  using C = float;
  static C load(S s) { return bf16_to_f32(s); }
  static S store(C c) { return f32_to_bf16(c); }
};
template <>
struct DT<ir::DType::F16> {
  using S = uint16_t;
  using C = float;
  static C load(S s) { return f16_to_f32(s); }
  static S store(C c) { return f32_to_f16(c); }
};

template <class T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
// Unsigned type at least as wide as int, so wrap-around arithmetic never promotes to int.
template <class T>
using Wide = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <class T>
T wrap_add(T a, T b) {
  if constexpr (kIsInt<T>) return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  else return a + b;
}
template <class T>
T wrap_sub(T a, T b) {
  if constexpr (kIsInt<T>) return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b));
  else return a - b;
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (kIsInt<T>) return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  else if constexpr (std::is_same_v<T, bool>) return a && b;
  else return a * b;
}

template <class T>
T lowest() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
T highest() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// NaN-propagating max/min (torch.maximum / StableHLO maximum).
template <class T>
T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a != a ? a : (b != b ? b : (a > b ? a : b));
  else return a > b ? a : b;
}
template <class T>
T nan_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a != a ? a : (b != b ? b : (a < b ? a : b));
  else return a < b ? a : b;
}

// nan_max / nan_min on 8 f32 lanes (GCC vector extension): the same selects per lane,
// (a > b ? a : b) then a where a is NaN, so each lane has nan_max's bits, but as compare +
// blend instructions (the scalar form's nested branches are not vectorized).
// Only where AVX is on (the runtime's -march=x86-64-v3 sources): a 32-byte vector is passed
// in memory without it, and one inline definition must have one ABI in every translation
// unit (gemv.cpp and vec_math.cpp are also compiled for the SSE baseline).
#ifdef __AVX__
typedef float F8 __attribute__((vector_size(32)));
template <bool kMax>
inline F8 nan_max8(F8 a, F8 b) {
  F8 r;
  if constexpr (kMax) r = a > b ? a : b;
  else r = a < b ? a : b;
  return a != a ? a : r;
}
inline F8 load8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
#endif  // __AVX__

}  // namespace torch_tpu::host

// Runs `body` with `D` bound to the constexpr ir::DType of runtime value `dtype`.
#define TPU_DTYPE_CASE(name, ...)               \
  case ::torch_tpu::ir::DType::name: {          \
    constexpr ::torch_tpu::ir::DType D = ::torch_tpu::ir::DType::name; \
    __VA_ARGS__;                                \
    break;                                      \
  }
#define TPU_DISPATCH_DTYPE(dtype, ...)                                                  \
  switch (dtype) {                                                                      \
    TPU_DTYPE_CASE(Bool, __VA_ARGS__) TPU_DTYPE_CASE(U8, __VA_ARGS__)                   \
    TPU_DTYPE_CASE(I8, __VA_ARGS__) TPU_DTYPE_CASE(I16, __VA_ARGS__)                    \
    TPU_DTYPE_CASE(I32, __VA_ARGS__) TPU_DTYPE_CASE(I64, __VA_ARGS__)                   \
    TPU_DTYPE_CASE(F16, __VA_ARGS__) TPU_DTYPE_CASE(BF16, __VA_ARGS__)                  \
    TPU_DTYPE_CASE(F32, __VA_ARGS__) TPU_DTYPE_CASE(F64, __VA_ARGS__)                   \
    TPU_DTYPE_CASE(U64, __VA_ARGS__)                                                    \
  }
