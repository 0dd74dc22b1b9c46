// The torch-free PJRT client: RAII wrappers over a PJRT C API plugin (libtpu, the XLA CUDA or
// CPU plugin) loaded with dlopen. Plugin -> Client -> DeviceBuffer / Executable / Event.
// No PJRT_* type is usable outside csrc/runtime/pjrt/ (the forward declarations below only
// name private members). Every failure is a torch_tpu::Error "[pjrt] what failed; got X,
// expected Y" carrying the plugin's message; nothing here aborts the process.
//
// Lifetimes: a Plugin lives for the process. A Client is shared (std::shared_ptr); every
// DeviceBuffer, Executable and Event it made holds a reference to it, so the client is
// destroyed after the last of them, as PJRT requires. Thread safety: Client and Executable
// methods are safe from any thread (the plugin's client is thread-safe); a DeviceBuffer or
// Event may be read (const methods) from several threads but moved/destroyed by one.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace torch_tpu::pjrt {
namespace c {
struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_LoadedExecutable;
}  // namespace c
class Client;

// Where the plugin is: $TORCH_TPU_PJRT_PLUGIN if set (even if the file is missing, so the
// load error names it), else /usr/local/lib/torch_tpu/pjrt_cpu_plugin.so if it exists
// (installed by tools/pjrt-plugin), else "". Reads the environment on each call.
std::string default_plugin_path();

// A plugin attribute or a client-create option.
struct NamedValue {
  std::string name;
  std::variant<std::string, int64_t, std::vector<int64_t>, float, bool> value;
  std::string to_string() const;  // "name=value", lists as 1.2.3
};

class Plugin {
 public:
  // dlopen(path, RTLD_NOW | RTLD_LOCAL), GetPjrtApi, version checks (major 0, minor >= 57,
  // table covering every slot we call), PJRT_Plugin_Initialize, attributes. Once per file
  // per process (keyed by realpath): later calls return the same Plugin, or rethrow the
  // first failure. The library is never dlclosed. Sets TF_CPP_MIN_LOG_LEVEL=3 unless set.
  // Blocking; thread-safe. Throws Error naming the path, the API version found and how to
  // install a plugin (tools/pjrt-plugin or TORCH_TPU_PJRT_PLUGIN).
  static const Plugin& load(const std::string& path);

  const std::string& path() const { return path_; }
  int api_major() const { return major_; }
  int api_minor() const { return minor_; }
  // Attributes as the plugin reports them (xla_version, stablehlo_current_version, ...).
  const std::vector<NamedValue>& attributes() const { return attributes_; }
  const NamedValue* attribute(std::string_view name) const;
  int64_t xla_version() const;                        // -1 if not reported
  std::vector<int64_t> stablehlo_current_version() const;  // {} if not reported
  std::vector<int64_t> stablehlo_minimum_version() const;

  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

 private:
  Plugin() = default;
  friend class Client;
  friend struct PluginLoader;
  const c::PJRT_Api* api_ = nullptr;
  std::string path_;
  int major_ = 0, minor_ = 0;
  std::vector<NamedValue> attributes_;
};

// A completion signal from the plugin (transfer done, execution done). Move-only; an empty
// Event is ready and successful. Destroying one that is not ready is allowed (the work
// still completes).
class Event {
 public:
  Event() = default;
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  ~Event();

  bool valid() const { return event_ != nullptr; }
  // Non-blocking poll.
  bool is_ready() const;
  // Blocks until ready; throws Error "[pjrt] <what> failed; ..." if the work failed. May be
  // called again (returns or throws the same).
  void await();
  // Runs `fn(error)` once the event is ready (error "" = success, else "CODE: message"), on a
  // plugin thread or inline if already awaited: keep it short; exceptions it throws are
  // dropped. Consumes the event (valid() becomes false). For releasing memory when queued
  // work completes (the stream-ordered allocator).
  void on_ready(std::function<void(const std::string& error)> fn);

 private:
  friend class Client;
  friend class DeviceBuffer;
  friend class Executable;
  Event(std::shared_ptr<const Client> owner, c::PJRT_Event* e, const char* what);
  void reset() noexcept;
  std::shared_ptr<const Client> owner_;
  c::PJRT_Event* event_ = nullptr;
  const char* what_ = "";
  bool awaited_ = false;
  std::string error_;
};

// An array in device memory, owned (PJRT_Buffer_Destroy on destruction). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();

  bool valid() const { return buffer_ != nullptr; }
  ir::DType dtype() const;            // throws for a type the IR lacks (u32, c64, ...)
  std::vector<int64_t> dims() const;  // row-major logical dims
  int64_t numel() const;
  size_t host_size() const;       // numel * dtype size: what to_host writes
  size_t on_device_size() const;  // the plugin's allocation (padding/tiling included)
  // True once donated to an Execute (or deleted): only destruction is then valid.
  bool is_deleted() const;
  // Ready when the value is computed; an execution error surfaces here.
  Event ready() const;
  // Copies the value, dense row-major, into dst[0, size): size must equal host_size().
  // Asynchronous: dst must stay alive and untouched until the Event is ready; await it.
  Event to_host_async(void* dst, size_t size) const;
  void to_host(void* dst, size_t size) const { to_host_async(dst, size).await(); }
  // Debug/tests: the plugin's device address (same address = same memory).
  uintptr_t unsafe_pointer() const;

 private:
  friend class Client;
  friend class Executable;
  DeviceBuffer(std::shared_ptr<const Client> owner, c::PJRT_Buffer* b);
  void reset() noexcept;
  std::shared_ptr<const Client> owner_;
  c::PJRT_Buffer* buffer_ = nullptr;
};

