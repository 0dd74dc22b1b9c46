// PJRT_Error -> torch_tpu::Error (the error is always destroyed) and the ir::DType <->
// PJRT_Buffer_Type mapping.
#include "runtime/pjrt/internal.h"

namespace torch_tpu::pjrt::impl {

namespace {
void error_destroy(const PJRT_Api* api, PJRT_Error* err) noexcept {
  auto a = make_args<PJRT_Error_Destroy_Args>();
  a.error = err;
  reinterpret_cast<void (*)(PJRT_Error_Destroy_Args*)>(slot_pointer(api, Slot::Error_Destroy))(&a);
}
}  // namespace

void destroy_error(const PJRT_Api* api, PJRT_Error* err) noexcept {
  if (err != nullptr) error_destroy(api, err);
}

const char* code_name(int code) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                 "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN_CODE";
}

std::string take_error(const PJRT_Api* api, PJRT_Error* err) {
  if (err == nullptr) return "";
  std::string out;
  try {
    auto m = make_args<PJRT_Error_Message_Args>();
    m.error = err;
    reinterpret_cast<void (*)(PJRT_Error_Message_Args*)>(slot_pointer(api, Slot::Error_Message))(&m);
    auto g = make_args<PJRT_Error_GetCode_Args>();
    g.error = err;
    PJRT_Error* gerr = call<Slot::Error_GetCode>(api, &g);
    const char* code = gerr == nullptr ? code_name(g.code) : "UNKNOWN";
    destroy_error(api, gerr);
    out = std::string(code) + ": " + std::string(m.message ? m.message : "", m.message_size);
  } catch (...) {  // std::bad_alloc: still destroy the error
    error_destroy(api, err);
    throw;
  }
  error_destroy(api, err);
  return out;
}

void fail(std::string_view what, const std::string& error) {
  size_t colon = error.find(": ");
  std::string code = error.substr(0, colon);
  std::string msg = colon == std::string::npos ? "" : error.substr(colon + 2);
  throw Error(str("[pjrt] ", what, " failed; got ", code,
                          " from the plugin, expected OK: ", msg));
}

void check(const PJRT_Api* api, PJRT_Error* err, std::string_view what) {
  if (err != nullptr) fail(what, take_error(api, err));
}

PJRT_Buffer_Type to_pjrt(ir::DType t) {
  switch (t) {
    case ir::DType::Bool: return kPred;
    case ir::DType::U8: return kU8;
    case ir::DType::I8: return kS8;
    case ir::DType::I16: return kS16;
    case ir::DType::I32: return kS32;
    case ir::DType::I64: return kS64;
    case ir::DType::F16: return kF16;
    case ir::DType::BF16: return kBF16;
    case ir::DType::F32: return kF32;
    case ir::DType::F64: return kF64;
    case ir::DType::U64: return kU64;
  }
  return kInvalid;
}

ir::DType from_pjrt(PJRT_Buffer_Type t) {
  switch (t) {
    case kPred: return ir::DType::Bool;
    case kU8: return ir::DType::U8;
    case kS8: return ir::DType::I8;
    case kS16: return ir::DType::I16;
    case kS32: return ir::DType::I32;
    case kS64: return ir::DType::I64;
    case kF16: return ir::DType::F16;
    case kBF16: return ir::DType::BF16;
    case kF32: return ir::DType::F32;
    case kF64: return ir::DType::F64;
    case kU64: return ir::DType::U64;
    default: break;
  }
  throw Error(str("[pjrt] buffer element type has no IR dtype; got ", pjrt_type_name(t),
                          ", expected one of pred, s8..s64, u8, u64, f16, bf16, f32, f64"));
}

const char* pjrt_type_name(PJRT_Buffer_Type t) {
  static const char* kNames[] = {"invalid", "pred", "s8",  "s16", "s32",  "s64",
                                 "u8",      "u16",  "u32", "u64", "f16",  "f32",
                                 "f64",     "bf16", "c64", "c128"};
  int i = static_cast<int>(t);
  return i >= 0 && i < 16 ? kNames[i] : "(a newer PJRT type)";
}

}  // namespace torch_tpu::pjrt::impl
