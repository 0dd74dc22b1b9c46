// Host kernels of the linalg ops: triangular_solve (BLAS trsm) and the custom_call targets
// (LAPACK, custom_calls.def). Matrices arrive row-major; LAPACK wants column-major, so each
// matrix is transposed into a work buffer, factored by the same routine (and workspace
// query) PyTorch CPU uses, and transposed back. Batches loop in order on the calling thread
// (OpenBLAS threads inside a call), as PyTorch CPU does. A step of a custom call writes
// every result of the call that the graph uses (plan.cpp groups them), so a decomposition
// runs once however many of its results are read.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "ir/custom_call.h"
#include "runtime/host/attention.h"
#include "runtime/host/kernels.h"
#include "runtime/host/lapack.h"

namespace torch_tpu::host {
namespace {

using ir::CustomCallTarget;
using ir::DType;

// row-major [r, c] -> column-major (ld = max(1, r)).
template <class T>
void to_cm(const T* src, int64_t r, int64_t c, T* dst) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) dst[j * r + i] = src[i * c + j];
}
// column-major [r, c] with leading dim ld -> row-major [r, c].
template <class T>
void from_cm(const T* src, int64_t r, int64_t c, int64_t ld, T* dst) {
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) dst[i * c + j] = src[j * ld + i];
}
int ld(int64_t r) { return static_cast<int>(std::max<int64_t>(1, r)); }
int lwork_of(double q) { return std::max(1, static_cast<int>(q)); }

// ---- triangular_solve ------------------------------------------------------------------
// Step data: i0 = batch, i1 = k (a's size), i2 = m, i3 = n (b's rows, cols).
// Row-major data is the transposed column-major matrix, so op(A) X = B (row-major) is
// X^T op(A)^T = B^T (column-major): the side and the triangle flip, the transpose stays.
template <class T>
void triangular_solve_kernel(const KernelArgs& a) {
  const Step& s = a.step;
  const auto& d = s.n->attrs.dims;
  int64_t batch = s.i0, k = s.i1, m = s.i2, n = s.i3;
  const T* A = static_cast<const T*>(a.in[0]);
  T* X = static_cast<T*>(a.out);
  std::memcpy(X, a.in[1], sizeof(T) * batch * m * n);
  if (batch * m * n == 0) return;
  char side = d[0] ? 'R' : 'L', uplo = d[1] ? 'U' : 'L', diag = d[2] ? 'U' : 'N';
  char trans = d[3] == 0 ? 'N' : 'T';
  int M = static_cast<int>(n), N = static_cast<int>(m), lda = ld(k), ldb = ld(n);
  T one = 1;
  for (int64_t b = 0; b < batch; ++b)
    lapack::trsm(static_cast<T*>(nullptr), &side, &uplo, &trans, &diag, &M, &N, &one, A + b * k * k, &lda,
                 X + b * m * n, &ldb, size_t{1}, size_t{1}, size_t{1}, size_t{1});
}

// ---- custom calls ------------------------------------------------------------------------
// Step data: i0 = batch, v1 = {rows, cols} of operand 0 then target-specific sizes (below),
// v0 = result index of each entry of s.results. Kernels get out[r] for result r (nullptr if
// the graph does not read it).
struct Call {
  const Step& s;
  const void* const* in;
  void* out[4];
  int64_t p(int i) const { return s.n->attrs.dims[1 + i]; }
};

template <class T>
T* res(const Call& c, int r) { return static_cast<T*>(c.out[r]); }

template <class T>
void getrf(const Call& c) {
  int64_t B = c.s.i0, m = c.s.v1[0], n = c.s.v1[1], k = std::min(m, n);
  const T* a = static_cast<const T*>(c.in[0]);
  std::vector<T> w(m * n);
  std::vector<int> piv(std::max<int64_t>(k, 1));
  int M = static_cast<int>(m), N = static_cast<int>(n), lda = ld(m);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * m * n, m, n, w.data());
    int info = 0;
    lapack::getrf(static_cast<T*>(nullptr), &M, &N, w.data(), &lda, piv.data(), &info);
    if (T* lu = res<T>(c, 0)) from_cm(w.data(), m, n, m, lu + b * m * n);
    if (int* p = res<int>(c, 1)) std::copy(piv.begin(), piv.begin() + k, p + b * k);
    if (int* i = res<int>(c, 2)) i[b] = info;
  }
}

