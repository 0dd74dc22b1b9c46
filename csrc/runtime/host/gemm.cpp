// host::gemm: a plain loop for tiny problems; oneDNN matmul for f32 and bf16 (one primitive per shape, layout and type,
// created on first use and kept in a process-wide cache; a mutex guards the map, and oneDNN
// allows executing one primitive from several threads); OpenBLAS dgemm for f64, and sgemm
// for a single f32 GEMM when TORCH_TPU_GEMM=openblas. See docs/decisions/gemm.md.
#include "runtime/host/gemm.h"

#include "runtime/host/dnnl_scratch.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <omp.h>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "base/config.h"
#include "base/error.h"
#include "runtime/host/numeric.h"

namespace torch_tpu::host {
namespace {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

memory::data_type dnnl_type(GemmType t) {
  return t == GemmType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// [batch, rows, cols] stored either row-major or with the last two dims swapped.
memory::desc desc(int64_t b, int64_t rows, int64_t cols, bool trans, memory::data_type t) {
  memory::dims strides = trans ? memory::dims{rows * cols, 1, rows} : memory::dims{rows * cols, cols, 1};
  return memory::desc({b, rows, cols}, t, strides);
}

struct Entry {
  dnnl::matmul prim;
  memory::desc a, b, c, scratch;
};

// The last field: the creating thread's OpenMP thread count. oneDNN sizes a primitive's
// per-thread scratch by it, so a primitive made on a thread with fewer threads would overrun
// its scratchpad on a wider team.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, GemmType, int>;

std::shared_ptr<Entry> make_entry(const GemmShape& s, GemmType t) {
  auto e = std::make_shared<Entry>();
  e->a = desc(s.batch, s.m, s.k, s.trans_a, dnnl_type(t));
  e->b = desc(s.batch, s.k, s.n, s.trans_b, dnnl_type(t));
  e->c = desc(s.batch, s.m, s.n, false, memory::data_type::f32);
  dnnl::matmul::primitive_desc pd(engine(), e->a, e->b, e->c, user_scratchpad_attr());
  e->scratch = pd.scratchpad_desc();
  e->prim = dnnl::matmul(pd);
  return e;
}

std::shared_ptr<Entry> lookup(const GemmShape& s, GemmType t) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<Entry>> cache;
  Key key{s.batch, s.m, s.n, s.k, s.trans_a, s.trans_b, t, omp_get_max_threads()};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto e = make_entry(s, t);  // outside the lock: creation takes ~0.5 ms
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();  // shapes are usually few; bound pathological use
  return cache.emplace(key, e).first->second;
}

// Problems this small (an 8x8 or 16x16 matmul, a few heads of a tiny attention) cost less in
// a plain loop than oneDNN's per-call memory objects, cache lookup and stream (~1.5 us):
// `bench dispatch`'s 8x8 matmul. f32 sums in k order; bf16 products are exact in f32, as in
// the library kernels.
constexpr int64_t kTinyGemm = 4096;  // batch * m * n * k

// bf16 operands reach gemm only where the CPU has a native bf16 kernel, which treats subnormal
// bf16 inputs as zero (as a TPU's matrix unit does): so does this loop, whatever the size.
template <typename T>
float ld(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return (v & 0x7F80u) == 0 ? 0.0f : bf16_to_f32(v);
}

template <typename T>
void gemm_tiny(const GemmShape& s, const T* a, const T* b, float* c) {
  const int64_t m = s.m, n = s.n, k = s.k;
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    const T* A = a + bi * m * k;
    const T* B = b + bi * k * n;
    float* C = c + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      float* row = C + i * n;
      std::fill(row, row + n, 0.0f);
      for (int64_t kk = 0; kk < k; ++kk) {
        float av = ld(s.trans_a ? A[kk * m + i] : A[i * k + kk]);
        if (s.trans_b)
          for (int64_t j = 0; j < n; ++j) row[j] += av * ld(B[j * k + kk]);
        else
          for (int64_t j = 0; j < n; ++j) row[j] += av * ld(B[kk * n + j]);
      }
    }
  }
}

}  // namespace

bool gemm_has_bf16() {
  static const bool has = [] {
    try {
      make_entry({1, 64, 64, 64, false, false}, GemmType::BF16);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

void gemm(const GemmShape& s, GemmType t, const void* a, const void* b, float* c) {
  if (s.batch == 0 || s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    std::memset(c, 0, sizeof(float) * s.batch * s.m * s.n);
    return;
  }
  if (s.batch * s.m * s.n * s.k <= kTinyGemm) {
    if (t == GemmType::F32) gemm_tiny(s, static_cast<const float*>(a), static_cast<const float*>(b), c);
    else gemm_tiny(s, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), c);
    return;
  }
  TPU_CHECK(t == GemmType::F32 || gemm_has_bf16(), "[host gemm] no bf16 kernel on this CPU");
  if (t == GemmType::F32 && s.batch == 1 && !config().gemm_onednn) {  // OpenBLAS (TORCH_TPU_GEMM=openblas)
    auto ta = s.trans_a ? CblasTrans : CblasNoTrans, tb = s.trans_b ? CblasTrans : CblasNoTrans;
    int lda = static_cast<int>(s.trans_a ? s.m : s.k), ldb = static_cast<int>(s.trans_b ? s.k : s.n);
    cblas_sgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0f, static_cast<const float*>(a), lda,
                static_cast<const float*>(b), ldb, 0.0f, c, s.n);
    return;
  }
  auto e = lookup(s, t);
  thread_local dnnl::stream stream(engine());
  memory ma(e->a, engine(), const_cast<void*>(a)), mb(e->b, engine(), const_cast<void*>(b));
  memory mc(e->c, engine(), c);
  e->prim.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc},
                           {DNNL_ARG_SCRATCHPAD, thread_scratchpad(engine(), e->scratch)}});
  stream.wait();
}

void gemm_f64(const GemmShape& s, const double* a, const double* b, double* c) {
  if (s.batch == 0 || s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    std::memset(c, 0, sizeof(double) * s.batch * s.m * s.n);
    return;
  }
  auto ta = s.trans_a ? CblasTrans : CblasNoTrans, tb = s.trans_b ? CblasTrans : CblasNoTrans;
  int lda = static_cast<int>(s.trans_a ? s.m : s.k), ldb = static_cast<int>(s.trans_b ? s.k : s.n);
  for (int64_t i = 0; i < s.batch; ++i)
    cblas_dgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0, a + i * s.m * s.k, lda, b + i * s.k * s.n, ldb,
                0.0, c + i * s.m * s.n, s.n);
}

}  // namespace torch_tpu::host
