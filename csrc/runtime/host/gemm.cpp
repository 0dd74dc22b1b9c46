// host::gemm: a plain loop for tiny problems; oneDNN matmul for bf16 (one primitive per shape,
// layout and type, created on first use and kept in a process-wide cache; a mutex guards the
// map, and oneDNN allows executing one primitive from several threads); for f32 the faster of
// that primitive and oneDNN's sgemm, timed per cache entry on its first call (a fixed rule with
// TORCH_TPU_GEMM=fixed, and below the timing size); OpenBLAS dgemm
// for f64, and sgemm for a single f32 GEMM when TORCH_TPU_GEMM=openblas. See
// docs/decisions/gemm.md.
#include "runtime/host/gemm.h"

#include "runtime/host/dnnl_scratch.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <omp.h>
#include <memory>
#include <mutex>
#include <vector>
#include <type_traits>

#include "base/config.h"
#include "base/error.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// One oneDNN call's operands: [batch, rows, cols] with explicit strides (a part of a split
// problem reads a block of rows or columns of the whole).
struct Mat {
  memory::dims dims, strides;
};

// [batch, rows, cols] stored either row-major or with the last two dims swapped.
Mat whole(int64_t b, int64_t rows, int64_t cols, bool trans) {
  return {{b, rows, cols}, trans ? memory::dims{rows * cols, 1, rows} : memory::dims{rows * cols, cols, 1}};
}

// Which kernel runs an entry's f32 problem: unknown until its first call times both.
enum Kernel : int { kUntuned = -1, kMatmul = 0, kSgemm = 1 };

struct Entry {
  dnnl::matmul prim;
  memory::desc a, b, c, scratch;
  std::atomic<int> kernel{kUntuned};
};

// The key: the three operands' dims and strides, the type, and the creating thread's OpenMP
// thread count (oneDNN sizes a primitive's per-thread scratch by it, so a primitive made on a
// thread with fewer threads would overrun its scratchpad on a wider team).
using Key = std::vector<int64_t>;

std::shared_ptr<Entry> make_entry(const Mat& a, const Mat& b, const Mat& c, GemmType t) {
  auto e = std::make_shared<Entry>();
  auto dt = t == GemmType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
  e->a = memory::desc(a.dims, dt, a.strides);
  e->b = memory::desc(b.dims, dt, b.strides);
  e->c = memory::desc(c.dims, memory::data_type::f32, c.strides);
  dnnl::matmul::primitive_desc pd(engine(), e->a, e->b, e->c, user_scratchpad_attr());
  e->scratch = pd.scratchpad_desc();
  e->prim = dnnl::matmul(pd);
  return e;
}

std::shared_ptr<Entry> lookup(const Mat& a, const Mat& b, const Mat& c, GemmType t) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<Entry>> cache;
  Key key;
  key.reserve(20);
  for (const Mat* m : {&a, &b, &c}) {
    key.insert(key.end(), m->dims.begin(), m->dims.end());
    key.insert(key.end(), m->strides.begin(), m->strides.end());
  }
  key.push_back(static_cast<int64_t>(t));
  key.push_back(omp_get_max_threads());
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto e = make_entry(a, b, c, t);  // outside the lock: creation takes ~0.5 ms
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();  // shapes are usually few; bound pathological use
  return cache.emplace(key, e).first->second;
}

void run_matmul(const Entry& e, const void* a, const void* b, float* c) {
  thread_local dnnl::stream stream(engine());
  memory xa(e.a, engine(), const_cast<void*>(a)), xb(e.b, engine(), const_cast<void*>(b));
  memory xc(e.c, engine(), c);
  e.prim.execute(stream, {{DNNL_ARG_SRC, xa}, {DNNL_ARG_WEIGHTS, xb}, {DNNL_ARG_DST, xc},
                          {DNNL_ARG_SCRATCHPAD, thread_scratchpad(engine(), e.scratch)}});
  stream.wait();
}

// A [batch, rows, cols] operand as dnnl_sgemm reads it (row-major, one call per batch):
// 'N' with ld = the row stride, or 'T' (stored [cols, rows]) with ld = the column stride.
struct SgemmOperand {
  char trans;
  int64_t ld;
};

bool sgemm_operand(const Mat& m, SgemmOperand* out) {
  const int64_t rows = m.dims[1], cols = m.dims[2];
  if (m.strides[2] == 1 && m.strides[1] >= std::max<int64_t>(cols, 1)) *out = {'N', m.strides[1]};
  else if (m.strides[1] == 1 && m.strides[2] >= std::max<int64_t>(rows, 1)) *out = {'T', m.strides[2]};
  else return false;
  return true;
}

