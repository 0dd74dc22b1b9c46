// Our own declarations of the subset of the PJRT C API (openxla/xla pjrt_c_api.h, API 0.94)
// that the client calls: opaque handles, the argument structs we fill, and the PJRT_Api
// function table as slots at byte offset 40 + 8 * i. Private to csrc/runtime/pjrt/.
//
// Conventions (shared/notes/pjrt.md §1.4): every args struct opens with struct_size and
// extension_start; callers zero the struct and set struct_size to offsetof(last) +
// sizeof(last) (TPU_PJRT_SIZE), not sizeof. Plugins accept a struct_size >= their own, so
// these declarations must stay at least as new as the newest plugin we load (0.117 at the
// time of writing adds no field to any struct below). The static_asserts pin the LP64 sizes.
// Declared in our own namespace so another PJRT header in the process cannot clash.
#pragma once
#include <cstddef>
#include <cstdint>

namespace torch_tpu::pjrt::c {

#define TPU_PJRT_SIZE(type, last) (offsetof(type, last) + sizeof(((type*)nullptr)->last))

struct PJRT_Extension_Base;  // never followed: we use no extension
struct PJRT_Error;
struct PJRT_Event;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_DeviceDescription;
struct PJRT_Memory;
struct PJRT_Executable;
struct PJRT_LoadedExecutable;
struct PJRT_Buffer;
struct PJRT_SerializedExecutable;
struct PJRT_ExecuteContext;

#define TPU_PJRT_HEAD       \
  size_t struct_size;       \
  PJRT_Extension_Base* extension_start

// ---- API header and errors ----------------------------------------------------------------
struct PJRT_Api_Version {
  TPU_PJRT_HEAD;
  int major_version;
  int minor_version;
};
// The table: struct_size, extension_start, version, then function pointers (slots).
struct PJRT_Api {
  TPU_PJRT_HEAD;
  PJRT_Api_Version pjrt_api_version;
};
constexpr size_t kSlotOffset = 40;

struct PJRT_Error_Destroy_Args { TPU_PJRT_HEAD; PJRT_Error* error; };
struct PJRT_Error_Message_Args {
  TPU_PJRT_HEAD;
  const PJRT_Error* error;
  const char* message;  // out, lives as long as `error`
  size_t message_size;  // out
};
struct PJRT_Error_GetCode_Args { TPU_PJRT_HEAD; const PJRT_Error* error; int code; };

// ---- named values (plugin attributes, client options) -------------------------------------
enum PJRT_NamedValue_Type : int { kString = 0, kInt64 = 1, kInt64List = 2, kFloat = 3, kBool = 4 };
struct PJRT_NamedValue {
  TPU_PJRT_HEAD;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // elements of a string/list, 1 for scalars
};

struct PJRT_Plugin_Initialize_Args { TPU_PJRT_HEAD; };
struct PJRT_Plugin_Attributes_Args {
  TPU_PJRT_HEAD;
  const PJRT_NamedValue* attributes;  // out, process lifetime
  size_t num_attributes;              // out
};

// ---- events ---------------------------------------------------------------------------------
struct PJRT_Event_Args { TPU_PJRT_HEAD; PJRT_Event* event; };  // Destroy, Error, Await
struct PJRT_Event_IsReady_Args { TPU_PJRT_HEAD; PJRT_Event* event; bool is_ready; };
using PJRT_Event_OnReadyCallback = void (*)(PJRT_Error* error, void* user_arg);
struct PJRT_Event_OnReady_Args {
  TPU_PJRT_HEAD;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;  // owns `error`; runs on a plugin thread
  void* user_arg;
};

// ---- client ---------------------------------------------------------------------------------
struct PJRT_Client_Create_Args {
  TPU_PJRT_HEAD;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback;  // multi-process only: unused (NULL)
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
};
struct PJRT_Client_Args { TPU_PJRT_HEAD; PJRT_Client* client; };  // Destroy
struct PJRT_Client_String_Args {  // PlatformName, PlatformVersion: owned by the client
  TPU_PJRT_HEAD;
  PJRT_Client* client;
  const char* value;  // out
  size_t value_size;  // out
};
struct PJRT_Client_AddressableDevices_Args {
  TPU_PJRT_HEAD;
  PJRT_Client* client;
  PJRT_Device* const* devices;  // out, owned by the client
  size_t num_devices;           // out
};
struct PJRT_Program {
  TPU_PJRT_HEAD;
  char* code;  // caller-owned
  size_t code_size;
  const char* format;  // "mlir" | "hlo" | "hlo_with_config"
  size_t format_size;
};
struct PJRT_Client_Compile_Args {
  TPU_PJRT_HEAD;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;  // serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
};
enum PJRT_HostBufferSemantics : int {
  kImmutableOnlyDuringCall = 0,
  kImmutableUntilTransferCompletes = 1,
  kImmutableZeroCopy = 2,
  kMutableZeroCopy = 3,
};
// PJRT_Buffer_Type values (not xla::PrimitiveType numbers).
enum PJRT_Buffer_Type : int {
  kInvalid = 0, kPred = 1, kS8 = 2, kS16 = 3, kS32 = 4, kS64 = 5, kU8 = 6, kU16 = 7,
  kU32 = 8, kU64 = 9, kF16 = 10, kF32 = 11, kF64 = 12, kBF16 = 13, kC64 = 14, kC128 = 15,
};
struct PJRT_Buffer_MemoryLayout_Tiled {
  TPU_PJRT_HEAD;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;
  const size_t* tile_dim_sizes;
  size_t num_tiles;
};
enum PJRT_Buffer_MemoryLayout_Type : int { kTiled = 0, kStrides = 1 };
struct PJRT_Buffer_MemoryLayout {
  TPU_PJRT_HEAD;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    struct { TPU_PJRT_HEAD; const int64_t* byte_strides; size_t num_byte_strides; } strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
};
struct PJRT_Client_BufferFromHostBuffer_Args {
  TPU_PJRT_HEAD;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // NULL = dense row-major
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;                      // NULL = the device's default memory
  PJRT_Buffer_MemoryLayout* device_layout;  // NULL = default
  PJRT_Event* done_with_host_buffer;        // out
  PJRT_Buffer* buffer;                      // out
};

// ---- devices ------------------------------------------------------------------------------
struct PJRT_Device_GetDescription_Args {
  TPU_PJRT_HEAD;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
};
struct PJRT_DeviceDescription_Id_Args { TPU_PJRT_HEAD; PJRT_DeviceDescription* description; int id; };
struct PJRT_DeviceDescription_String_Args {  // Kind, ToString: owned by the device
  TPU_PJRT_HEAD;
  PJRT_DeviceDescription* description;
  const char* value;  // out
  size_t value_size;  // out
};
struct PJRT_Device_MemoryStats_Args {
  TPU_PJRT_HEAD;
  PJRT_Device* device;
  int64_t bytes_in_use;  // always set
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
};

// ---- executables --------------------------------------------------------------------------
struct PJRT_Executable_Args { TPU_PJRT_HEAD; PJRT_Executable* executable; };  // Destroy
struct PJRT_LoadedExecutable_Args { TPU_PJRT_HEAD; PJRT_LoadedExecutable* executable; };  // Destroy
struct PJRT_LoadedExecutable_GetExecutable_Args {
  TPU_PJRT_HEAD;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out, caller destroys
};
struct PJRT_LoadedExecutable_AddressableDevices_Args {
  TPU_PJRT_HEAD;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
};
struct PJRT_Executable_NumOutputs_Args { TPU_PJRT_HEAD; PJRT_Executable* executable; size_t num_outputs; };
struct PJRT_ExecuteOptions {
  TPU_PJRT_HEAD;
  void** send_callbacks;
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
};
struct PJRT_LoadedExecutable_Execute_Args {
  TPU_PJRT_HEAD;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;    // [num_devices][num_outputs], caller-allocated
  PJRT_Event** device_complete_events;  // [num_devices] or NULL
  PJRT_Device* execute_device;          // portable executables only
};
struct PJRT_Executable_Serialize_Args {
  TPU_PJRT_HEAD;
  const PJRT_Executable* executable;
  const char* serialized_bytes;  // out, lives as long as serialized_executable
  size_t serialized_bytes_size;  // out
  PJRT_SerializedExecutable* serialized_executable;                        // out
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable* exec);  // out, call once
};
struct PJRT_Executable_DeserializeAndLoad_Args {
  TPU_PJRT_HEAD;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;  // out
  const char* overridden_serialized_compile_options;  // NULL = the serialized ones
  size_t overridden_serialized_compile_options_size;
};