template <class T>
void geqrf(const Call& c) {
  int64_t B = c.s.i0, m = c.s.v1[0], n = c.s.v1[1], k = std::min(m, n);
  const T* a = static_cast<const T*>(c.in[0]);
  std::vector<T> w(m * n), tau(std::max<int64_t>(k, 1));
  int M = static_cast<int>(m), N = static_cast<int>(n), lda = ld(m), info = 0, q = -1;
  T opt = 0;
  lapack::geqrf(static_cast<T*>(nullptr), &M, &N, w.data(), &lda, tau.data(), &opt, &q, &info);
  int lwork = lwork_of(opt);
  std::vector<T> work(lwork);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * m * n, m, n, w.data());
    lapack::geqrf(static_cast<T*>(nullptr), &M, &N, w.data(), &lda, tau.data(), work.data(), &lwork, &info);
    if (T* qr = res<T>(c, 0)) from_cm(w.data(), m, n, m, qr + b * m * n);
    if (T* t = res<T>(c, 1)) std::copy(tau.begin(), tau.begin() + k, t + b * k);
  }
}

// v1 = {m, n, k}
template <class T>
void orgqr(const Call& c) {
  int64_t B = c.s.i0, m = c.s.v1[0], n = c.s.v1[1], k = c.s.v1[2];
  const T* a = static_cast<const T*>(c.in[0]);
  const T* tau = static_cast<const T*>(c.in[1]);
  T* q = res<T>(c, 0);
  if (B * m * n == 0) return;
  std::vector<T> w(m * n);
  int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k), lda = ld(m), info = 0, qq = -1;
  T opt = 0;
  lapack::orgqr(static_cast<T*>(nullptr), &M, &N, &K, w.data(), &lda, tau, &opt, &qq, &info);
  int lwork = lwork_of(opt);
  std::vector<T> work(lwork);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * m * n, m, n, w.data());
    lapack::orgqr(static_cast<T*>(nullptr), &M, &N, &K, w.data(), &lda, tau + b * k, work.data(), &lwork, &info);
    from_cm(w.data(), m, n, m, q + b * m * n);
  }
}

// v1 = {r, kc (reflector matrix cols), k (tau), cm, cn}
template <class T>
void ormqr(const Call& c) {
  int64_t B = c.s.i0, r = c.s.v1[0], kc = c.s.v1[1], k = c.s.v1[2], cm = c.s.v1[3], cn = c.s.v1[4];
  const T* a = static_cast<const T*>(c.in[0]);
  const T* tau = static_cast<const T*>(c.in[1]);
  const T* cc = static_cast<const T*>(c.in[2]);
  T* o = res<T>(c, 0);
  if (B * cm * cn == 0) return;
  char side = c.p(0) ? 'L' : 'R', trans = c.p(1) ? 'T' : 'N';
  std::vector<T> wa(std::max<int64_t>(r * kc, 1)), wc(cm * cn);
  int M = static_cast<int>(cm), N = static_cast<int>(cn), K = static_cast<int>(k), lda = ld(r), ldc = ld(cm);
  int info = 0, q = -1;
  T opt = 0;
  lapack::ormqr(static_cast<T*>(nullptr), &side, &trans, &M, &N, &K, wa.data(), &lda, tau, wc.data(), &ldc, &opt,
                &q, &info, size_t{1}, size_t{1});
  int lwork = lwork_of(opt);
  std::vector<T> work(lwork);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * r * kc, r, kc, wa.data());
    to_cm(cc + b * cm * cn, cm, cn, wc.data());
    lapack::ormqr(static_cast<T*>(nullptr), &side, &trans, &M, &N, &K, wa.data(), &lda, tau + b * k, wc.data(),
                  &ldc, work.data(), &lwork, &info, size_t{1}, size_t{1});
    from_cm(wc.data(), cm, cn, cm, o + b * cm * cn);
  }
}

template <class T>
void potrf(const Call& c) {
  int64_t B = c.s.i0, n = c.s.v1[0];
  const T* a = static_cast<const T*>(c.in[0]);
  bool lower = c.p(0) != 0;
  char uplo = lower ? 'L' : 'U';
  std::vector<T> w(n * n);
  int N = static_cast<int>(n), lda = ld(n);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * n * n, n, n, w.data());
    int info = 0;
    lapack::potrf(static_cast<T*>(nullptr), &uplo, &N, w.data(), &lda, &info, size_t{1});
    if (T* l = res<T>(c, 0)) {
      T* o = l + b * n * n;
      from_cm(w.data(), n, n, n, o);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          if (lower ? j > i : j < i) o[i * n + j] = 0;
    }
    if (int* i = res<int>(c, 1)) i[b] = info;
  }
}