// Whether dnnl_sgemm can read all three operands as laid out.
bool sgemm_reads(const Mat& ma, const Mat& mb, const Mat& mc, SgemmOperand* oa, SgemmOperand* ob) {
  return sgemm_operand(ma, oa) && sgemm_operand(mb, ob) && mc.strides[2] == 1;
}

// oneDNN's sgemm (its jit GEMM kernels, the ones PyTorch's mkldnn matmul used before brgemm):
// on AVX2 it runs at OpenBLAS's speed where the matmul primitive's brgemm reaches 35-80 % of it
// (docs/decisions/gemm.md). Threads: the calling thread's OpenMP count (1 here).
void run_sgemm(const Mat& ma, const Mat& mb, const Mat& mc, const float* a, const float* b, float* c,
               float beta = 0.0f) {
  SgemmOperand oa{}, ob{};
  TPU_CHECK(sgemm_reads(ma, mb, mc, &oa, &ob), "[host gemm] sgemm got a layout it cannot read");
  const int64_t M = mc.dims[1], N = mc.dims[2], K = ma.dims[2];
  for (int64_t i = 0; i < mc.dims[0]; ++i) {
    dnnl_status_t st = dnnl_sgemm(oa.trans, ob.trans, M, N, K, 1.0f, a + i * ma.strides[0], oa.ld, b + i * mb.strides[0],
                                  ob.ld, beta, c + i * mc.strides[0], mc.strides[1]);
    TPU_CHECK(st == dnnl_success, "[host gemm] dnnl_sgemm failed; got status ", static_cast<int>(st),
              ", expected success");
  }
}

// Products below this many multiply-adds are not timed: the matmul primitive keeps them.
constexpr int64_t kTuneMacs = int64_t{1} << 16;

template <class F>
double seconds_of(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The first call of an f32 entry runs both kernels twice, interleaved, and publishes the faster
// (the first thread to finish decides; the output is left by the published kernel, so every
// call of this shape in the process gives the same bits).
int tune(Entry& e, const Mat& ma, const Mat& mb, const Mat& mc, const float* a, const float* b, float* c) {
  auto matmul = [&] { run_matmul(e, a, b, c); };
  auto sgemm = [&] { run_sgemm(ma, mb, mc, a, b, c); };
  double tm = seconds_of(matmul), ts = seconds_of(sgemm);
  tm = std::min(tm, seconds_of(matmul));
  ts = std::min(ts, seconds_of(sgemm));
  int want = ts < tm ? kSgemm : kMatmul;
  int expected = kUntuned;
  if (!e.kernel.compare_exchange_strong(expected, want)) want = expected;
  if (want == kMatmul) matmul();  // the last timed run was sgemm's
  return want;
}

// The kernel without timing (TORCH_TPU_GEMM=fixed, and products too small to time: the same in
// every process on a machine): sgemm where oneDNN's matmul has no AVX-512 kernels (its AVX2 brgemm
// ran at 35-80 % of sgemm on large and transposed shapes, docs/decisions/gemm.md), else the
// matmul primitive (measured on AVX-512 machines since session 2).
int rule_kernel() {
  static const int k = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core ? kMatmul : kSgemm;
  return k;
}

void run_dnnl(const Mat& ma, const Mat& mb, const Mat& mc, GemmType t, const void* a, const void* b, float* c) {
  auto e = lookup(ma, mb, mc, t);
  if (t == GemmType::F32) {
    int k = e->kernel.load(std::memory_order_relaxed);
    if (k == kUntuned) {
      SgemmOperand oa{}, ob{};
      const auto pick = config().gemm;
      const bool readable = sgemm_reads(ma, mb, mc, &oa, &ob);
      const bool big = ma.dims[0] * ma.dims[1] * ma.dims[2] * mb.dims[2] >= kTuneMacs;
      if (!readable || pick == Config::Gemm::Matmul) k = kMatmul;
      else if (pick == Config::Gemm::Sgemm) k = kSgemm;
      else if (pick == Config::Gemm::Tune && big)
        return void(tune(*e, ma, mb, mc, static_cast<const float*>(a), static_cast<const float*>(b), c));
      else k = pick == Config::Gemm::Tune ? kMatmul : rule_kernel();
      e->kernel.store(k, std::memory_order_relaxed);
    }
    if (k == kSgemm) return run_sgemm(ma, mb, mc, static_cast<const float*>(a), static_cast<const float*>(b), c);
  }
  run_matmul(*e, a, b, c);
}

// Runs the problem as `parts` single-threaded oneDNN calls on the host pool (parallel.h), split
// along the batch, the rows of A and C, or the columns of B and C. oneDNN's own threads are
// OpenMP's: a team whose helper libgomp wakes with a futex per call once a PyTorch process has
// two teams (parallel.cpp), 15-35 us (and more after idling) on a 2-vCPU VM, per GEMM.
// Returns false when the problem is too small to split.
constexpr int64_t kSplitGemm = int64_t{1} << 20;  // batch * m * n * k

// Sets this thread's OpenMP thread count for a scope (oneDNN runs one thread per call).
struct OmpThreads {
  int saved;
  explicit OmpThreads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved); }
};

