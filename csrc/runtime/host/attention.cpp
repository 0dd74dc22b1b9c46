// Scaled dot-product attention kernels (attention.h): blocks of kBlock query rows per
// (batch, head); a block's scores, probabilities and gradients stay in per-thread scratch.
#include "runtime/host/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/host/gemm.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"
#include "runtime/host/vec_math.h"

namespace torch_tpu::host {
namespace {

constexpr int64_t kBlock = 64;  // query rows per block
// Multiply-adds a thread's share should hold before a problem is split over threads: a decode
// step's problems ([1 query] x [S keys] per head) run on the calling thread, no hand-off.
constexpr int64_t kMinSplitMacs = 32768;

// Tasks per chunk for parallel_for over tasks of `macs` multiply-adds each.
int64_t grain_of(int64_t macs) { return std::max<int64_t>(1, kMinSplitMacs / std::max<int64_t>(1, macs)); }
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Per-thread scratch (pool threads keep theirs between calls).
std::vector<float>& scratch(int i) {
  thread_local std::vector<float> s[2];
  return s[i];
}

float* sized(int i, int64_t n) {
  auto& v = scratch(i);
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

// c = a x b, or c += a x b with `acc`; rows of a, b and c `ld` apart as stored (0: dense).
void product(int64_t m, int64_t n, int64_t k, bool ta, bool tb, const float* a, const float* b, float* c,
             bool acc = false, GemmLd ld = {}) {
  gemm_f32_serial(GemmShape{1, m, n, k, ta, tb}, a, b, c, acc, ld);
}

// One tensor of problem bh as laid out (attention.h: heads outermost, or heads inner): where
// its row r starts, and the distance between rows.
struct Rows {
  const SdpaDims& d;
  int64_t len, width;
  int64_t offset(int64_t bh, int64_t r) const {
    if (!d.heads_inner) return (bh * len + r) * width;
    const int64_t H = d.heads_inner, b = bh / H, h = bh % H;
    return ((b * len + r) * H + h) * width;
  }
  int64_t ld() const { return d.heads_inner ? d.heads_inner * width : width; }
  void zero(float* base, int64_t bh) const {
    for (int64_t r = 0; r < len; ++r) std::fill_n(base + offset(bh, r), width, 0.0f);
  }
};

// Keys that query row i sees, of the block's sa.
int64_t keys_of(const SdpaDims& d, int64_t i, int64_t sa) { return d.causal ? std::min(sa, i + 1) : sa; }

// The keys a block of rows [i0, i1) sees (causal: up to its last row's).
int64_t block_keys(const SdpaDims& d, int64_t i1) { return d.causal ? std::min(d.S, i1) : d.S; }

// Row reductions in 8 independent lanes (the compiler vectorizes them; a single running sum
// would wait on each add's latency).
constexpr int kLanes = 8;

float row_max(const float* x, int64_t n) {
  float m[kLanes];
  std::fill(m, m + kLanes, kNegInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) m[l] = std::max(m[l], x[j + l]);
  for (; j < n; ++j) m[0] = std::max(m[0], x[j]);
  return *std::max_element(m, m + kLanes);
}

float row_sum(const float* x, int64_t n) {
  float s[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] += x[j + l];
  for (; j < n; ++j) s[0] += x[j];
  float t = 0.0f;
  for (float v : s) t += v;
  return t;
}

float row_dot(const float* x, const float* y, int64_t n) {
  float s[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] += x[j + l] * y[j + l];
  for (; j < n; ++j) s[0] += x[j] * y[j];
  float t = 0.0f;
  for (float v : s) t += v;
  return t;
}

void round_row(float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = round_bf16(x[j]);
}

// x[0, lim) scores -> probabilities (x[lim, n) zeroed); returns the row's logsumexp. A row
// whose scaled scores are all -inf (or that sees no key) gives zeros and -inf, as
// _safe_softmax; a NaN score makes the row NaN.
// Four passes over the row: the max (of the raw scores: x -> x * scale is monotonic for a
// positive scale, rounding included, so the max of the scaled scores is the scaled max), the
// shifted scores, exp, the sum, then one pass that normalizes (by the sum's reciprocal) and
// rounds.
float softmax_row(float* x, int64_t lim, int64_t n, float scale, bool round) {
  float mx;
  if (scale > 0.0f) {
    mx = row_max(x, lim) * scale;
  } else {
    for (int64_t j = 0; j < lim; ++j) x[j] *= scale;
    mx = row_max(x, lim);
    scale = 1.0f;
  }
  std::fill(x + lim, x + n, 0.0f);
  if (mx == kNegInf) {
    std::fill(x, x + lim, 0.0f);
    return kNegInf;
  }
  for (int64_t j = 0; j < lim; ++j) x[j] = x[j] * scale - mx;
  vec::exp_f32(x, x, lim);
  const float sum = row_sum(x, lim), inv = 1.0f / sum;
  if (round)
    for (int64_t j = 0; j < lim; ++j) x[j] = round_bf16(x[j] * inv);
  else
    for (int64_t j = 0; j < lim; ++j) x[j] *= inv;
  return mx + std::log(sum);
}

// p[0, lim) = exp(scale * s - lse) (the forward's probabilities, unrounded); p[lim, n) = 0.
void probs_row(float* p, int64_t lim, int64_t n, float scale, float lse) {
  std::fill(p + lim, p + n, 0.0f);
  if (lse == kNegInf) {
    std::fill(p, p + lim, 0.0f);
    return;
  }
  for (int64_t j = 0; j < lim; ++j) p[j] = p[j] * scale - lse;
  vec::exp_f32(p, p, lim);
}

}  // namespace

void sdpa_forward(const SdpaDims& d, const float* q, const float* k, const float* v, float* out, float* lse) {
  if (d.batch == 0 || d.L == 0) return;
  const Rows tq{d, d.L, d.E}, tk{d, d.S, d.E}, tv{d, d.S, d.Ev}, to{d, d.L, d.Ev};
  if (d.S == 0) {
    std::fill(out, out + d.batch * d.L * d.Ev, 0.0f);
    std::fill(lse, lse + d.batch * d.L, kNegInf);
    return;
  }
  const int64_t nq = (d.L + kBlock - 1) / kBlock;
  parallel_for(d.batch * nq, grain_of(std::min(d.L, kBlock) * d.S * (d.E + d.Ev)), [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t bh = it / nq, i0 = (it % nq) * kBlock, i1 = std::min(d.L, i0 + kBlock), m = i1 - i0;
      const int64_t sa = block_keys(d, i1);
      const float* Q = q + tq.offset(bh, i0);
      const float* K = k + tk.offset(bh, 0);
      const float* V = v + tv.offset(bh, 0);
      float* s = sized(0, m * sa);
      product(m, sa, d.E, false, true, Q, K, s, false, {tq.ld(), tk.ld(), 0});
      for (int64_t r = 0; r < m; ++r)
        lse[bh * d.L + i0 + r] = softmax_row(s + r * sa, keys_of(d, i0 + r, sa), sa, d.scale, d.round_bf16);
      product(m, d.Ev, sa, false, false, s, V, out + to.offset(bh, i0), false, {0, tv.ld(), to.ld()});
    }
  });
}

void sdpa_backward(const SdpaDims& d, const float* q, const float* k, const float* v, const float* dout,
                   const float* lse, float* dq, float* dk, float* dv) {
  if (d.batch == 0) return;
  if (d.L == 0 || d.S == 0) {  // no query or no key: every gradient is zero
    std::fill(dq, dq + d.batch * d.L * d.E, 0.0f);
    std::fill(dk, dk + d.batch * d.S * d.E, 0.0f);
    std::fill(dv, dv + d.batch * d.S * d.Ev, 0.0f);
    return;
  }
  const Rows tq{d, d.L, d.E}, tk{d, d.S, d.E}, tv{d, d.S, d.Ev}, to{d, d.L, d.Ev};
  const int64_t nq = (d.L + kBlock - 1) / kBlock;
  // One thread per (batch, head): its blocks add into the same dk and dv rows.
  parallel_for(d.batch, grain_of(d.L * d.S * (2 * d.E + 2 * d.Ev)), [&](int64_t b, int64_t e) {
    for (int64_t bh = b; bh < e; ++bh) {
      const float* K = k + tk.offset(bh, 0);
      const float* V = v + tv.offset(bh, 0);
      float* dK = dk + tk.offset(bh, 0);
      float* dV = dv + tv.offset(bh, 0);
      tk.zero(dk, bh);  // the blocks accumulate into them
      tv.zero(dv, bh);
      for (int64_t qb = 0; qb < nq; ++qb) {
        const int64_t i0 = qb * kBlock, i1 = std::min(d.L, i0 + kBlock), m = i1 - i0, sa = block_keys(d, i1);
        const float* Q = q + tq.offset(bh, i0);
        const float* dO = dout + to.offset(bh, i0);
        float* p = sized(0, m * sa);
        float* dp = sized(1, m * sa);
        product(m, sa, d.E, false, true, Q, K, p, false, {tq.ld(), tk.ld(), 0});
        for (int64_t r = 0; r < m; ++r)
          probs_row(p + r * sa, keys_of(d, i0 + r, sa), sa, d.scale, lse[bh * d.L + i0 + r]);
        // dV[:sa] += P^T dO (P as the forward's product read it)
        const float* pv = p;
        if (d.round_bf16) {
          for (int64_t j = 0; j < m * sa; ++j) dp[j] = round_bf16(p[j]);
          pv = dp;
        }
        product(sa, d.Ev, m, true, false, pv, dO, dV, true, {0, to.ld(), tv.ld()});
        // dP = dO V^T; dS = P (dP - rowsum(dP P)) * scale
        product(m, sa, d.Ev, false, true, dO, V, dp, false, {to.ld(), tv.ld(), 0});
        for (int64_t r = 0; r < m; ++r) {
          float* g = dp + r * sa;
          const float* pr = p + r * sa;
          const int64_t lim = keys_of(d, i0 + r, sa);
          const float dot = row_dot(g, pr, lim);
          for (int64_t j = 0; j < lim; ++j) g[j] = pr[j] * (g[j] - dot) * d.scale;
          std::fill(g + lim, g + sa, 0.0f);
          if (d.round_bf16) round_row(g, lim);
        }
        product(m, d.E, sa, false, false, dp, K, dq + tq.offset(bh, i0), false, {0, tk.ld(), tq.ld()});  // dQ rows
        product(sa, d.E, m, true, false, dp, Q, dK, true, {0, tq.ld(), tk.ld()});  // dK[:sa] += dS^T Q
      }
    }
  });
}

}  // namespace torch_tpu::host
