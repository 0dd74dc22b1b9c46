// rng_uniform / rng_normal on Philox4x32-10 (the constants of PyTorch and cuRAND).
// Operand 0 is the ui64[2] state {seed, offset}; key = seed (low word, high word).
// Counter mapping, fixed so the result depends only on (seed, offset, shape) and never
// on the thread count:
//   f32/f16/bf16: element i takes 32-bit word i%4 of counter offset + i/4;
//   f64:          element i takes words 2(i%2), 2(i%2)+1 of counter offset + i/2.
//   normal f32/f16/bf16: counter offset + i/4 gives two Box-Muller pairs (w0,w1) and
//                 (w2,w3); element i uses pair (i%4)/2, cos for even i, sin for odd i.
//   normal f64:   counter offset + i/2 gives one pair (w0w1, w2w3); cos/sin as above.
// The 128-bit counter is (offset + j) in words 0-1, zero in words 2-3. A call therefore
// consumes at most ceil(numel / 4) counters, so the ATen layer's reservation of numel
// (rounded up to a multiple of 4) offsets per call never overlaps the next call.
// Uniforms are k/2^bits in [0, 1) with bits = 24 (f32), 53 (f64), 11 (f16), 8 (bf16),
// so rounding to the storage type never produces 1.0.
#include <cmath>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {

Philox philox4x32_10(uint64_t counter, uint64_t seed) {
  uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = static_cast<uint32_t>(p1);
    c[2] = n2;
    c[3] = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c[0], c[1], c[2], c[3]}};
}

namespace {

using ir::DType;

template <DType D>
constexpr int kBits = D == DType::F16 ? 11 : D == DType::BF16 ? 8 : 24;

template <DType D>
float uniform32(uint32_t w) {
  return static_cast<float>(w >> (32 - kBits<D>)) * (1.0f / static_cast<float>(1u << kBits<D>));
}
double uniform64(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}

template <class T>
void box_muller(T u1, T u2, T& z0, T& z1) {
  const T two_pi = static_cast<T>(6.283185307179586476925);
  T r = std::sqrt(T(-2) * std::log(T(1) - u1));  // 1 - u1 is in (0, 1]
  z0 = r * std::cos(two_pi * u2);
  z1 = r * std::sin(two_pi * u2);
}

// Step data: i0 = numel.
template <DType D, bool kNormal>
void rng_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  const uint64_t* state = static_cast<const uint64_t*>(a.in[0]);
  uint64_t seed = state[0], offset = state[1];
  S* o = static_cast<S*>(a.out);
  int64_t n = a.step.i0;
  constexpr int per = D == DType::F64 ? 2 : 4;  // elements per counter
  int64_t blocks = (n + per - 1) / per;
  parallel_for(blocks, kParallelGrain / per / 4, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      Philox r = philox4x32_10(offset + static_cast<uint64_t>(j), seed);
      if constexpr (D == DType::F64) {
        double v[2] = {uniform64(r.w[0], r.w[1]), uniform64(r.w[2], r.w[3])};
        if constexpr (kNormal) box_muller(v[0], v[1], v[0], v[1]);
        for (int t = 0; t < 2 && j * 2 + t < n; ++t) o[j * 2 + t] = v[t];
      } else {
        float v[4];
        if constexpr (kNormal) {
          for (int t = 0; t < 4; ++t) v[t] = uniform32<DType::F32>(r.w[t]);
          box_muller(v[0], v[1], v[0], v[1]);
          box_muller(v[2], v[3], v[2], v[3]);
        } else {
          for (int t = 0; t < 4; ++t) v[t] = uniform32<D>(r.w[t]);
        }
        for (int t = 0; t < 4 && j * 4 + t < n; ++t) o[j * 4 + t] = DT<D>::store(v[t]);
      }
    }
  });
}

}  // namespace

void prepare_rng(const ir::Graph&, Step& s) {
  const ir::Node& n = *s.n;
  s.i0 = ir::numel(n.shape);
  bool normal = n.op == ir::OpCode::RngNormal;
  switch (n.dtype) {
    case DType::F16: s.fn = normal ? &rng_kernel<DType::F16, true> : &rng_kernel<DType::F16, false>; break;
    case DType::BF16: s.fn = normal ? &rng_kernel<DType::BF16, true> : &rng_kernel<DType::BF16, false>; break;
    case DType::F32: s.fn = normal ? &rng_kernel<DType::F32, true> : &rng_kernel<DType::F32, false>; break;
    case DType::F64: s.fn = normal ? &rng_kernel<DType::F64, true> : &rng_kernel<DType::F64, false>; break;
    default:
      TPU_CHECK(false, "[host rng] result must be a float type; got ", ir::dtype_name(n.dtype));
  }
}

}  // namespace torch_tpu::host
