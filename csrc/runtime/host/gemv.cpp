// gemm_small (gemm.h): f32 products with few rows (decode-shaped, M <= 16), streaming the large
// operand and splitting it in registers, so that no rounded copy of a weight is written:
// DEFAULT rounds it to bf16 (one FMA per product), HIGH splits it into bf16 hi + lo (two
// FMAs for hi*hi + hi*lo + lo*hi, the packed bf16x3 GEMM's products). HIGHEST stays on the
// library GEMM (gemm.cpp), which reads f32 as stored anyway.
// Compiled once per Highway target (foreach_target.h); the entry point dispatches at run
// time. See docs/decisions/gemm.md.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/host/gemm.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

// Targets as vec_math.cpp: the x86-64 baseline, SSE4, AVX2 and AVX-512 (the newer AVX-512
// flavours add nothing to integer rounding and f32 FMAs).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_AVX3_ZEN4 | HWY_AVX3_SPR | HWY_AVX10_2)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/gemv.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#ifndef TPU_GEMV_CONSTANTS  // this file is included once per target
#define TPU_GEMV_CONSTANTS
namespace torch_tpu::host::gemv {
// Rows of A (per batch) this kernel takes; above it the packed bf16/f32 GEMM is faster.
constexpr int64_t kMaxRows = 16;
// Rounded copies of A larger than this (floats) are not worth a streaming kernel.
constexpr int64_t kMaxSmallOperand = int64_t{1} << 22;
// FMAs a thread must get before parallel_for splits the columns.
constexpr int64_t kFmasPerThread = int64_t{1} << 17;
// Precisions (gemm.h SmallPrecision), as template arguments.
constexpr int kDefault = 0, kHigh = 1;
}  // namespace torch_tpu::host::gemv
#endif

HWY_BEFORE_NAMESPACE();
namespace torch_tpu::host::gemv {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
using DU = hn::RebindToUnsigned<D>;

// Register tiles: accumulators + the split weight vectors must fit the register file.
// Rounding a weight vector costs ~8 vector integer ops against one FMA per row of A that uses
// it, so tiles take as many rows as the registers allow and as few weight vectors as keep the
// FMA units busy.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3  // 32 vector registers
constexpr int kMR = 8;  // rows of A per tile
constexpr int kNR = 3;  // [N,K] weight: rows (dot products along K) per tile
constexpr int kNV = 3;  // [K,N] weight: vectors of columns per tile
constexpr int mr_nk(int) { return kMR; }
constexpr int mr_kn(int) { return kMR; }
// HIGH holds two parts of each weight vector (and of A's): one weight row / vector fewer.
constexpr int nr_of(int P) { return P == kHigh ? kNR - 1 : kNR; }
constexpr int nv_of(int P) { return P == kHigh ? kNV - 1 : kNV; }
constexpr bool kTallKn = false;
#else  // 16 registers. DEFAULT: 8 rows x 1 weight row / vector (8 accumulators; on AVX2 M = 8
// ran at 1.6-1.9x the 4 x 3 / 4 x 2 tiles, which rounded each weight vector twice as often per
// FMA and streamed a [K,N] weight once per 4 rows). HIGH: 4 x 2.
constexpr int mr_nk(int P) { return P == kHigh ? 4 : 8; }
constexpr int mr_kn(int) { return 4; }
constexpr int nr_of(int P) { return P == kHigh ? 2 : 1; }
constexpr int nv_of(int) { return 2; }
constexpr bool kTallKn = true;  // DEFAULT [K,N] row groups of 5-8 rows: 8 x 1 vector tiles
#endif

// numeric.h's round_bf16 on each lane, bit for bit: RNE on the bit pattern, NaN quieted
// (payload top bits kept), a carry out of the max finite value gives inf. Flush: results
// with a zero exponent (bf16 subnormals) become +0, as the native bf16 kernels read them.
template <bool Flush>
HWY_INLINE V round_v(V x) {
  const DU du;
  const auto u = hn::BitCast(du, x);
  auto r = hn::Add(u, hn::Add(hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)), hn::Set(du, 0x7FFFu)));
  r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), hn::Or(u, hn::Set(du, 0x00400000u)), r);
  r = hn::And(r, hn::Set(du, 0xFFFF0000u));
  if constexpr (Flush) r = hn::IfThenZeroElse(hn::Eq(hn::And(r, hn::Set(du, 0x7F800000u)), hn::Zero(du)), r);
  return hn::BitCast(D(), r);
}