template <class T>
void syevd(const Call& c) {
  int64_t B = c.s.i0, n = c.s.v1[0];
  const T* a = static_cast<const T*>(c.in[0]);
  char uplo = c.p(0) ? 'L' : 'U', jobz = c.p(1) ? 'V' : 'N';
  std::vector<T> w(std::max<int64_t>(n * n, 1)), ev(std::max<int64_t>(n, 1));
  int N = static_cast<int>(n), lda = ld(n), info = 0, q = -1, iopt = 0;
  T opt = 0;
  lapack::syevd(static_cast<T*>(nullptr), &jobz, &uplo, &N, w.data(), &lda, ev.data(), &opt, &q, &iopt, &q, &info,
                size_t{1}, size_t{1});
  int lwork = lwork_of(opt), liwork = std::max(1, iopt);
  std::vector<T> work(lwork);
  std::vector<int> iwork(liwork);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * n * n, n, n, w.data());
    lapack::syevd(static_cast<T*>(nullptr), &jobz, &uplo, &N, w.data(), &lda, ev.data(), work.data(), &lwork,
                  iwork.data(), &liwork, &info, size_t{1}, size_t{1});
    if (T* vals = res<T>(c, 0)) std::copy(ev.begin(), ev.begin() + n, vals + b * n);
    if (T* vecs = res<T>(c, 1); vecs && c.p(1)) from_cm(w.data(), n, n, n, vecs + b * n * n);
    if (int* i = res<int>(c, 2)) i[b] = info;
  }
}

template <class T>
void gesdd(const Call& c) {
  int64_t B = c.s.i0, m = c.s.v1[0], n = c.s.v1[1], k = std::min(m, n);
  const T* a = static_cast<const T*>(c.in[0]);
  bool full = c.p(0) != 0, uv = c.p(1) != 0;
  int64_t uc = uv ? (full ? m : k) : 0, vr = uv ? (full ? n : k) : 0;
  char jobz = uv ? (full ? 'A' : 'S') : 'N';
  std::vector<T> w(std::max<int64_t>(m * n, 1)), s(std::max<int64_t>(k, 1)), u(std::max<int64_t>(m * uc, 1)),
      vt(std::max<int64_t>(vr * n, 1));
  std::vector<int> iwork(std::max<int64_t>(8 * k, 1));
  int M = static_cast<int>(m), N = static_cast<int>(n), lda = ld(m), ldu = ld(m), ldvt = ld(vr), info = 0, q = -1;
  T opt = 0;
  lapack::gesdd(static_cast<T*>(nullptr), &jobz, &M, &N, w.data(), &lda, s.data(), u.data(), &ldu, vt.data(), &ldvt,
                &opt, &q, iwork.data(), &info, size_t{1});
  int lwork = lwork_of(opt);
  std::vector<T> work(lwork);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * m * n, m, n, w.data());
    if (k == 0) {  // LAPACK returns at once: U and Vh of an empty matrix are identities
      std::fill(u.begin(), u.end(), T(0));
      std::fill(vt.begin(), vt.end(), T(0));
      for (int64_t i = 0; i < std::min(m, uc); ++i) u[i * m + i] = 1;
      for (int64_t i = 0; i < std::min(vr, n); ++i) vt[i * vr + i] = 1;
      info = 0;
    } else {
      lapack::gesdd(static_cast<T*>(nullptr), &jobz, &M, &N, w.data(), &lda, s.data(), u.data(), &ldu, vt.data(),
                    &ldvt, work.data(), &lwork, iwork.data(), &info, size_t{1});
    }
    if (T* o = res<T>(c, 0)) std::copy(s.begin(), s.begin() + k, o + b * k);
    if (T* o = res<T>(c, 1)) from_cm(u.data(), m, uc, m, o + b * m * uc);
    if (T* o = res<T>(c, 2)) from_cm(vt.data(), vr, n, vr, o + b * vr * n);
    if (int* i = res<int>(c, 3)) i[b] = info;
  }
}

