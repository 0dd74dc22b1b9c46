// dot_general on the host: operands are brought into [B, M, K] x [B, K, N] (a strided
// gather only when the layout needs it; f32/f64 operands already in [B, K, M] / [B, N, K]
// use BLAS transpose flags) and multiplied per batch with cblas_sgemm / cblas_dgemm.
// F32 precision follows the TPU: DEFAULT rounds both operands to bf16 (products exact,
// fp32 accumulation); HIGH is 3 bf16 passes hi*hi + hi*lo + lo*hi done as one sgemm
// with K tripled ([hi|hi|lo] x [hi;lo;hi]); HIGHEST is plain fp32. bf16/f16 operands are
// widened to float, multiplied in fp32 and rounded once. Integer dots wrap (64-bit
// accumulation).
#include <cblas.h>

#include <cstring>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

// Step data: i0..i3 = B, M, K, N. v0 = {lhs mode, rhs mode}: 0 = direct, 1 = direct and
// transposed ([B,K,M] / [B,N,K]), 2 = gathered by copies[0] / copies[1] into scratch.
// offsets = scratch byte offsets {lhs raw, rhs raw, lhs f, rhs f, lhs3, rhs3, out f}.
enum { kRawA, kRawB, kFA, kFB, kA3, kB3, kFC, kNumRegions };

char* region(const KernelArgs& a, int r) { return static_cast<char*>(a.scratch) + a.step.offsets[r]; }

// Operand in canonical or transposed layout.
struct Operand {
  const void* p;
  bool trans;
};

Operand operand(const KernelArgs& a, int which, size_t elem) {
  int mode = static_cast<int>(a.step.v0[which]);
  if (mode < 2) return {a.in[which], mode == 1};
  char* dst = region(a, which == 0 ? kRawA : kRawB);
  run_copy(a.step.copies[which], dst, a.in[which], elem);
  return {dst, false};
}

template <class T>
void gemm(const KernelArgs& a, Operand l, Operand r, T* c, int64_t K) {
  int64_t B = a.step.i0, M = a.step.i1, N = a.step.i3;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::memset(c, 0, sizeof(T) * B * M * N);
    return;
  }
  const T* A = static_cast<const T*>(l.p);
  const T* Bm = static_cast<const T*>(r.p);
  auto ta = l.trans ? CblasTrans : CblasNoTrans, tb = r.trans ? CblasTrans : CblasNoTrans;
  int lda = static_cast<int>(l.trans ? M : K), ldb = static_cast<int>(r.trans ? K : N);
  for (int64_t b = 0; b < B; ++b) {
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A + b * M * K, lda, Bm + b * K * N, ldb,
                  0.0f, c + b * M * N, N);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A + b * M * K, lda, Bm + b * K * N, ldb,
                  0.0, c + b * M * N, N);
  }
}

// Widens a gathered 16/32-bit operand to float, rounding to bf16 when asked.
template <DType D>
void to_float(const void* src, float* dst, int64_t n, bool round) {
  const auto* s = static_cast<const typename DT<D>::S*>(src);
  parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = DT<D>::load(s[i]);
      dst[i] = round ? round_bf16(v) : v;
    }
  });
}

// HIGH: lhs3[b, m, :] = [hi | hi | lo], rhs3[b, :, n] = [hi ; lo ; hi].
void split3(const float* a, float* a3, int64_t rows, int64_t K, bool lhs, int64_t B, int64_t N) {
  if (lhs) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < K; ++k) {
        float x = a[r * K + k], hi = round_bf16(x), lo = round_bf16(x - hi);
        a3[r * 3 * K + k] = hi;
        a3[r * 3 * K + K + k] = hi;
        a3[r * 3 * K + 2 * K + k] = lo;
      }
    return;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        float x = a[(b * K + k) * N + n], hi = round_bf16(x), lo = round_bf16(x - hi);
        float* o = a3 + b * 3 * K * N;
        o[k * N + n] = hi;
        o[(K + k) * N + n] = lo;
        o[(2 * K + k) * N + n] = hi;
      }
}

template <DType D>
void float_dot_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  int64_t B = a.step.i0, M = a.step.i1, K = a.step.i2, N = a.step.i3;
  auto prec = a.step.n->attrs.precision;
  if constexpr (D == DType::F64) {
    gemm<double>(a, operand(a, 0, 8), operand(a, 1, 8), static_cast<double*>(a.out), K);
  } else if (D == DType::F32 && prec == ir::Precision::Highest) {
    gemm<float>(a, operand(a, 0, 4), operand(a, 1, 4), static_cast<float*>(a.out), K);
  } else {
    Operand l = operand(a, 0, sizeof(S)), r = operand(a, 1, sizeof(S));
    float* fa = reinterpret_cast<float*>(region(a, kFA));
    float* fb = reinterpret_cast<float*>(region(a, kFB));
    bool round = D == DType::F32 && prec == ir::Precision::Default;
    to_float<D>(l.p, fa, B * M * K, round);
    to_float<D>(r.p, fb, B * K * N, round);
    l = {fa, false};
    r = {fb, false};
    int64_t kk = K;
    if (D == DType::F32 && prec == ir::Precision::High) {
      float* a3 = reinterpret_cast<float*>(region(a, kA3));
      float* b3 = reinterpret_cast<float*>(region(a, kB3));
      split3(fa, a3, B * M, K, true, B, N);
      split3(fb, b3, 0, K, false, B, N);
      l = {a3, false};
      r = {b3, false};
      kk = 3 * K;
    }
    if constexpr (D == DType::F32) {
      gemm<float>(a, l, r, static_cast<float*>(a.out), kk);
    } else {
      float* c = reinterpret_cast<float*>(region(a, kFC));
      gemm<float>(a, l, r, c, kk);
      S* o = static_cast<S*>(a.out);
      for (int64_t i = 0; i < B * M * N; ++i) o[i] = DT<D>::store(c[i]);
    }
  }
}