template <bool Flush>
float round_s(float x) {
  float r = round_bf16(x);
  return Flush && (f32_bits(r) & 0x7F800000u) == 0 ? 0.0f : r;
}

// One weight vector's parts for precision P: DEFAULT hi = bf16(w); HIGH hi = bf16(w) and
// lo = hi + bf16(w - hi) (exact in f32; the bf16 parts from the unflushed hi, as dot.cpp's
// packing, each flushed when the native kernel would read it as zero).
template <int P, bool Flush>
HWY_INLINE void split_v(V w, V& hi, V& lo) {
  if constexpr (P == kDefault) {
    hi = round_v<Flush>(w);
  } else {
    const V h = round_v<false>(w);
    lo = round_v<Flush>(hn::Sub(w, h));
    if constexpr (Flush) {
      const DU du;
      hi = hn::IfThenZeroElse(hn::RebindMask(D(), hn::Eq(hn::And(hn::BitCast(du, h), hn::Set(du, 0x7F800000u)), hn::Zero(du))), h);
    } else {
      hi = h;
    }
    lo = hn::Add(hi, lo);
  }
  (void)lo;
}

// acc += a * w in precision P (a, w split by split_v). HIGH: a_lo * w_hi, then
// a_hi * (w_hi + w_lo), whose product the FMA takes exactly: hi*hi + hi*lo + lo*hi in two FMAs.
template <int P>
HWY_INLINE V fma_p(V ah, V al, V wh, V wl, V acc) {
  if constexpr (P == kHigh) return hn::MulAdd(ah, wl, hn::MulAdd(al, wh, acc));
  (void)al;
  (void)wl;
  return hn::MulAdd(ah, wh, acc);
}

// [N,K] weight: C[m, j] = sum_k A[m, k] W[j, k] for MR rows of A (split, rows of kp >= K
// floats, zero padded to whole vectors; HIGH's lo parts `lo` floats after the hi parts) and
// NR rows of W (row stride K, split here). Lane partial sums over k, then one horizontal sum
// per result.
template <int MR, int NR, int P, bool Flush>
HWY_NOINLINE void tile_nk(const float* HWY_RESTRICT a, int64_t kp, int64_t lo, const float* HWY_RESTRICT w,
                          int64_t K, float* HWY_RESTRICT c, int64_t ldc) {
  const D d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  V acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = hn::Zero(d);
  auto step = [&](int64_t k, const V* wh, const V* wl) HWY_ATTR {
    for (int m = 0; m < MR; ++m) {
      const V ah = hn::LoadU(d, a + m * kp + k);
      const V al = P == kHigh ? hn::LoadU(d, a + lo + m * kp + k) : ah;
      for (int r = 0; r < NR; ++r) acc[m][r] = fma_p<P>(ah, al, wh[r], wl[r], acc[m][r]);
    }
  };
  int64_t k = 0;
  for (; k + L <= K; k += L) {
    V wh[NR], wl[NR];
    for (int r = 0; r < NR; ++r) split_v<P, Flush>(hn::LoadU(d, w + r * K + k), wh[r], wl[r]);
    step(k, wh, wl);
  }
  if (k < K) {  // the tail: W zero-filled past K, A zero padded
    V wh[NR], wl[NR];
    for (int r = 0; r < NR; ++r)
      split_v<P, Flush>(hn::LoadN(d, w + r * K + k, static_cast<size_t>(K - k)), wh[r], wl[r]);
    step(k, wh, wl);
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) c[m * ldc + r] = hn::ReduceSum(d, acc[m][r]);
}

