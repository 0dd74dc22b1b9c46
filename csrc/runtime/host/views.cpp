// Strided copy (one generic routine by element size with fast paths for contiguous and
// last-dim-contiguous layouts, and cache-tiled transposes), view byte ranges, and
// View::contiguous().
#include "runtime/host/views.h"

#include <algorithm>
#include <cstring>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "base/error.h"
#include "ir/passes/views.h"
#include "runtime/host/parallel.h"
#include "runtime/runtime.h"

namespace torch_tpu {

namespace runtime {
bool View::contiguous() const {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  if (ir::numel(shape) == 0) return true;
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}
}  // namespace runtime

namespace host {

std::vector<int64_t> contiguous_strides(const ir::Shape& shape) { return ir::row_major_strides(shape); }

CopyPlan make_copy_plan(const ir::Shape& shape, const int64_t* dst_strides,
                        const int64_t* src_strides) {
  CopyPlan p;
  p.numel = ir::numel(shape);
  if (p.numel == 0) return p;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    int r = p.rank;
    // Merge into the previous (outer) dim when both layouts are contiguous across them.
    if (r > 0 && p.dst[r - 1] == dst_strides[i] * shape[i] &&
        p.src[r - 1] == src_strides[i] * shape[i]) {
      p.shape[r - 1] *= shape[i];
      p.dst[r - 1] = dst_strides[i];
      p.src[r - 1] = src_strides[i];
      continue;
    }
    TPU_CHECK(r < kMaxRank, "[host copy] rank too large; got ", shape.size(), ", expected <= ",
              kMaxRank);
    p.shape[r] = shape[i];
    p.dst[r] = dst_strides[i];
    p.src[r] = src_strides[i];
    p.rank = r + 1;
  }
  return p;
}

namespace {

// Copies the rows [row_begin, row_end) of the plan's outer index space; a row is the
// innermost dim.
template <class T>
void copy_rows(const CopyPlan& p, char* dst, const char* src, int64_t row_begin, int64_t row_end,
               size_t elem) {
  int r = p.rank;
  int64_t n = p.shape[r - 1], ds = p.dst[r - 1], ss = p.src[r - 1];
  std::array<int64_t, kMaxRank> idx{};
  int64_t rem = row_begin, doff = 0, soff = 0;
  for (int d = r - 2; d >= 0; --d) {
    idx[d] = rem % p.shape[d];
    rem /= p.shape[d];
    doff += idx[d] * p.dst[d];
    soff += idx[d] * p.src[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    T* o = reinterpret_cast<T*>(dst) + doff;
    const T* x = reinterpret_cast<const T*>(src) + soff;
    if (ds == 1 && ss == 1) {
      std::memcpy(o, x, n * elem);
    } else if (ds == 1 && ss == 0) {
      T v = x[0];
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else if (ds == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = x[i * ss];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * ds] = x[i * ss];
    }
    for (int d = r - 2; d >= 0; --d) {  // advance the outer index
      doff += p.dst[d];
      soff += p.src[d];
      if (++idx[d] < p.shape[d]) break;
      doff -= p.dst[d] * p.shape[d];
      soff -= p.src[d] * p.shape[d];
      idx[d] = 0;
    }
  }
}

// A transpose inside the plan: dim a is contiguous in dst, dim b (another one) in src.
// The copy is cut into kTile x kTile tiles of (b, a) per index of the other dims; within a
// tile the writes run along a (contiguous) and the reads come from kTile source lines that
// stay in L1, instead of one cache line per element of a row-by-row strided gather.
constexpr int64_t kTile = 32;

// One tile: o[i * dst_b + j] = x[i + j * src_a] for i in [i0, i1), j in [j0, j1).
template <class T>
void transpose_scalar(T* o, const T* x, int64_t dst_b, int64_t src_a, int64_t i0, int64_t i1,
                      int64_t j0, int64_t j1) {
  for (int64_t i = i0; i < i1; ++i) {
    T* __restrict orow = o + i * dst_b;
    const T* __restrict xcol = x + i;
    for (int64_t j = j0; j < j1; ++j) orow[j] = xcol[j * src_a];
  }
}

template <class T>
void transpose_tile(T* o, const T* x, int64_t dst_b, int64_t src_a, int64_t i0, int64_t i1,
                    int64_t j0, int64_t j1) {
  transpose_scalar(o, x, dst_b, src_a, i0, i1, j0, j1);
}

#ifdef __AVX2__
// 2-byte elements (bf16/f16): 8x8 blocks in 128-bit registers (unpack 16/32/64).
template <>
void transpose_tile<uint16_t>(uint16_t* o, const uint16_t* x, int64_t dst_b, int64_t src_a, int64_t i0,
                              int64_t i1, int64_t j0, int64_t j1) {
  int64_t i8 = i0 + (i1 - i0) / 8 * 8, j8 = j0 + (j1 - j0) / 8 * 8;
  for (int64_t j = j0; j < j8; j += 8)
    for (int64_t i = i0; i < i8; i += 8) {
      const uint16_t* s = x + i + j * src_a;
      __m128i r[8], a[8], b[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k * src_a));
      for (int k = 0; k < 8; k += 2) {
        a[k] = _mm_unpacklo_epi16(r[k], r[k + 1]);
        a[k + 1] = _mm_unpackhi_epi16(r[k], r[k + 1]);
      }
      for (int h = 0; h < 8; h += 4) {  // h = 0: rows 0-3, h = 4: rows 4-7
        b[h] = _mm_unpacklo_epi32(a[h], a[h + 2]);
        b[h + 1] = _mm_unpackhi_epi32(a[h], a[h + 2]);
        b[h + 2] = _mm_unpacklo_epi32(a[h + 1], a[h + 3]);
        b[h + 3] = _mm_unpackhi_epi32(a[h + 1], a[h + 3]);
      }
      uint16_t* d = o + i * dst_b + j;
      for (int k = 0; k < 4; ++k) {  // b[k] holds columns 2k, 2k+1 of rows 0-3; b[k+4] of rows 4-7
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * k) * dst_b), _mm_unpacklo_epi64(b[k], b[k + 4]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * k + 1) * dst_b), _mm_unpackhi_epi64(b[k], b[k + 4]));
      }
    }
  transpose_scalar(o, x, dst_b, src_a, i8, i1, j0, j1);
  transpose_scalar(o, x, dst_b, src_a, i0, i8, j8, j1);
}