template <DType D>
void int_dot_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  int64_t B = a.step.i0, M = a.step.i1, K = a.step.i2, N = a.step.i3;
  const S* A = static_cast<const S*>(operand(a, 0, sizeof(S)).p);
  const S* Bm = static_cast<const S*>(operand(a, 1, sizeof(S)).p);
  S* o = static_cast<S*>(a.out);
  uint64_t* acc = reinterpret_cast<uint64_t*>(region(a, kFC));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) acc[n] = 0;
      for (int64_t k = 0; k < K; ++k) {
        uint64_t x = static_cast<uint64_t>(A[(b * M + m) * K + k]);
        const S* row = Bm + (b * K + k) * N;
        for (int64_t n = 0; n < N; ++n) acc[n] += x * static_cast<uint64_t>(row[n]);
      }
      for (int64_t n = 0; n < N; ++n) o[(b * M + m) * N + n] = static_cast<S>(acc[n]);
    }
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Fills the gather plan for one operand and returns its mode (see Step data above).
int plan_operand(const ir::Node& x, const std::vector<int64_t>& batch,
                 const std::vector<int64_t>& contract, bool lhs, bool may_trans, Step& s) {
  std::vector<int64_t> freed;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contract.begin(), contract.end(), d) == contract.end())
      freed.push_back(d);
  auto cat = [&](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> r = batch;
    r.insert(r.end(), a.begin(), a.end());
    r.insert(r.end(), b.begin(), b.end());
    return r;
  };
  std::vector<int64_t> canon = lhs ? cat(freed, contract) : cat(contract, freed);
  std::vector<int64_t> trans = lhs ? cat(contract, freed) : cat(freed, contract);
  std::vector<int64_t> xst = contiguous_strides(x.shape), src;
  ir::Shape shape;
  for (int64_t d : canon) {
    shape.push_back(x.shape[d]);
    src.push_back(xst[d]);
  }
  std::vector<int64_t> dst = contiguous_strides(shape);
  s.copies.push_back(make_copy_plan(shape, dst.data(), src.data()));
  if (is_identity(canon)) return 0;
  if (may_trans && is_identity(trans)) return 1;
  return 2;
}

}  // namespace

void prepare_dot(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& l = g.nodes()[n.operands[0]];
  const ir::Node& r = g.nodes()[n.operands[1]];
  const ir::Attrs& at = n.attrs;
  int64_t B = 1, M = 1, K = 1, N = 1;
  for (int64_t d : at.lhs_batch) B *= l.shape[d];
  for (int64_t d : at.lhs_contract) K *= l.shape[d];
  M = B * K == 0 ? 0 : ir::numel(l.shape) / (B * K);
  N = B * K == 0 ? 0 : ir::numel(r.shape) / (B * K);
  if (B * K == 0) {  // recover M and N from the result shape when the product is empty
    M = N = 1;
    size_t i = at.lhs_batch.size(), nl = l.shape.size() - at.lhs_batch.size() - at.lhs_contract.size();
    for (size_t j = 0; j < nl; ++j) M *= n.shape[i + j];
    for (size_t j = i + nl; j < n.shape.size(); ++j) N *= n.shape[j];
  }
  s.i0 = B, s.i1 = M, s.i2 = K, s.i3 = N;
  DType d = l.dtype;
  bool converts = ir::is_float(d) && !(d == DType::F64 || (d == DType::F32 && at.precision == ir::Precision::Highest));
  bool blas = ir::is_float(d) && !converts;
  int lm = plan_operand(l, at.lhs_batch, at.lhs_contract, true, blas, s);
  int rm = plan_operand(r, at.rhs_batch, at.rhs_contract, false, blas, s);
  if (converts) lm = rm = 2;
  s.v0 = {lm, rm};
  int64_t elem = static_cast<int64_t>(ir::dtype_size(d));
  int64_t sizes[kNumRegions] = {lm == 2 ? B * M * K * elem : 0,
                                rm == 2 ? B * K * N * elem : 0,
                                converts ? B * M * K * 4 : 0,
                                converts ? B * K * N * 4 : 0,
                                converts && at.precision == ir::Precision::High ? 3 * B * M * K * 4 : 0,
                                converts && at.precision == ir::Precision::High ? 3 * B * K * N * 4 : 0,
                                ir::is_float(d) ? (converts && d != DType::F32 ? B * M * N * 4 : 0) : N * 8};
  s.offsets.assign(kNumRegions, 0);
  for (int i = 0; i < kNumRegions; ++i) {
    s.offsets[i] = s.scratch_bytes;
    s.scratch_bytes += (sizes[i] + 63) / 64 * 64;
  }
  TPU_DISPATCH_DTYPE(d, {
    if constexpr (D == DType::Bool) s.fn = nullptr;
    else if constexpr (std::is_floating_point_v<typename DT<D>::C>) s.fn = &float_dot_kernel<D>;
    else s.fn = &int_dot_kernel<D>;
  })
  TPU_CHECK(s.fn != nullptr, "[host dot_general] no kernel for dtype ", ir::dtype_name(d));
}

}  // namespace torch_tpu::host