// [K,N] weight: C[m, cols] = A[m, k] * W[k, cols] summed over k in order (from +0, or onto C's
// partial sums when `load`), for MR rows of A (split, k-major: A[m, k] at a[k * lda + m];
// HIGH's lo parts `lo` floats after) and NV vectors of columns (`last` valid lanes in the last
// one when Partial).
template <int MR, int NV, int P, bool Flush, bool Partial>
HWY_NOINLINE void tile_kn(const float* HWY_RESTRICT a, int64_t lda, int64_t lo, const float* HWY_RESTRICT w,
                          int64_t ldw, int64_t K, float* HWY_RESTRICT c, int64_t ldc, size_t last, bool load) {
  const D d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  V acc[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) {
      if (!load) acc[m][v] = hn::Zero(d);
      else if (Partial && v == NV - 1) acc[m][v] = hn::LoadN(d, c + m * ldc + v * L, last);
      else acc[m][v] = hn::LoadU(d, c + m * ldc + v * L);
    }
  for (int64_t k = 0; k < K; ++k) {
    const float* wk = w + k * ldw;
    V wh[NV], wl[NV];
    for (int v = 0; v < NV; ++v)
      split_v<P, Flush>(Partial && v == NV - 1 ? hn::LoadN(d, wk + v * L, last) : hn::LoadU(d, wk + v * L), wh[v],
                        wl[v]);
    const float* ak = a + k * lda;
    for (int m = 0; m < MR; ++m) {
      const V ah = hn::Set(d, ak[m]);
      const V al = P == kHigh ? hn::Set(d, ak[lo + m]) : ah;
      for (int v = 0; v < NV; ++v) acc[m][v] = fma_p<P>(ah, al, wh[v], wl[v], acc[m][v]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) {
      if (Partial && v == NV - 1) hn::StoreN(acc[m][v], d, c + m * ldc + v * L, last);
      else hn::StoreU(acc[m][v], d, c + m * ldc + v * L);
    }
}

// DEFAULT [K,N] weight, streamed by rows: for a strip of columns, each weight row's part is
// read contiguously (a register tile instead reads 32-64 bytes per weight row, one page
// apart), rounded once, and FMAed into C rows kept in L1, 4 weight rows per C load/store.
// Per column the sum runs over k in order from +0, as in tile_kn: the same bits.
template <bool Flush>
HWY_NOINLINE void stream_kn(int mr, const float* HWY_RESTRICT a, int64_t lda, const float* HWY_RESTRICT w,
                            int64_t ldw, int64_t K, float* HWY_RESTRICT c, int64_t ldc, int64_t j0, int64_t j1) {
  const D d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  constexpr int64_t kStrip = 512;  // columns: 2 KB per C row, in L1
  constexpr int KB = 4;
  for (int64_t jb = j0; jb < j1; jb += kStrip) {
    const int64_t je = std::min(j1, jb + kStrip);
    for (int m = 0; m < mr; ++m) std::fill(c + m * ldc + jb, c + m * ldc + je, 0.0f);
    for (int64_t k = 0; k < K; k += KB) {
      const int kb = static_cast<int>(std::min<int64_t>(KB, K - k));
      for (int64_t j = jb; j < je; j += L) {
        const size_t n = static_cast<size_t>(std::min<int64_t>(L, je - j));
        const bool full = static_cast<int64_t>(n) == L;
        V wv[KB];
        for (int t = 0; t < KB; ++t) {
          if (t < kb) {
            const float* src = w + (k + t) * ldw + j;
            wv[t] = round_v<Flush>(full ? hn::LoadU(d, src) : hn::LoadN(d, src, n));
          }
        }
        for (int m = 0; m < mr; ++m) {
          float* cp = c + m * ldc + j;
          V acc = full ? hn::LoadU(d, cp) : hn::LoadN(d, cp, n);
          const float* ak = a + k * lda + m;
          if (kb == KB) {
            for (int t = 0; t < KB; ++t) acc = hn::MulAdd(hn::Set(d, ak[t * lda]), wv[t], acc);
          } else {
            for (int t = 0; t < kb; ++t) acc = hn::MulAdd(hn::Set(d, ak[t * lda]), wv[t], acc);
          }
          if (full) hn::StoreU(acc, d, cp);
          else hn::StoreN(acc, d, cp, n);
        }
      }
    }
  }
}

// Run-time rows/columns -> the tile instantiation (MR counts down from mr_of(P)).
template <int P, bool Flush, int MR = mr_nk(P), int NR = nr_of(P)>
void nk(int mr, int nr, const float* a, int64_t kp, int64_t lo, const float* w, int64_t K, float* c, int64_t ldc) {
  if (mr != MR) {
    if constexpr (MR > 1) nk<P, Flush, MR - 1, NR>(mr, nr, a, kp, lo, w, K, c, ldc);
  } else if (nr != NR) {
    if constexpr (NR > 1) nk<P, Flush, MR, NR - 1>(mr, nr, a, kp, lo, w, K, c, ldc);
  } else {
    tile_nk<MR, NR, P, Flush>(a, kp, lo, w, K, c, ldc);
  }
}

template <int P, bool Flush, bool Partial, int NV, int MR = mr_kn(P)>
void kn(int mr, const float* a, int64_t lda, int64_t lo, const float* w, int64_t ldw, int64_t K, float* c,
        int64_t ldc, size_t last, bool load) {
  if (mr != MR) {
    if constexpr (MR > 1) kn<P, Flush, Partial, NV, MR - 1>(mr, a, lda, lo, w, ldw, K, c, ldc, last, load);
  } else {
    tile_kn<MR, NV, P, Flush, Partial>(a, lda, lo, w, ldw, K, c, ldc, last, load);
  }
}

// [K,N] weight, columns [j0, j1) of MR-row tiles of NV vectors, in blocks of kKnCols columns x
// kKnRows weight rows: each block's rows are read as 1 KB runs (a tile alone walks K rows one
// page apart, 32-64 bytes each, and the half line a vector leaves is gone by the time its
// neighbour comes back for it); the partial sums go through C (exact f32 stores), so each
// column's sum still runs over k in order from +0: the same bits as one pass over K. On AVX2,
// M = 8, K = 1024, N = 4096: 28-35 -> 60-62 GFLOP/s (the f32 library GEMM: 42-67).
constexpr int64_t kKnCols = 256, kKnRows = 16;
template <int P, bool Flush, int NV, int MR>
void kn_blocked(int mr, const float* a, int64_t lda, int64_t lo, const float* w, int64_t N, int64_t K, float* c,
                int64_t j0, int64_t j1) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(D()));
  for (int64_t jb = j0; jb < j1; jb += kKnCols) {
    const int64_t je = std::min(j1, jb + kKnCols);
    for (int64_t k0 = 0; k0 < K; k0 += kKnRows) {
      const int64_t kb = std::min(kKnRows, K - k0);
      const float* ak = a + k0 * lda;
      const float* wk = w + k0 * N;
      const bool load = k0 > 0;
      int64_t j = jb;
      for (; j + NV * L <= je; j += NV * L) kn<P, Flush, false, NV, MR>(mr, ak, lda, lo, wk + j, N, kb, c + j, N, 0, load);
      for (; j + L <= je; j += L) kn<P, Flush, false, 1, MR>(mr, ak, lda, lo, wk + j, N, kb, c + j, N, 0, load);
      if (j < je) kn<P, Flush, true, 1, MR>(mr, ak, lda, lo, wk + j, N, kb, c + j, N, static_cast<size_t>(je - j), load);
    }
  }
}