bool gemm_split(const GemmShape& s, GemmType t, const void* a, const void* b, float* c) {
  // All of OpenMP's threads, not loop_threads(): a GEMM is worth both cores even while the
  // user's thread dispatches beside it (as oneDNN's own team did before the pool).
  int threads = pool::in_task() ? 1 : omp_get_max_threads();
  if (s.batch * s.m * s.n * s.k < kSplitGemm) threads = 1;
  const int64_t es = t == GemmType::F32 ? 4 : 2;
  const int64_t B = s.batch, M = s.m, N = s.n, K = s.k;
  // Splits: batch when there are enough, else along the longer of rows (at least 32 each) and
  // columns (at least 64 each). Each part packs (and streams from memory) all of the operand
  // the split does not cut: split by rows, every part reads all of B (K x N); by columns, all
  // of A (M x K). A weight gradient (128 x 1024 x 512, A transposed) ran at 34 GFLOP/s per
  // part split by rows, each part reading all of the 2 MB B for 64 rows of work.
  enum { kWhole, kBatch, kRows, kCols } how = kWhole;
  int64_t extent = 1;
  if (threads > 1) {
    const bool rows_ok = M >= 32 * threads, cols_ok = N >= 64 * threads;
    if (B >= threads) how = kBatch, extent = B;
    else if (rows_ok && (M >= N || !cols_ok)) how = kRows, extent = M;
    else if (cols_ok) how = kCols, extent = N;
  }
  if (how == kWhole) return false;
  const char* pa = static_cast<const char*>(a);
  const char* pb = static_cast<const char*>(b);
  auto part = [&](int64_t lo, int64_t hi) {
    OmpThreads one(1);
    int64_t cnt = hi - lo;
    Mat ma = whole(B, M, K, s.trans_a), mb = whole(B, K, N, s.trans_b), mc = whole(B, M, N, false);
    const char* xa = pa;
    const char* xb = pb;
    float* xc = c;
    if (how == kBatch) {
      ma.dims[0] = mb.dims[0] = mc.dims[0] = cnt;
      xa += lo * M * K * es;
      xb += lo * K * N * es;
      xc += lo * M * N;
    } else if (how == kRows) {
      ma.dims[1] = mc.dims[1] = cnt;
      xa += (s.trans_a ? lo : lo * K) * es;
      xc += lo * N;
    } else {
      mb.dims[2] = mc.dims[2] = cnt;
      xb += (s.trans_b ? lo * K : lo) * es;
      xc += lo;
    }
    run_dnnl(ma, mb, mc, t, xa, xb, xc);
  };
  parallel_chunks(extent, threads, part);  // one part per thread
  return true;
}

