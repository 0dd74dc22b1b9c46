// Element types of the IR (StableHLO element types) and their sizes and names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace torch_tpu::ir {

#define TPU_DTYPES(X)            \
  X(Bool, bool, 1, "i1")         \
  X(U8, uint8_t, 1, "ui8")       \
  X(I8, int8_t, 1, "i8")         \
  X(I16, int16_t, 2, "i16")      \
  X(I32, int32_t, 4, "i32")      \
  X(I64, int64_t, 8, "i64")      \
  X(F16, uint16_t, 2, "f16")     \
  X(BF16, uint16_t, 2, "bf16")   \
  X(F32, float, 4, "f32")        \
  X(F64, double, 8, "f64")       \
  X(U64, uint64_t, 8, "ui64")

enum class DType : uint8_t {
#define X(name, ctype, size, hlo) name,
  TPU_DTYPES(X)
#undef X
};

inline size_t dtype_size(DType t) {
  switch (t) {
#define X(name, ctype, size, hlo) \
  case DType::name:               \
    return size;
    TPU_DTYPES(X)
#undef X
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
#define X(name, ctype, size, hlo) \
  case DType::name:               \
    return hlo;
    TPU_DTYPES(X)
#undef X
  }
  return "?";
}

inline bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
inline bool is_int(DType t) {
  return t == DType::U8 || t == DType::I8 || t == DType::I16 || t == DType::I32 ||
         t == DType::I64 || t == DType::U64;
}
inline bool is_bool(DType t) { return t == DType::Bool; }

}  // namespace torch_tpu::ir
