// Private helpers of csrc/runtime/pjrt/: calling a slot of the PJRT_Api table, turning a
// PJRT_Error into a torch_tpu::Error (always destroying it), dtype mapping. Not installed,
// never included outside this folder.
#pragma once
#include <cstring>
#include <string>
#include <string_view>

#include "base/error.h"
#include "ir/dtype.h"
#include "runtime/pjrt/c_api.h"

namespace torch_tpu::pjrt::impl {

using namespace c;  // NOLINT: the PJRT_* names are this folder's vocabulary
using ::torch_tpu::detail::str;

// The args struct each slot takes (from TPU_PJRT_SLOTS), so a call with the wrong struct
// does not compile.
template <Slot S>
struct SlotArgs;
#define TPU_PJRT_SLOT_ARGS(name, slot, args) \
  template <>                                \
  struct SlotArgs<Slot::name> {              \
    using type = args;                       \
  };
TPU_PJRT_SLOTS(TPU_PJRT_SLOT_ARGS)
#undef TPU_PJRT_SLOT_ARGS

// A zeroed args struct with its struct_size set.
template <class A>
A make_args() {
  static_assert(kStructSize<A> > 0, "add the struct to the kStructSize list in c_api.h");
  A a;
  std::memset(static_cast<void*>(&a), 0, sizeof a);
  a.struct_size = kStructSize<A>;
  return a;
}

inline void* slot_pointer(const PJRT_Api* api, Slot s) {
  void* p;
  std::memcpy(&p, reinterpret_cast<const char*>(api) + kSlotOffset + 8 * static_cast<int>(s),
              sizeof p);
  return p;
}

// Calls slot S; returns the plugin's PJRT_Error* (NULL = success), to pass to check().
template <Slot S>
PJRT_Error* call(const PJRT_Api* api, typename SlotArgs<S>::type* args) {
  static_assert(S != Slot::Error_Destroy && S != Slot::Error_Message, "void slots");
  using Fn = PJRT_Error*(typename SlotArgs<S>::type*);
  return reinterpret_cast<Fn*>(slot_pointer(api, S))(args);
}

// Destroys `err` (NULL allowed); never throws.
void destroy_error(const PJRT_Api* api, PJRT_Error* err) noexcept;
// The message and code of `err`, then destroys it: "INVALID_ARGUMENT: text".
std::string take_error(const PJRT_Api* api, PJRT_Error* err);
// Throws "[pjrt] <what> failed; got <CODE> from the plugin, expected OK: <message>" when
// `err` is set (destroying it first); returns otherwise.
void check(const PJRT_Api* api, PJRT_Error* err, std::string_view what);

// Same as check, for an error string from take_error.
[[noreturn]] void fail(std::string_view what, const std::string& error);

const char* code_name(int code);

// ir::DType <-> PJRT_Buffer_Type.
PJRT_Buffer_Type to_pjrt(ir::DType t);
// Throws for a PJRT type the IR has no DType for (e.g. u32, c64).
ir::DType from_pjrt(PJRT_Buffer_Type t);
const char* pjrt_type_name(PJRT_Buffer_Type t);

}  // namespace torch_tpu::pjrt::impl
