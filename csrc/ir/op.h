// OpCode and the per-op metadata read from ops.def (name, arity, kind, allowed dtypes, traits).
#pragma once
#include <cstdint>

#include "ir/dtype.h"

namespace torch_tpu::ir {

enum class OpCode : uint8_t {
#define UNARY(name, hlo, dt) name,
#define BINARY(name, hlo, dt, traits) name,
#define OTHER(name, hlo, arity, kind, ...) name,
#include "ir/ops.def"
  kNumOps
};

enum class OpKind : uint8_t {
  kUnary, kBinary, kElementwise, kLeaf, kShape, kReduce, kDot, kRng,
  kIndex,  // gather / scatter along one axis
  kSort,   // sort / argsort along one axis
  kScan,   // inclusive cumulative sum / product along one axis
  kLinalg, // triangular_solve, custom_call (LAPACK decompositions)
  kWindow, // convolution, reduce_window
};

// Allowed-dtype classes (bit set).
enum : uint8_t { F = 1, I = 2, B = 4, N = F | I, A = F | I | B };
// Traits. Fusion roles (ir/passes/fuse.h):
// - kFusible: each result element is computed from the operand elements at the same
//   row-major position (elementwise ops, reshape) or from nothing (constant, iota), so a
//   fused loop can evaluate it tile by tile.
// - kFusedGather: each result element reads one operand element through a fixed index
//   map (broadcast_in_dim); fused into its consumers, its operand is read from memory.
// - kFusedSink: a reduction that may end a fused loop (when it reduces trailing dims).
enum : uint8_t { kCommutative = 1, kFusible = 2, kFusedGather = 4, kFusedSink = 8 };

struct OpInfo {
  const char* name;  // our name, e.g. "Add"
  const char* hlo;   // StableHLO op name, e.g. "add"
  int arity;         // -1 = variadic
  OpKind kind;
  uint8_t dtypes;    // allowed operand dtype classes (unary/binary)
  uint8_t traits;
};

const OpInfo& op_info(OpCode op);

inline bool is_elementwise(OpCode op) {
  OpKind k = op_info(op).kind;
  return k == OpKind::kUnary || k == OpKind::kBinary || k == OpKind::kElementwise;
}
inline bool has_trait(OpCode op, uint8_t t) { return (op_info(op).traits & t) != 0; }
inline uint8_t dtype_class(DType t) { return is_float(t) ? F : is_bool(t) ? B : I; }

enum class Cmp : uint8_t { EQ, NE, LT, LE, GT, GE };
enum class Reducer : uint8_t { Sum, Prod, Max, Min, And, Or };
// Matmul precision (TPU semantics): DEFAULT = 1 bf16 pass, HIGH = 3 passes, HIGHEST = fp32.
enum class Precision : uint8_t { Default, High, Highest };

}  // namespace torch_tpu::ir
