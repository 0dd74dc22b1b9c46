// Host kernels of triangular_solve and the LAPACK custom calls against simple references:
// each factorization is multiplied back (P L U = A, Q R = A, L L^T = A, A V = V diag(w),
// U diag(S) Vh = A), solves are checked by their residual, f32 and f64, batched, and the
// results of one call run as one step.
#include <random>

#include "ir/custom_call.h"
#include "runtime/host/plan.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using ir::CustomCallTarget;
using Mat = std::vector<double>;  // row-major

Value call(Graph& g, CustomCallTarget t, std::vector<Value> ops, int64_t i, std::vector<int64_t> p = {}) {
  return g.op(OpCode::CustomCall, std::move(ops), ir::custom_call_attrs(t, i, std::move(p)));
}
Tensor random(DType d, Shape s, uint32_t seed, double diag = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  int64_t n = s.back();
  return make(d, s, [&](int64_t i) { return u(rng) + ((i % (n * s.end()[-2])) % (n + 1) == 0 ? diag : 0); });
}
Mat mat(const Tensor& t, int64_t b, int64_t r, int64_t c) {
  Mat m(r * c);
  for (int64_t i = 0; i < r * c; ++i) m[i] = t.get(b * r * c + i);
  return m;
}
Mat mul(const Mat& a, const Mat& b, int64_t r, int64_t k, int64_t c) {
  Mat o(r * c, 0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t l = 0; l < k; ++l) o[i * c + j] += a[i * k + l] * b[l * c + j];
  return o;
}
Mat tr(const Mat& a, int64_t r, int64_t c) {
  Mat o(r * c);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) o[j * r + i] = a[i * c + j];
  return o;
}
double tol(DType d) { return d == DType::F64 ? 1e-10 : 2e-4; }
void expect_near(const Mat& got, const Mat& want, double t, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], t) << what << " at " << i;
}

TEST(HostLinalg, TriangularSolveAllFlags) {
  for (DType d : {DType::F32, DType::F64})
    for (int left = 0; left < 2; ++left)
      for (int lower = 0; lower < 2; ++lower)
        for (int unit = 0; unit < 2; ++unit)
          for (int trans = 0; trans < 2; ++trans) {
            const int64_t B = 2, k = 4, o = 3;
            Shape bs = left ? Shape{B, k, o} : Shape{B, o, k};
            Graph g;
            Value a = g.param(d, {B, k, k}), b = g.param(d, bs);
            ir::Attrs at;
            at.dims = {left, lower, unit, trans};
            g.set_outputs({g.op(OpCode::TriangularSolve, {a, b}, at)});
            Tensor A = random(d, {B, k, k}, 1, 4), Bt = random(d, bs, 2);
            Tensor X = run(g, {A, Bt})[0];
            for (int64_t bi = 0; bi < B; ++bi) {
              Mat m = mat(A, bi, k, k);  // the triangle the op reads
              for (int64_t i = 0; i < k; ++i)
                for (int64_t j = 0; j < k; ++j)
                  if ((lower ? j > i : j < i)) m[i * k + j] = 0;
                  else if (i == j && unit) m[i * k + j] = 1;
              if (trans) m = tr(m, k, k);
              Mat x = mat(X, bi, bs[1], bs[2]);
              Mat back = left ? mul(m, x, k, k, o) : mul(x, m, o, k, k);
              expect_near(back, mat(Bt, bi, bs[1], bs[2]), tol(d), "op(A) X vs B");
            }
          }
}

TEST(HostLinalg, GetrfReconstructsAndRunsOnce) {
  for (DType d : {DType::F32, DType::F64}) {
    const int64_t B = 3, m = 5, n = 4, k = 4;
    Graph g;
    Value a = g.param(d, {B, m, n});
    Value lu = call(g, CustomCallTarget::Getrf, {a}, 0), piv = call(g, CustomCallTarget::Getrf, {a}, 1);
    Value perm = call(g, CustomCallTarget::LuPivotsToPermutation, {piv}, 0, {m});
    g.set_outputs({lu, perm, call(g, CustomCallTarget::Getrf, {a}, 2)});
    EXPECT_EQ(make_plan(g)->steps.size(), 2u);  // getrf once (3 results), the permutation
    Tensor A = random(d, {B, m, n}, 3);
    auto r = run(g, {A});
    for (int64_t b = 0; b < B; ++b) {
      Mat LU = mat(r[0], b, m, n), Lm(m * k, 0), U(k * n, 0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          if (j < i && j < k) Lm[i * k + j] = LU[i * n + j];
          if (i == j) Lm[i * k + j] = 1;
          if (i <= j && i < k) U[i * n + j] = LU[i * n + j];
        }
      Mat PtA(m * n), lu_prod = mul(Lm, U, m, k, n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) PtA[i * n + j] = A.get(b * m * n + r[1].geti(b * m + i) * n + j);
      expect_near(lu_prod, PtA, tol(d), "L U vs P^T A");
      EXPECT_EQ(r[2].geti(b), 0);
    }
  }
}

