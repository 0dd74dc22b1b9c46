// The host GEMM: batched row-major C[b] = op(A[b]) * op(B[b]) with f32 accumulation and an
// f32 result: oneDNN matmul (primitives cached by shape) for bf16; for f32 the faster of that
// primitive and oneDNN's sgemm, timed per shape on first use (TORCH_TPU_GEMM=fixed: a rule by
// CPU, the same in every process) (OpenBLAS sgemm for one
// f32 GEMM only with TORCH_TPU_GEMM=openblas: its spinning pthread pool fights our threads,
// docs/decisions/gemm.md); OpenBLAS for f64. Operands are f32, or bf16 where the CPU has a
// native bf16 kernel (gemm_has_bf16()). Thread-safe; synchronous on the calling thread.
// Large products run as single-threaded oneDNN calls, one per host pool thread (parallel.h);
// one f32 product of at least 2^29 multiply-adds runs whole on the OpenMP team.
#pragma once
#include <cstdint>

namespace torch_tpu::host {

enum class GemmType : uint8_t { F32, BF16 };

struct GemmShape {
  int64_t batch, m, n, k;
  bool trans_a;  // A stored [batch, k, m] instead of [batch, m, k]
  bool trans_b;  // B stored [batch, n, k] instead of [batch, k, n]
};

// True when oneDNN has a bf16 x bf16 -> f32 matmul on this CPU (AVX512-BF16, AMX,
// AVX2-VNNI-2); decided once per process by trying to create the primitive.
bool gemm_has_bf16();

// C (contiguous [batch, m, n]) = A x B. A and B hold elements of `type` (bf16 as uint16
// bit patterns). Products of bf16 inputs are exact in f32; sums are f32 in the library's
// order. m, n, k may be 0 (k = 0 writes zeros).
void gemm(const GemmShape& s, GemmType type, const void* a, const void* b, float* c);

// f32 products for few rows (decode / GEMV shapes, gemv.cpp) at DEFAULT and HIGH precision,
// reading A and B as stored (B, the large operand, is split in registers: no rounded copy is
// written):
//   Default  C = bf16(op(A)) x bf16(op(B)), exact products, f32 sums
//   High     hi*hi + hi*lo + lo*hi per product (hi = bf16(x), lo = bf16(x - hi)), f32 sums
// flush_subnormals: bf16 parts with a zero exponent count as zero, as the
// native bf16 kernels read them (pass gemm_has_bf16() where this replaces a bf16 GEMM). Returns
// false, writing nothing, when the shape is not one it handles (m > 16, or a large A); then
// use gemm. Each result is independent of the thread split; summation order differs from gemm's.
enum class SmallPrecision : uint8_t { Default, High };
bool gemm_small(const GemmShape& s, SmallPrecision p, const float* a, const float* b, float* c,
                bool flush_subnormals);
// Whether gemm_small takes a product of `batch` x [m, k] rows (planners use it to skip
// packing scratch and operand rewrites for the shapes it handles).
bool gemm_small_takes(int64_t batch, int64_t m, int64_t k);

// One f32 product by a named library kernel, whole and on this thread's OpenMP team (tests).
// Auto: gemm's kernel for the shape (once chosen, kept per shape); Tune: the shape's first
// call times both kernels and keeps the faster (TORCH_TPU_GEMM=tune's path).
enum class GemmKernel : uint8_t { Auto, Matmul, Sgemm, Tune };
void gemm_f32_with(const GemmShape& s, GemmKernel k, const float* a, const float* b, float* c);

// One small f32 product on the calling thread with oneDNN's sgemm: no primitive lookup, no
// timing, no thread split (kernels that already run one block per pool thread). With
// `accumulate`, C += A x B. `ld`: the distance between rows as stored (0: dense), for
// operands that are column blocks of a wider matrix (one head of [rows, heads, width]);
// batch > 1 only with dense operands.
struct GemmLd {
  int64_t a = 0, b = 0, c = 0;
};
void gemm_f32_serial(const GemmShape& s, const float* a, const float* b, float* c, bool accumulate = false,
                     GemmLd ld = {});

// Same for f64 (OpenBLAS dgemm, one call per batch).
void gemm_f64(const GemmShape& s, const double* a, const double* b, double* c);

}  // namespace torch_tpu::host