template <class T>
void sytrf(const Call& c) {
  int64_t B = c.s.i0, n = c.s.v1[0];
  const T* a = static_cast<const T*>(c.in[0]);
  char uplo = c.p(0) ? 'L' : 'U';
  std::vector<T> w(std::max<int64_t>(n * n, 1));
  std::vector<int> piv(std::max<int64_t>(n, 1));
  int N = static_cast<int>(n), lda = ld(n), info = 0, q = -1;
  T opt = 0;
  lapack::sytrf(static_cast<T*>(nullptr), &uplo, &N, w.data(), &lda, piv.data(), &opt, &q, &info, size_t{1});
  int lwork = lwork_of(opt);
  std::vector<T> work(lwork);
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * n * n, n, n, w.data());
    lapack::sytrf(static_cast<T*>(nullptr), &uplo, &N, w.data(), &lda, piv.data(), work.data(), &lwork, &info,
                  size_t{1});
    if (T* o = res<T>(c, 0)) from_cm(w.data(), n, n, n, o + b * n * n);
    if (int* p = res<int>(c, 1)) std::copy(piv.begin(), piv.begin() + n, p + b * n);
    if (int* i = res<int>(c, 2)) i[b] = info;
  }
}

// v1 = {n, n, nrhs}
template <class T>
void sytrs(const Call& c) {
  int64_t B = c.s.i0, n = c.s.v1[0], nrhs = c.s.v1[2];
  const T* a = static_cast<const T*>(c.in[0]);
  const int* piv = static_cast<const int*>(c.in[1]);
  const T* rhs = static_cast<const T*>(c.in[2]);
  T* x = res<T>(c, 0);
  if (B * n * nrhs == 0) return;
  char uplo = c.p(0) ? 'L' : 'U';
  std::vector<T> w(n * n), wb(n * nrhs);
  int N = static_cast<int>(n), R = static_cast<int>(nrhs), lda = ld(n), info = 0;
  for (int64_t b = 0; b < B; ++b) {
    to_cm(a + b * n * n, n, n, w.data());
    to_cm(rhs + b * n * nrhs, n, nrhs, wb.data());
    lapack::sytrs(static_cast<T*>(nullptr), &uplo, &N, &R, w.data(), &lda, piv + b * n, wb.data(), &lda, &info,
                  size_t{1});
    from_cm(wb.data(), n, nrhs, n, x + b * n * nrhs);
  }
}

// v1 = {k pivots}; param m.
void lu_pivots_to_permutation(const Call& c) {
  int64_t B = c.s.i0, k = c.s.v1[0], m = c.p(0);
  const int* piv = static_cast<const int*>(c.in[0]);
  int* perm = res<int>(c, 0);
  for (int64_t b = 0; b < B; ++b) {
    int* p = perm + b * m;
    std::iota(p, p + m, 0);
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = static_cast<int64_t>(piv[b * k + i]) - 1;
      if (j >= 0 && j < m) std::swap(p[i], p[j]);  // invalid pivots are skipped (checked by the caller)
    }
  }
}

// sdpa_fwd / sdpa_bwd (attention.h): i0 = batch x heads, v1 = {L, E, S, Ev, heads (0: heads
// outermost)}; params causal, scale bits, round_bf16, heads_inner. A result no
// step reads (logsumexp in inference, an unneeded gradient) has no buffer: the kernel writes
// it into scratch.
SdpaDims sdpa_dims(const Call& c) {
  uint32_t bits = static_cast<uint32_t>(c.p(1));
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  const auto& v = c.s.v1;
  return {c.s.i0, v[0], v[2], v[1], v[3], c.p(0) != 0, scale, c.p(2) != 0, v[4]};
}

float* or_scratch(const Call& c, int r, std::vector<float>& keep, int64_t n) {
  if (c.out[r]) return res<float>(c, r);
  keep.resize(static_cast<size_t>(n));
  return keep.data();
}

void sdpa_fwd_call(const Call& c) {
  SdpaDims d = sdpa_dims(c);
  std::vector<float> k0, k1;
  const auto* in = reinterpret_cast<const float* const*>(c.in);
  sdpa_forward(d, in[0], in[1], in[2], or_scratch(c, 0, k0, d.batch * d.L * d.Ev), or_scratch(c, 1, k1, d.batch * d.L));
}

void sdpa_bwd_call(const Call& c) {
  SdpaDims d = sdpa_dims(c);
  std::vector<float> k0, k1, k2;
  const auto* in = reinterpret_cast<const float* const*>(c.in);
  sdpa_backward(d, in[0], in[1], in[2], in[3], in[4], or_scratch(c, 0, k0, d.batch * d.L * d.E),
                or_scratch(c, 1, k1, d.batch * d.S * d.E), or_scratch(c, 2, k2, d.batch * d.S * d.Ev));
}

