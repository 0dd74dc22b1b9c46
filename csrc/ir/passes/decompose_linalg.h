// LAPACK custom calls (custom_calls.def) rewritten into computations XLA compiles on any
// plugin, for the pjrt runtime: a bare plugin registers no LAPACK handlers, and a TPU has
// none at all. The host runtime keeps its LAPACK kernels and never runs this pass.
// docs/decisions/linalg.md ("pjrt").
#pragma once
#include "ir/graph.h"

namespace torch_tpu::ir {

// True when some node of `g` is a custom_call with a LAPACK target (not an XLA one).
bool has_lapack_calls(const Graph& g);

// Returns a copy of `g` (same params, in order; same outputs) in which every LAPACK
// custom_call is computed by StableHLO ops and XLA's own expanders, with the host's result
// conventions (LAPACK layouts, 1-based i32 pivots, Householder vectors + tau, info):
// - potrf: stablehlo.cholesky (XLA's CholeskyExpander), the other triangle zeroed; info =
//   the first diagonal entry of the factor that is not > 0 (XLA's factor is NaN from the
//   failing minor on), 1-based, else 0. Where info > 0 the factor is NaN there, not what
//   LAPACK leaves.
// - getrf: partial-pivot LU (LAPACK's dgetf2: the first largest |pivot|, no scaling by a
//   zero pivot), unrolled over min(m, n) columns in vector ops; info = the first exactly
//   zero U(j, j), 1-based.
// - lu_pivots_to_permutation: the swaps unrolled over the pivots (invalid ones skipped, as
//   the host).
// - geqrf / orgqr: XLA's Qr / ProductOfElementaryHouseholderReflectors (QrExpander: the
//   same Householder convention as LAPACK's dlarfg). ormqr: Q = the product of the
//   reflectors as a full square matrix, then one dot.
// - syevd: XLA's Eigh (EighExpander: cyclic Jacobi, eigenvalues sorted ascending), its
//   vectors polished by one first-order perturbation + Newton-Schulz step (XLA's stopping
//   test leaves ~sqrt(eps) off-diagonal mass); info 0. Eigenvectors are the host's only
//   up to sign.
// - gesdd: Eigh of the symmetric [[0, A], [A^T, 0]] (eigenvalues +-s, eigenvectors
//   (u; v) / sqrt 2): s = the min(m, n) largest, u and v the normalized halves of their
//   eigenvectors; full_matrices completes U or V with the orthogonal complement from a
//   Householder QR of the thin factor. Vectors agree with LAPACK's up to sign (and the
//   complement up to rotation); zero singular values get zero vectors. info 0.
// - sytrf / sytrs (ldl, Bunch-Kaufman: data-dependent 1x1/2x2 pivots) are kept as LAPACK
//   calls: a plugin without LAPACK handlers rejects the program, naming the target; with
//   no element to factor their results are constants (empty, info 0).
// The result is verified.
Graph decompose_linalg(const Graph& g);

}  // namespace torch_tpu::ir
