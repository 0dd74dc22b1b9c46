// Helpers shared by the LAPACK-backed linalg families (linalg_factor.cpp, linalg_solve.cpp):
// argument checks, custom calls, triangular masks, batch broadcasting and the LU solve.
// Matrices are IR values [..., rows, cols] (docs/decisions/linalg.md).
#pragma once
#include "ir/custom_call.h"
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering::linalg {

using ir::CustomCallTarget;
using Target = ir::CustomCallTarget;

// Checks that t is a float32/float64 matrix (batch) [square]; `api` is PyTorch's name.
DType check_matrix(Lower& L, const at::Tensor& t, const char* api, const char* name = "A", bool square = false);
// Result `index` of the custom call `t` on `operands` with `params`.
Value call(Lower& L, Target t, std::vector<Value> operands, int64_t index, std::vector<int64_t> params = {});

int64_t rows(Lower& L, Value v);
int64_t cols(Lower& L, Value v);
ir::Shape batch_of(Lower& L, Value v, size_t core = 2);
ir::Shape with(ir::Shape batch, std::initializer_list<int64_t> tail);
Value mT(Lower& L, Value v);                                  // swap the last two dims
Value tri(Lower& L, Value x, int64_t k, bool upper);          // triu(x, k) / tril(x, k)
Value eye(Lower& L, const ir::Shape& s, DType dt);            // identity on the last two dims
Value diagonal(Lower& L, Value x);                            // [.., n, n] -> [.., n]
Value slice2(Lower& L, Value x, int64_t r1, int64_t c1);      // x[.., :r1, :c1]
Value any_nonzero(Lower& L, Value x);                         // 0-d i1
Value empty(Lower& L, DType dt);                              // a [0] tensor
// Broadcasts the batch dims (all but the last `core_a` / `core_b`) of a and b to a common shape.
void broadcast_batch(Lower& L, Value& a, size_t core_a, Value& b, size_t core_b);
// A X = B (left) or X A = B, adjoint: A^T instead of A, from getrf's LU [.., n, n] and
// pivots i32 [.., n] (batch dims broadcast with B's).
Value lu_solve(Lower& L, Value lu, Value pivots, Value b, bool left, bool adjoint);
// (-1)^(number of row swaps) in dtype dt, from getrf's pivots [.., k].
Value det_p(Lower& L, Value pivots, DType dt);
// Raises `message` at the next sync point if any info is non-zero (the _ex ops' check_errors).
void check_info(Lower& L, Value info, const std::string& message);

}  // namespace torch_tpu::lowering::linalg