// Columns [j0, j1) of one batch's C for every row group (A's lo parts `lo` floats after its hi).
template <int P, bool Flush>
void columns(const GemmShape& s, const float* a, int64_t kp, int64_t lo, const float* w, float* c, int64_t j0,
             int64_t j1) {
  const int64_t M = s.m, N = s.n, K = s.k;
  const int64_t L = static_cast<int64_t>(hn::Lanes(D()));
  constexpr int NR = nr_of(P), NV = nv_of(P);
  const int64_t MRP = s.trans_b ? mr_nk(P) : kTallKn && P == kDefault ? 8 : mr_kn(P);
  for (int64_t m0 = 0; m0 < M; m0 += MRP) {
    const int mr = static_cast<int>(std::min<int64_t>(MRP, M - m0));
    float* cm = c + m0 * N;
    if (s.trans_b) {
      for (int64_t j = j0; j < j1; j += NR) {
        const int nr = static_cast<int>(std::min<int64_t>(NR, j1 - j));
        nk<P, Flush>(mr, nr, a + m0 * kp, kp, lo, w + j * K, K, cm + j, N);
      }
    } else {
      const float* am = a + m0;  // k-major rows of M
      if constexpr (kTallKn && P == kDefault) {
        if (mr <= 2) {  // one or two rows: a register tile re-reads strided weight lines per row
          stream_kn<Flush>(mr, am, M, w, N, K, cm, N, j0, j1);
          continue;
        }
        if (mr > 4) {  // 8 x 1: each weight vector rounded once per 8 rows
          kn_blocked<P, Flush, 1, 8>(mr, am, M, lo, w, N, K, cm, j0, j1);
          continue;
        }
      }
      kn_blocked<P, Flush, NV, mr_kn(P)>(mr, am, M, lo, w, N, K, cm, j0, j1);
    }
  }
}