// ---- buffers --------------------------------------------------------------------------------
struct PJRT_Buffer_Args { TPU_PJRT_HEAD; PJRT_Buffer* buffer; };  // Destroy
struct PJRT_Buffer_ElementType_Args { TPU_PJRT_HEAD; PJRT_Buffer* buffer; PJRT_Buffer_Type type; };
struct PJRT_Buffer_Dimensions_Args {
  TPU_PJRT_HEAD;
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out, lives as long as the buffer
  size_t num_dims;      // out
};
struct PJRT_Buffer_OnDeviceSizeInBytes_Args { TPU_PJRT_HEAD; PJRT_Buffer* buffer; size_t size; };
struct PJRT_Buffer_IsDeleted_Args { TPU_PJRT_HEAD; PJRT_Buffer* buffer; bool is_deleted; };
struct PJRT_Buffer_ToHostBuffer_Args {
  TPU_PJRT_HEAD;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // NULL = the device layout
  void* dst;                              // NULL: query dst_size
  size_t dst_size;
  PJRT_Event* event;  // out
};
struct PJRT_Buffer_ReadyEvent_Args { TPU_PJRT_HEAD; PJRT_Buffer* buffer; PJRT_Event* event; };
struct PJRT_Buffer_UnsafePointer_Args { TPU_PJRT_HEAD; PJRT_Buffer* buffer; uintptr_t pointer; };