using CallFn = void (*)(const Call&);
template <class T>
CallFn call_fn(CustomCallTarget t) {
  switch (t) {
    case CustomCallTarget::Getrf: return &getrf<T>;
    case CustomCallTarget::Geqrf: return &geqrf<T>;
    case CustomCallTarget::Orgqr: return &orgqr<T>;
    case CustomCallTarget::Ormqr: return &ormqr<T>;
    case CustomCallTarget::Potrf: return &potrf<T>;
    case CustomCallTarget::Syevd: return &syevd<T>;
    case CustomCallTarget::Gesdd: return &gesdd<T>;
    case CustomCallTarget::Sytrf: return &sytrf<T>;
    case CustomCallTarget::Sytrs: return &sytrs<T>;
    case CustomCallTarget::LuPivotsToPermutation: return &lu_pivots_to_permutation;
    default: return nullptr;
  }
}

// Step data: i1 = the CallFn.
void custom_call_kernel(const KernelArgs& a) {
  const Step& s = a.step;
  Call c{s, a.in, {nullptr, nullptr, nullptr, nullptr}};
  for (size_t j = 0; j < s.results.size(); ++j) c.out[s.v0[j]] = a.outs ? a.outs[j] : a.out;
  reinterpret_cast<CallFn>(s.i1)(c);
}

}  // namespace

void prepare_linalg(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const auto& nodes = g.nodes();
  const ir::Node& x = nodes[n.operands[0]];
  if (n.op == ir::OpCode::TriangularSolve) {
    const ir::Node& b = nodes[n.operands[1]];
    size_t r = b.shape.size();
    s.i1 = x.shape[r - 1];
    s.i2 = b.shape[r - 2];
    s.i3 = b.shape[r - 1];
    s.i0 = s.i2 * s.i3 ? ir::numel(b.shape) / (s.i2 * s.i3) : 0;
    s.fn = x.dtype == DType::F64 ? &triangular_solve_kernel<double> : &triangular_solve_kernel<float>;
    return;
  }
  CustomCallTarget t = ir::target_of(n);
  if (s.results.empty()) s.results.push_back(s.node);
  s.v0.clear();
  for (int r : s.results) s.v0.push_back(nodes[r].attrs.dims[0]);
  if (t == CustomCallTarget::SdpaFwd || t == CustomCallTarget::SdpaBwd) {
    TPU_CHECK(x.dtype == DType::F32, "[host custom_call] sdpa takes f32 operands; got ", ir::dtype_name(x.dtype));
    const ir::Shape &qs = x.shape, &ks = nodes[n.operands[1]].shape, &vs = nodes[n.operands[2]].shape;
    const bool inner = n.attrs.dims[4] != 0;
    const size_t r = qs.size();
    if (inner) {
      s.i0 = qs[0] * qs[2];
      s.v1 = {qs[1], qs[3], ks[1], vs[3], qs[2]};
    } else {
      s.i0 = ir::numel(ir::Shape(qs.begin(), qs.end() - 2));
      s.v1 = {qs[r - 2], qs[r - 1], ks[r - 2], vs[r - 1], 0};
    }
    s.i1 = reinterpret_cast<int64_t>(t == CustomCallTarget::SdpaFwd ? &sdpa_fwd_call : &sdpa_bwd_call);
    s.fn = &custom_call_kernel;
    return;
  }
  size_t core = t == CustomCallTarget::LuPivotsToPermutation ? 1 : 2;
  ir::Shape batch(x.shape.begin(), x.shape.end() - core);
  s.i0 = ir::numel(batch);
  s.v1.assign(x.shape.end() - core, x.shape.end());
  auto last = [&](int i, size_t tail) {
    const ir::Shape& sh = nodes[n.operands[i]].shape;
    s.v1.insert(s.v1.end(), sh.end() - tail, sh.end());
  };
  if (t == CustomCallTarget::Orgqr) last(1, 1);
  if (t == CustomCallTarget::Ormqr) last(1, 1), last(2, 2);
  if (t == CustomCallTarget::Sytrs) s.v1.push_back(nodes[n.operands[2]].shape.back());

  CallFn fn = x.dtype == DType::F64 ? call_fn<double>(t) : call_fn<float>(t);
  TPU_CHECK(fn != nullptr, "[host custom_call] no kernel for target ", ir::custom_call_info(t).name);
  s.i1 = reinterpret_cast<int64_t>(fn);
  s.fn = &custom_call_kernel;
}

}  // namespace torch_tpu::host