// One large f32 GEMM runs as one library call on the calling thread's OpenMP team instead of
// split parts: the library's threads share packed panels of B, where two independent parts
// each pack (and stream from memory) all of it. 512x768x3072 on this 2-vCPU AVX2 VM: split
// 75-89 GFLOP/s, one sgemm on two OpenMP threads 155-158 (PyTorch's OpenBLAS 150-178). The
// team's wake-up (~20-100 us, docs/decisions/host-thread-pool.md) is a few percent of a
// product this large.
bool gemm_on_team(const GemmShape& s, GemmType t) {
  return t == GemmType::F32 && s.batch == 1 && s.m * s.n * s.k >= config().gemm_team_macs && !pool::in_task() &&
         omp_get_max_threads() > 1 && config().gemm != Config::Gemm::Matmul;
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
      make_entry(whole(1, 64, 64, false), whole(1, 64, 64, false), whole(1, 64, 64, false), GemmType::BF16);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

// A product with no multiply-add: nothing to write, or zeros (k = 0). Returns whether it was.
static bool empty_product(const GemmShape& s, float* c) {
  if (s.batch == 0 || s.m == 0 || s.n == 0) return true;
  if (s.k != 0) return false;
  std::memset(c, 0, sizeof(float) * s.batch * s.m * s.n);
  return true;
}

void gemm(const GemmShape& s, GemmType t, const void* a, const void* b, float* c) {
  if (empty_product(s, c)) return;
  if (s.batch * s.m * s.n * s.k <= kTinyGemm) {
    if (t == GemmType::F32) gemm_tiny(s, static_cast<const float*>(a), static_cast<const float*>(b), c);
    else gemm_tiny(s, static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), c);
    return;
  }
  TPU_CHECK(t == GemmType::F32 || gemm_has_bf16(), "[host gemm] no bf16 kernel on this CPU");
  if (t == GemmType::F32 && s.batch == 1 && config().gemm == Config::Gemm::OpenBlas) {  // TORCH_TPU_GEMM=openblas
    auto ta = s.trans_a ? CblasTrans : CblasNoTrans, tb = s.trans_b ? CblasTrans : CblasNoTrans;
    int lda = static_cast<int>(s.trans_a ? s.m : s.k), ldb = static_cast<int>(s.trans_b ? s.k : s.n);
    cblas_sgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0f, static_cast<const float*>(a), lda,
                static_cast<const float*>(b), ldb, 0.0f, c, s.n);
    return;
  }
  if (gemm_on_team(s, t)) {
    run_dnnl(whole(1, s.m, s.k, s.trans_a), whole(1, s.k, s.n, s.trans_b), whole(1, s.m, s.n, false), t, a, b, c);
    return;
  }
  if (gemm_split(s, t, a, b, c)) return;
  OmpThreads one(1);  // small: one thread (an OpenMP team's wake-up costs more than it saves)
  run_dnnl(whole(s.batch, s.m, s.k, s.trans_a), whole(s.batch, s.k, s.n, s.trans_b), whole(s.batch, s.m, s.n, false),
           t, a, b, c);
}

void gemm_f32_with(const GemmShape& s, GemmKernel k, const float* a, const float* b, float* c) {
  Mat ma = whole(s.batch, s.m, s.k, s.trans_a), mb = whole(s.batch, s.k, s.n, s.trans_b), mc = whole(s.batch, s.m, s.n, false);
  if (k == GemmKernel::Sgemm) return run_sgemm(ma, mb, mc, a, b, c);
  if (k == GemmKernel::Matmul) return run_matmul(*lookup(ma, mb, mc, GemmType::F32), a, b, c);
  if (k == GemmKernel::Tune) {
    auto e = lookup(ma, mb, mc, GemmType::F32);
    SgemmOperand oa{}, ob{};
    if (e->kernel.load() == kUntuned && sgemm_reads(ma, mb, mc, &oa, &ob))
      return void(tune(*e, ma, mb, mc, a, b, c));
  }
  run_dnnl(ma, mb, mc, GemmType::F32, a, b, c);
}

void gemm_f32_serial(const GemmShape& s, const float* a, const float* b, float* c, bool accumulate, GemmLd ld) {
  if (s.batch == 0 || s.m == 0 || s.n == 0) return;
  if (s.k == 0) {
    if (!accumulate)
      for (int64_t bi = 0; bi < s.batch; ++bi)
        for (int64_t i = 0; i < s.m; ++i) std::memset(c + bi * s.m * s.n + i * (ld.c ? ld.c : s.n), 0, sizeof(float) * s.n);
    return;
  }
  OmpThreads one(1);
  // A stored [m, k] (or [k, m] transposed) with rows ld.a apart; the same for B and C
  auto mat = [](int64_t b, int64_t rows, int64_t cols, bool trans, int64_t ld) {
    Mat m = whole(b, rows, cols, trans);
    if (ld) (trans ? m.strides[2] : m.strides[1]) = ld;
    return m;
  };
  run_sgemm(mat(s.batch, s.m, s.k, s.trans_a, ld.a), mat(s.batch, s.k, s.n, s.trans_b, ld.b),
            mat(s.batch, s.m, s.n, false, ld.c), a, b, c, accumulate ? 1.0f : 0.0f);
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