template <int P, bool Flush>
void run_t(const GemmShape& s, const float* a, const float* b, float* c) {
  const int64_t B = s.batch, M = s.m, N = s.n, K = s.k;
  const int64_t L = static_cast<int64_t>(hn::Lanes(D()));
  // A split once: [B, M, kp] rows zero padded to whole vectors ([N,K] weights) or k-major
  // [B, K, M] ([K,N] weights, read as broadcasts); HIGH keeps the lo parts right after the hi
  // parts of each batch (`lo` floats further on).
  const int64_t kp = s.trans_b ? (K + L - 1) / L * L : K;
  const int64_t lo = M * kp;
  const int64_t per_batch = P == kHigh ? 2 * lo : lo;
  thread_local std::vector<float> small;  // reused across calls; large ones are freed after
  std::vector<float> large;
  std::vector<float>& buf = B * per_batch <= (int64_t{1} << 16) ? small : large;
  buf.assign(static_cast<size_t>(B * per_batch), 0.0f);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const float x = s.trans_a ? a[(bi * K + k) * M + m] : a[(bi * M + m) * K + k];
        float* at = &buf[s.trans_b ? bi * per_batch + m * kp + k : bi * per_batch + k * M + m];
        if constexpr (P == kDefault) {
          at[0] = round_s<Flush>(x);
        } else {
          const float h = round_bf16(x);
          at[0] = Flush && (f32_bits(h) & 0x7F800000u) == 0 ? 0.0f : h;
          at[lo] = round_s<Flush>(x - h);
        }
      }
  // Column blocks: whole tiles, so that threads split at tile boundaries.
  const int64_t cols = s.trans_b ? nr_of(P) : nv_of(P) * L;
  const int64_t blocks = (N + cols - 1) / cols;
  const int64_t grain = std::max<int64_t>(1, kFmasPerThread / std::max<int64_t>(1, M * K * cols));
  const float* ab = buf.data();
  parallel_for_all(B * blocks, grain, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1;) {
      const int64_t bi = u / blocks, first = u % blocks;
      const int64_t last = std::min(blocks, first + (u1 - u));
      columns<P, Flush>(s, ab + bi * per_batch, kp, lo, b + bi * K * N, c + bi * M * N, first * cols,
                        std::min(N, last * cols));
      u += last - first;
    }
  });
}

}  // namespace

void run_small(const GemmShape& s, int p, const float* a, const float* b, float* c, bool flush) {
  if (p == kDefault) flush ? run_t<kDefault, true>(s, a, b, c) : run_t<kDefault, false>(s, a, b, c);
  else flush ? run_t<kHigh, true>(s, a, b, c) : run_t<kHigh, false>(s, a, b, c);
}
}  // namespace HWY_NAMESPACE
}  // namespace torch_tpu::host::gemv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace torch_tpu::host {
namespace gemv {
HWY_EXPORT(run_small);
}  // namespace gemv

bool gemm_small_takes(int64_t batch, int64_t m, int64_t k) {
  return m >= 1 && m <= gemv::kMaxRows && batch >= 0 && k >= 0 && batch * m * k <= gemv::kMaxSmallOperand;
}

bool gemm_small(const GemmShape& s, SmallPrecision p, const float* a, const float* b, float* c,
                bool flush_subnormals) {
  if (!gemm_small_takes(s.batch, s.m, s.k) || s.n < 0) return false;
  if (s.batch == 0 || s.n == 0) return true;
  if (s.k == 0) {
    std::memset(c, 0, sizeof(float) * s.batch * s.m * s.n);
    return true;
  }
  HWY_DYNAMIC_DISPATCH(gemv::run_small)(s, static_cast<int>(p), a, b, c, flush_subnormals);
  return true;
}

}  // namespace torch_tpu::host
#endif  // HWY_ONCE
