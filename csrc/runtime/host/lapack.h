// The Fortran LAPACK/BLAS routines the linalg kernels call (Debian's OpenBLAS build,
// 32-bit integers, the library PyTorch CPU links too), and overloads on float/double.
// Trailing size_t arguments are the hidden lengths of character arguments (gfortran ABI).
// Not thread-hostile: every routine works on the caller's buffers only.
#pragma once
#include <cstddef>

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void sormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k, const float* a,
             const int* lda, const float* tau, float* c, const int* ldc, float* work, const int* lwork, int* info,
             size_t, size_t);
void dormqr_(const char* side, const char* trans, const int* m, const int* n, const int* k, const double* a,
             const int* lda, const double* tau, double* c, const int* ldc, double* work, const int* lwork, int* info,
             size_t, size_t);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
             const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             size_t);
void ssytrf_(const char* uplo, const int* n, float* a, const int* lda, int* ipiv, float* work, const int* lwork,
             int* info, size_t);
void dsytrf_(const char* uplo, const int* n, double* a, const int* lda, int* ipiv, double* work, const int* lwork,
             int* info, size_t);
void ssytrs_(const char* uplo, const int* n, const int* nrhs, const float* a, const int* lda, const int* ipiv,
             float* b, const int* ldb, int* info, size_t);
void dsytrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info, size_t);
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const float* alpha, const float* a, const int* lda, float* b, const int* ldb, size_t, size_t, size_t,
            size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb, size_t, size_t, size_t,
            size_t);
}

namespace torch_tpu::host::lapack {

#define TPU_LAPACK_PAIR(fn, s_fn, d_fn)                                                  \
  template <class... A>                                                                 \
  inline void fn(float* tag, A... a) { (void)tag; s_fn(a...); }                         \
  template <class... A>                                                                 \
  inline void fn(double* tag, A... a) { (void)tag; d_fn(a...); }

// Called as lapack::getrf(static_cast<T*>(nullptr), <Fortran arguments>...).
TPU_LAPACK_PAIR(getrf, sgetrf_, dgetrf_)
TPU_LAPACK_PAIR(geqrf, sgeqrf_, dgeqrf_)
TPU_LAPACK_PAIR(orgqr, sorgqr_, dorgqr_)
TPU_LAPACK_PAIR(ormqr, sormqr_, dormqr_)
TPU_LAPACK_PAIR(potrf, spotrf_, dpotrf_)
TPU_LAPACK_PAIR(syevd, ssyevd_, dsyevd_)
TPU_LAPACK_PAIR(gesdd, sgesdd_, dgesdd_)
TPU_LAPACK_PAIR(sytrf, ssytrf_, dsytrf_)
TPU_LAPACK_PAIR(sytrs, ssytrs_, dsytrs_)
TPU_LAPACK_PAIR(trsm, strsm_, dtrsm_)
#undef TPU_LAPACK_PAIR

}  // namespace torch_tpu::host::lapack