// 4-byte elements: 8x8 blocks transposed in registers (8 loads, 24 shuffles, 8 stores;
// the bits move unchanged), the tile's ragged edges by the scalar loop.
template <>
void transpose_tile<uint32_t>(uint32_t* o, const uint32_t* x, int64_t dst_b, int64_t src_a, int64_t i0,
                              int64_t i1, int64_t j0, int64_t j1) {
  int64_t i8 = i0 + (i1 - i0) / 8 * 8, j8 = j0 + (j1 - j0) / 8 * 8;
  const float* xf = reinterpret_cast<const float*>(x);
  float* of = reinterpret_cast<float*>(o);
  for (int64_t j = j0; j < j8; j += 8)
    for (int64_t i = i0; i < i8; i += 8) {
      const float* s = xf + i + j * src_a;
      __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + src_a), r2 = _mm256_loadu_ps(s + 2 * src_a),
             r3 = _mm256_loadu_ps(s + 3 * src_a), r4 = _mm256_loadu_ps(s + 4 * src_a),
             r5 = _mm256_loadu_ps(s + 5 * src_a), r6 = _mm256_loadu_ps(s + 6 * src_a),
             r7 = _mm256_loadu_ps(s + 7 * src_a);
      __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
             t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
             t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
             u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
             u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
             u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* d = of + i * dst_b + j;
      _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(d + dst_b, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(d + 2 * dst_b, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(d + 3 * dst_b, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(d + 4 * dst_b, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(d + 5 * dst_b, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(d + 6 * dst_b, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(d + 7 * dst_b, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
  transpose_scalar(o, x, dst_b, src_a, i8, i1, j0, j1);
  transpose_scalar(o, x, dst_b, src_a, i0, i8, j8, j1);
}
#endif

template <class T>
void copy_transposed(const CopyPlan& p, int a, int b, char* dst, const char* src) {
  const int64_t n = p.shape[a], m = p.shape[b], dst_b = p.dst[b], src_a = p.src[a];
  int rest[kMaxRank];
  int nr = 0;
  for (int d = 0; d < p.rank; ++d)
    if (d != a && d != b) rest[nr++] = d;
  const int64_t batch = p.numel / (n * m), mt = (m + kTile - 1) / kTile;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / (kTile * n));
  parallel_for(batch * mt, grain, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      int64_t rem = w / mt, i0 = (w % mt) * kTile, i1 = std::min(m, i0 + kTile);
      int64_t doff = 0, soff = 0;
      for (int k = nr - 1; k >= 0; --k) {
        int d = rest[k];
        int64_t idx = rem % p.shape[d];
        rem /= p.shape[d];
        doff += idx * p.dst[d];
        soff += idx * p.src[d];
      }
      T* o = reinterpret_cast<T*>(dst) + doff;
      const T* x = reinterpret_cast<const T*>(src) + soff;
      for (int64_t j0 = 0; j0 < n; j0 += kTile) transpose_tile<T>(o, x, dst_b, src_a, i0, i1, j0, std::min(n, j0 + kTile));
    }
  });
}

// The dims (a, b) of a transpose copy_transposed can tile, or false.
bool find_transpose(const CopyPlan& p, int& a, int& b) {
  a = b = -1;
  for (int d = 0; d < p.rank; ++d) {
    if (p.dst[d] == 1 && a < 0) a = d;
    if (p.src[d] == 1 && b < 0) b = d;
  }
  return a >= 0 && b >= 0 && a != b;
}

template <class T>
void copy_typed(const CopyPlan& p, void* dst, const void* src) {
  constexpr size_t elem = sizeof(T);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (p.rank == 0) {
    std::memcpy(d, s, elem);
    return;
  }
  if (p.rank == 1 && p.dst[0] == 1 && p.src[0] == 1) {
    parallel_for(p.numel, kParallelGrain * 4, [&](int64_t b, int64_t e) {
      std::memcpy(d + b * elem, s + b * elem, (e - b) * elem);
    });
    return;
  }
  int a, b;
  if (find_transpose(p, a, b)) return copy_transposed<T>(p, a, b, d, s);
  int64_t row_len = p.shape[p.rank - 1];
  int64_t rows = p.numel / row_len;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / row_len);
  parallel_for(rows, grain,
               [&](int64_t b, int64_t e) { copy_rows<T>(p, d, s, b, e, elem); });
}

}  // namespace

void run_copy(const CopyPlan& plan, void* dst, const void* src, size_t elem) {
  if (plan.numel == 0) return;
  switch (elem) {
    case 1: return copy_typed<uint8_t>(plan, dst, src);
    case 2: return copy_typed<uint16_t>(plan, dst, src);
    case 4: return copy_typed<uint32_t>(plan, dst, src);
    case 8: return copy_typed<uint64_t>(plan, dst, src);
    default: TPU_CHECK(false, "[host copy] unsupported element size; got ", elem, ", expected 1/2/4/8");
  }
}

ByteRange byte_range(const void* data, const ir::Shape& shape, const std::vector<int64_t>& strides,
                     size_t elem) {
  ByteRange r;
  if (ir::numel(shape) == 0) return r;
  int64_t lo = 0, hi = 0;
  if (strides.empty()) {
    hi = ir::numel(shape) - 1;
  } else {
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span = (shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
  }
  auto base = reinterpret_cast<uintptr_t>(data);
  r.lo = base + lo * static_cast<int64_t>(elem);
  r.hi = base + (hi + 1) * static_cast<int64_t>(elem);
  return r;
}

}  // namespace host
}  // namespace torch_tpu