TEST(HostLinalg, QrCholeskyEighSvd) {
  for (DType d : {DType::F64, DType::F32}) {
    const int64_t m = 5, n = 3;
    Graph g;
    Value a = g.param(d, {m, n}), s = g.param(d, {n, n});
    Value qr = call(g, CustomCallTarget::Geqrf, {a}, 0), tau = call(g, CustomCallTarget::Geqrf, {a}, 1);
    Value q = call(g, CustomCallTarget::Orgqr, {qr, tau}, 0);
    Value c = g.param(d, {m, 2});
    Value qtc = call(g, CustomCallTarget::Ormqr, {qr, tau, c}, 0, {1, 1});
    Value chol = call(g, CustomCallTarget::Potrf, {s}, 0, {1}), info = call(g, CustomCallTarget::Potrf, {s}, 1, {1});
    Value w = call(g, CustomCallTarget::Syevd, {s}, 0, {1, 1}), v = call(g, CustomCallTarget::Syevd, {s}, 1, {1, 1});
    std::vector<int64_t> p = {0, 1};
    Value sv = call(g, CustomCallTarget::Gesdd, {a}, 0, p), u = call(g, CustomCallTarget::Gesdd, {a}, 1, p),
          vh = call(g, CustomCallTarget::Gesdd, {a}, 2, p);
    g.set_outputs({qr, q, qtc, chol, info, w, v, sv, u, vh});
    Tensor A = random(d, {m, n}, 5), C = random(d, {m, 2}, 6);
    Tensor M = random(d, {n, n}, 7);  // S = M M^T + I is positive-definite
    Mat Sm = mul(mat(M, 0, n, n), tr(mat(M, 0, n, n), n, n), n, n, n);
    for (int64_t i = 0; i < n; ++i) Sm[i * n + i] += 1;
    Tensor S = make(d, {n, n}, [&](int64_t i) { return Sm[i]; });
    auto r = run(g, {A, S, C});
    Mat Q = mat(r[1], 0, m, n), R(n * n, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) R[i * n + j] = r[0].get(i * n + j);
    expect_near(mul(Q, R, m, n, n), mat(A, 0, m, n), tol(d), "Q R vs A");
    Mat I(n * n, 0);
    for (int64_t i = 0; i < n; ++i) I[i * n + i] = 1;
    expect_near(mul(tr(Q, m, n), Q, n, m, n), I, tol(d), "Q^T Q vs I");
    // ormqr(left, transpose) = full Q^T C: its first n rows are Q_reduced^T C.
    Mat qtc_want = mul(tr(Q, m, n), mat(C, 0, m, 2), n, m, 2), qtc_got = mat(r[2], 0, m, 2);
    qtc_got.resize(n * 2);
    expect_near(qtc_got, qtc_want, tol(d), "ormqr vs Q^T C");
    Mat Lc = mat(r[3], 0, n, n);
    expect_near(mul(Lc, tr(Lc, n, n), n, n, n), Sm, tol(d) * 10, "L L^T vs S");
    EXPECT_EQ(r[4].geti(0), 0);
    Mat V = mat(r[6], 0, n, n), Wd(n * n, 0);
    for (int64_t i = 0; i < n; ++i) Wd[i * n + i] = r[5].get(i);
    for (int64_t i = 1; i < n; ++i) EXPECT_LE(r[5].get(i - 1), r[5].get(i));
    expect_near(mul(Sm, V, n, n, n), mul(V, Wd, n, n, n), tol(d) * 10, "S V vs V diag(w)");
    Mat Sd(n * n, 0);
    for (int64_t i = 0; i < n; ++i) Sd[i * n + i] = r[7].get(i);
    expect_near(mul(mul(mat(r[8], 0, m, n), Sd, m, n, n), mat(r[9], 0, n, n), m, n, n), mat(A, 0, m, n), tol(d),
                "U S Vh vs A");
  }
}

TEST(HostLinalg, InfoOfFailedFactorizations) {
  Graph g;
  Value s = g.param(DType::F64, {2, 3, 3});
  g.set_outputs({call(g, CustomCallTarget::Potrf, {s}, 1, {1}), call(g, CustomCallTarget::Getrf, {s}, 2)});
  // batch 0: PD diag(1, 2, 3); batch 1: the second leading minor is not PD and U(3,3) = 0.
  std::vector<double> v = {1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 0, 2, 1, 0, 0, 0, 0};
  auto r = run(g, {make(DType::F64, {2, 3, 3}, [&](int64_t i) { return v[i]; })});
  EXPECT_EQ(r[0].geti(0), 0);
  EXPECT_EQ(r[0].geti(1), 2);
  EXPECT_EQ(r[1].geti(0), 0);
  EXPECT_EQ(r[1].geti(1), 3);
}

TEST(HostLinalg, LdlSolveAndEmpty) {
  const int64_t n = 4;
  Graph g;
  Value a = g.param(DType::F64, {n, n}), b = g.param(DType::F64, {n, 2});
  Value ld = call(g, CustomCallTarget::Sytrf, {a}, 0, {1}), piv = call(g, CustomCallTarget::Sytrf, {a}, 1, {1});
  g.set_outputs({call(g, CustomCallTarget::Sytrs, {ld, piv, b}, 0, {1})});
  Tensor M = random(DType::F64, {n, n}, 9);
  Mat Am = mat(M, 0, n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) Am[j * n + i] = Am[i * n + j];  // symmetric indefinite
  Tensor A = make(DType::F64, {n, n}, [&](int64_t i) { return Am[i]; }), B = random(DType::F64, {n, 2}, 10);
  Tensor X = run(g, {A, B})[0];
  expect_near(mul(Am, mat(X, 0, n, 2), n, n, 2), mat(B, 0, n, 2), 1e-9, "A X vs B");
  // Empty matrices: full SVD of a 3x0 matrix has U = I; zero batches run nothing.
  Graph h;
  Value e = h.param(DType::F32, {3, 0}), z = h.param(DType::F32, {0, 2, 2});
  h.set_outputs({call(h, CustomCallTarget::Gesdd, {e}, 1, {1, 1}), call(h, CustomCallTarget::Getrf, {z}, 0)});
  auto r = run(h, {Tensor(DType::F32, {3, 0}), Tensor(DType::F32, {0, 2, 2})});
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(r[0].get(i), i % 4 == 0 ? 1.0 : 0.0);
}

}  // namespace
}  // namespace torch_tpu::host::testing