#undef TPU_PJRT_HEAD

// The LP64 struct sizes of pjrt_c_api.h 0.94 (shared/notes/pjrt.md §3).
static_assert(sizeof(PJRT_Api) == kSlotOffset);
static_assert(TPU_PJRT_SIZE(PJRT_NamedValue, value_size) == 56);
static_assert(offsetof(PJRT_NamedValue, int64_value) == 40);
static_assert(TPU_PJRT_SIZE(PJRT_Plugin_Attributes_Args, num_attributes) == 32);
static_assert(TPU_PJRT_SIZE(PJRT_Error_Destroy_Args, error) == 24);
static_assert(TPU_PJRT_SIZE(PJRT_Error_Message_Args, message_size) == 40);
static_assert(TPU_PJRT_SIZE(PJRT_Event_Args, event) == 24);
static_assert(TPU_PJRT_SIZE(PJRT_Buffer_Args, buffer) == 24);
static_assert(TPU_PJRT_SIZE(PJRT_Client_Create_Args, kv_try_get_user_arg) == 88);
static_assert(offsetof(PJRT_Client_Create_Args, client) == 64);
static_assert(TPU_PJRT_SIZE(PJRT_Program, format_size) == 48);
static_assert(TPU_PJRT_SIZE(PJRT_Client_Compile_Args, executable) == 56);
static_assert(TPU_PJRT_SIZE(PJRT_Client_BufferFromHostBuffer_Args, buffer) == 120);
static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, type) == 32);
static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, dims) == 40);
static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, host_buffer_semantics) == 72);
static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, device) == 80);
static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, done_with_host_buffer) == 104);
static_assert(offsetof(PJRT_Client_BufferFromHostBuffer_Args, buffer) == 112);
static_assert(TPU_PJRT_SIZE(PJRT_Buffer_MemoryLayout_Tiled, num_tiles) == 56);
static_assert(TPU_PJRT_SIZE(PJRT_Buffer_MemoryLayout, type) == 76);
static_assert(TPU_PJRT_SIZE(PJRT_ExecuteOptions, incarnation_ids) == 112);
static_assert(offsetof(PJRT_ExecuteOptions, launch_id) == 48);
static_assert(offsetof(PJRT_ExecuteOptions, non_donatable_input_indices) == 56);
static_assert(TPU_PJRT_SIZE(PJRT_LoadedExecutable_Execute_Args, execute_device) == 80);
static_assert(TPU_PJRT_SIZE(PJRT_Buffer_ToHostBuffer_Args, event) == 56);
static_assert(TPU_PJRT_SIZE(PJRT_Executable_Serialize_Args, serialized_executable_deleter) == 56);
static_assert(TPU_PJRT_SIZE(PJRT_Executable_DeserializeAndLoad_Args,
                            overridden_serialized_compile_options_size) == 64);
