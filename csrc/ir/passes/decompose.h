// Composite ops: every `tpu.*` row of ops.def (ops outside StableHLO) rewritten into ops that
// print as StableHLO/CHLO, so a PJRT plugin can compile the graph (DESIGN.md: "Ops outside
// StableHLO (tpu.*) are composites"). The host runtime keeps its own kernels for them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir {

// True when `op` prints as `tpu.*` (its ops.def StableHLO name starts with "tpu.").
bool is_composite(OpCode op);
// True when some node of `g` is a composite; callers skip decompose_composites otherwise.
bool has_composites(const Graph& g);

// Returns a copy of `g` (same params, in order; same outputs) in which every composite node
// is replaced by StableHLO/CHLO ops computing the host kernel's algorithm:
// - hypot: max(|a|,|b|) * sqrt(1 + (min/max)^2), inf if either operand is inf.
// - erfcx: exp(x^2) * erfc(x) below 26, the asymptotic series above (as the host), f16, bf16
//   and f32 evaluated in f64 (the formula needs f64's range: exp(x^2) overflows f32 at 9.4).
// - bessel_{j,y,i,k}{0,1}: Cephes' rational / Chebyshev approximations in the operand's
//   precision (f32 as PyTorch CPU; the host uses libstdc++ in f64), every range computed
//   and picked by select; sin/cos(x - phase) from sin x and cos x so large x keep the phase.
// - airy_ai: the host's Cephes algorithm; its Maclaurin loop unrolled with the host's
//   stopping test (it stops within 10 iterations in f32, 14 in f64).
// - gcd: Euclid unrolled to the Lame bound of the width (kGcdSteps).
// - Chebyshev T/U/V/W (and shifted): the host's recurrence unrolled to degree
//   kChebyshevUnroll, its trigonometric form for |y| < 1, and above that degree for |y| > 1
//   the exact hyperbolic closed form (cosh/sinh of n*acosh|y|): correct for every n.
// - Hermite H/He: the recurrence unrolled to the host's own limit (128 in f32, 512 in f64;
//   the host returns NaN above it): correct for every n.
// - Laguerre L, Legendre P: no closed form; the recurrence is unrolled to degree
//   kPolyMaxDegree (128). ABOVE IT THE RESULT IS NaN (except where the host's special cases
//   give the value for every n: Laguerre at x == 0, Legendre at |x| == 1). Callers that can
//   see n must reject n > max_exact_degree(op) instead (a runtime check).
// 16-bit floats are computed in f32 (f64 for erfcx) and rounded once, as the host does.
// The result is verified. Throws Error naming the op on an op it cannot decompose (none
// today: undecomposable_ops lists them first).
Graph decompose_composites(const Graph& g);

// "op: reason" for each composite of `g` that decompose_composites cannot rewrite (empty
// today); the pjrt runtime raises an error naming them instead of compiling.
std::vector<std::string> undecomposable_ops(const Graph& g);

// Largest degree n the decomposition of `op` evaluates exactly at operand dtype `t`
// (n > it gives NaN), or -1 when every n is exact (all ops except Laguerre and Legendre).
int64_t max_exact_degree(OpCode op, DType t);

constexpr int kChebyshevUnroll = 64;  // recurrence steps; hyperbolic closed form above
constexpr int kPolyMaxDegree = 128;   // Laguerre / Legendre: exact for n <= 128

}  // namespace torch_tpu::ir