struct ExecuteOptions {
  // Portable executables only: index into Client::devices() to run on (-1 = device 0).
  // A non-portable executable runs where it was compiled (default device assignment).
  int device = -1;
  // Argument indices that must not be donated this call even if the program aliases them
  // (needed when one buffer is passed twice).
  std::vector<int64_t> non_donatable;
};

struct ExecuteResult {
  std::vector<DeviceBuffer> outputs;  // one per program result, in order
  Event done;                         // the execution finished (or failed)
};

// A compiled, loaded program. Move-only; execute() is thread-safe.
class Executable {
 public:
  Executable() = default;
  Executable(Executable&& o) noexcept;
  Executable& operator=(Executable&& o) noexcept;
  ~Executable();

  bool valid() const { return exec_ != nullptr; }
  size_t num_outputs() const { return num_outputs_; }
  bool portable() const { return portable_; }
  // Enqueues one run; returns at once with the outputs (usable as inputs to later runs
  // immediately: PJRT orders them) and a completion Event. Inputs are borrowed for the
  // call; an input the program donates (tf.aliasing_output / jax.buffer_donor on a @main
  // argument) is consumed: its DeviceBuffer reports is_deleted() and must only be destroyed.
  // Inputs must come from this executable's client. Errors known at enqueue time throw here,
  // errors during the run surface in `done` and in the outputs' ready events.
  ExecuteResult execute(const std::vector<DeviceBuffer*>& inputs,
                        const ExecuteOptions& opts = {}) const;
  // Plugin-specific bytes for a persistent cache (Client::deserialize). Not stable across
  // plugin versions: key the cache with the plugin and platform versions. Blocking.
  std::string serialize() const;

 private:
  friend class Client;
  Executable(std::shared_ptr<const Client> owner, c::PJRT_LoadedExecutable* e);
  void reset() noexcept;
  std::shared_ptr<const Client> owner_;
  c::PJRT_LoadedExecutable* exec_ = nullptr;
  size_t num_outputs_ = 0;
  bool portable_ = false;
  c::PJRT_Device* device_ = nullptr;  // non-portable: the one device it runs on
};

struct Device {
  int index = 0;         // position in Client::devices()
  int id = 0;            // the plugin's global device id
  std::string kind;      // "cpu", "NVIDIA H200", "TPU v5 lite"
  std::string to_string; // "CpuDevice(id=0)"
};

// PJRT_Device_MemoryStats: bytes_in_use always, the rest when the plugin reports them.
struct MemoryStats {
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use, num_allocs, largest_alloc_size, bytes_limit,
      bytes_reserved, peak_bytes_reserved, pool_bytes, peak_pool_bytes;
};

struct CompileOptions {
  // false: compiled for the default device assignment (device 0); true: runs on any one
  // device chosen at execute time (ExecuteOptions::device).
  bool portable = false;
  // The serialized xla.CompileOptionsProto (never empty: empty options abort XLA).
  std::string bytes() const;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  // PJRT_Client_Create with `options` (plugin-specific: CPU "cpu_device_count"; GPU
  // "preallocate", "memory_fraction", ...; unknown names are an error on some plugins).
  // Sets TF_CPP_MIN_LOG_LEVEL=3 if unset; rejects an XLA_FLAGS entry that does not start
  // with --xla_ (XLA aborts the process on unknown flags; unknown --xla_* names still do).
  // Blocking; thread-safe.
  static std::shared_ptr<Client> create(const Plugin& plugin,
                                        const std::vector<NamedValue>& options = {});
  ~Client();  // PJRT_Client_Destroy, after the last buffer/executable/event is gone

  const Plugin& plugin() const { return *plugin_; }
  const std::string& platform_name() const { return platform_name_; }       // "cpu", "cuda"
  const std::string& platform_version() const { return platform_version_; }  // cache keys
  const std::vector<Device>& devices() const { return devices_; }           // addressable
  // std::nullopt when the plugin does not implement memory stats. Blocking.
  std::optional<MemoryStats> memory_stats(int device) const;

  // Copies data[0, numel * dtype size) (dense row-major) to `device`. With done == nullptr
  // the plugin copies before returning (kImmutableOnlyDuringCall): `data` may be reused at
  // once. With done != nullptr, *done receives the done-with-host-buffer event
  // (kImmutableUntilTransferCompletes): keep `data` alive and unchanged until it is ready —
  // saves a staging copy on accelerators. The buffer itself may be used at once either way.
  DeviceBuffer to_device(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                         int device = 0, Event* done = nullptr) const;
  // Compiles StableHLO text (format "mlir"; entry func @main). Blocking (tens of ms).
  // Throws Error with the plugin's diagnostics on a parse/verify/compile failure.
  Executable compile(std::string_view mlir, const CompileOptions& options = {}) const;
  // Loads bytes from Executable::serialize of the same plugin version. Blocking.
  Executable deserialize(std::string_view bytes) const;

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

 private:
  Client() = default;
  friend class Event;
  friend class DeviceBuffer;
  friend class Executable;
  Executable load_executable(c::PJRT_LoadedExecutable* e) const;
  const c::PJRT_Api* api() const;
  const Plugin* plugin_ = nullptr;
  c::PJRT_Client* client_ = nullptr;
  std::string platform_name_, platform_version_;
  std::vector<Device> devices_;
  std::vector<c::PJRT_Device*> raw_devices_;
};

}  // namespace torch_tpu::pjrt