static_assert(TPU_PJRT_SIZE(PJRT_Device_MemoryStats_Args, peak_pool_bytes_is_set) == 185);

// struct_size of each struct: offsetof(last field) + its size (the header's X_STRUCT_SIZE).
template <class T>
inline constexpr size_t kStructSize = 0;  // undeclared: a compile error in make_args
#define TPU_PJRT_STRUCT_SIZE(type, last) \
  template <>                      \
  inline constexpr size_t kStructSize<type> = TPU_PJRT_SIZE(type, last);
TPU_PJRT_STRUCT_SIZE(PJRT_Error_Destroy_Args, error)
TPU_PJRT_STRUCT_SIZE(PJRT_Error_Message_Args, message_size)
TPU_PJRT_STRUCT_SIZE(PJRT_Error_GetCode_Args, code)
TPU_PJRT_STRUCT_SIZE(PJRT_NamedValue, value_size)
TPU_PJRT_STRUCT_SIZE(PJRT_Plugin_Initialize_Args, extension_start)
TPU_PJRT_STRUCT_SIZE(PJRT_Plugin_Attributes_Args, num_attributes)
TPU_PJRT_STRUCT_SIZE(PJRT_Event_Args, event)
TPU_PJRT_STRUCT_SIZE(PJRT_Event_IsReady_Args, is_ready)
TPU_PJRT_STRUCT_SIZE(PJRT_Event_OnReady_Args, user_arg)
TPU_PJRT_STRUCT_SIZE(PJRT_Client_Create_Args, kv_try_get_user_arg)
TPU_PJRT_STRUCT_SIZE(PJRT_Client_Args, client)
TPU_PJRT_STRUCT_SIZE(PJRT_Client_String_Args, value_size)
TPU_PJRT_STRUCT_SIZE(PJRT_Client_AddressableDevices_Args, num_devices)
TPU_PJRT_STRUCT_SIZE(PJRT_Program, format_size)
TPU_PJRT_STRUCT_SIZE(PJRT_Client_Compile_Args, executable)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_MemoryLayout_Tiled, num_tiles)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_MemoryLayout, type)
TPU_PJRT_STRUCT_SIZE(PJRT_Client_BufferFromHostBuffer_Args, buffer)
TPU_PJRT_STRUCT_SIZE(PJRT_Device_GetDescription_Args, device_description)
TPU_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Id_Args, id)
TPU_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_String_Args, value_size)
TPU_PJRT_STRUCT_SIZE(PJRT_Device_MemoryStats_Args, peak_pool_bytes_is_set)
TPU_PJRT_STRUCT_SIZE(PJRT_Executable_Args, executable)
TPU_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Args, executable)
TPU_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_GetExecutable_Args, executable)
TPU_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_AddressableDevices_Args, num_devices)
TPU_PJRT_STRUCT_SIZE(PJRT_Executable_NumOutputs_Args, num_outputs)
TPU_PJRT_STRUCT_SIZE(PJRT_ExecuteOptions, incarnation_ids)
TPU_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Execute_Args, execute_device)
TPU_PJRT_STRUCT_SIZE(PJRT_Executable_Serialize_Args, serialized_executable_deleter)
TPU_PJRT_STRUCT_SIZE(PJRT_Executable_DeserializeAndLoad_Args, overridden_serialized_compile_options_size)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_Args, buffer)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_ElementType_Args, type)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_Dimensions_Args, num_dims)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_OnDeviceSizeInBytes_Args, size)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_IsDeleted_Args, is_deleted)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_ToHostBuffer_Args, event)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_ReadyEvent_Args, event)
TPU_PJRT_STRUCT_SIZE(PJRT_Buffer_UnsafePointer_Args, pointer)
#undef TPU_PJRT_STRUCT_SIZE

// ---- the function table: slot numbers (stable since 0.33 for slots 0..92) -----------------
// X(name, slot, args struct). All return PJRT_Error* (NULL = success) except the two Error_*
// accessors, which return void.
#define TPU_PJRT_SLOTS(X)                                                   \
  X(Error_Destroy, 0, PJRT_Error_Destroy_Args)                              \
  X(Error_Message, 1, PJRT_Error_Message_Args)                              \
  X(Error_GetCode, 2, PJRT_Error_GetCode_Args)                              \
  X(Plugin_Initialize, 3, PJRT_Plugin_Initialize_Args)                      \
  X(Plugin_Attributes, 4, PJRT_Plugin_Attributes_Args)                      \
  X(Event_Destroy, 5, PJRT_Event_Args)                                      \
  X(Event_IsReady, 6, PJRT_Event_IsReady_Args)                              \
  X(Event_Error, 7, PJRT_Event_Args)                                        \
  X(Event_Await, 8, PJRT_Event_Args)                                        \
  X(Event_OnReady, 9, PJRT_Event_OnReady_Args)                              \
  X(Client_Create, 10, PJRT_Client_Create_Args)                             \
  X(Client_Destroy, 11, PJRT_Client_Args)                                   \
  X(Client_PlatformName, 12, PJRT_Client_String_Args)                       \
  X(Client_PlatformVersion, 14, PJRT_Client_String_Args)                    \
  X(Client_AddressableDevices, 16, PJRT_Client_AddressableDevices_Args)     \
  X(Client_Compile, 20, PJRT_Client_Compile_Args)                           \
  X(Client_BufferFromHostBuffer, 22, PJRT_Client_BufferFromHostBuffer_Args) \
  X(DeviceDescription_Id, 23, PJRT_DeviceDescription_Id_Args)               \
  X(DeviceDescription_Kind, 26, PJRT_DeviceDescription_String_Args)         \
  X(DeviceDescription_ToString, 28, PJRT_DeviceDescription_String_Args)     \
  X(Device_GetDescription, 29, PJRT_Device_GetDescription_Args)             \
  X(Device_MemoryStats, 34, PJRT_Device_MemoryStats_Args)                   \
  X(Executable_Destroy, 40, PJRT_Executable_Args)                           \
  X(Executable_NumOutputs, 44, PJRT_Executable_NumOutputs_Args)             \
  X(Executable_Serialize, 49, PJRT_Executable_Serialize_Args)               \
  X(LoadedExecutable_Destroy, 50, PJRT_LoadedExecutable_Args)               \
  X(LoadedExecutable_GetExecutable, 51, PJRT_LoadedExecutable_GetExecutable_Args) \
  X(LoadedExecutable_AddressableDevices, 52, PJRT_LoadedExecutable_AddressableDevices_Args) \
  X(LoadedExecutable_Execute, 55, PJRT_LoadedExecutable_Execute_Args)       \
  X(Executable_DeserializeAndLoad, 56, PJRT_Executable_DeserializeAndLoad_Args) \
  X(Buffer_Destroy, 58, PJRT_Buffer_Args)                                   \
  X(Buffer_ElementType, 59, PJRT_Buffer_ElementType_Args)                   \
  X(Buffer_Dimensions, 60, PJRT_Buffer_Dimensions_Args)                     \
  X(Buffer_OnDeviceSizeInBytes, 64, PJRT_Buffer_OnDeviceSizeInBytes_Args)   \
  X(Buffer_IsDeleted, 68, PJRT_Buffer_IsDeleted_Args)                       \
  X(Buffer_ToHostBuffer, 70, PJRT_Buffer_ToHostBuffer_Args)                 \
  X(Buffer_ReadyEvent, 72, PJRT_Buffer_ReadyEvent_Args)                     \
  X(Buffer_UnsafePointer, 73, PJRT_Buffer_UnsafePointer_Args)

enum class Slot : int {
#define TPU_PJRT_SLOT_ENUM(name, slot, args) name = slot,
  TPU_PJRT_SLOTS(TPU_PJRT_SLOT_ENUM)
#undef TPU_PJRT_SLOT_ENUM
};
// The highest slot we call: a plugin's api->struct_size must cover it.
constexpr int kMaxSlot = 73;
constexpr size_t kMinApiStructSize = kSlotOffset + 8 * (kMaxSlot + 1);
// Oldest minor version we accept: the table tail was rearranged in 0.57 (notes §1.3).
constexpr int kMinMinorVersion = 57;

}  // namespace torch_tpu::pjrt::c
