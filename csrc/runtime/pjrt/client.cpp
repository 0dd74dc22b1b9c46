// Client: create/destroy, platform and devices, memory stats, host -> device transfers,
// compile and deserialize.
#include "runtime/pjrt/client.h"

#include <stdlib.h>

#include <sstream>

#include "runtime/pjrt/internal.h"

namespace torch_tpu::pjrt {

using namespace impl;  // NOLINT

namespace {

// XLA aborts the process on an XLA_FLAGS entry it does not know. We cannot know the plugin's
// flag set, but every XLA flag is spelled --xla_*: anything else is refused here.
void check_xla_flags() {
  const char* flags = getenv("XLA_FLAGS");
  if (flags == nullptr) return;
  std::istringstream is(flags);
  std::string tok;
  while (is >> tok)
    TPU_CHECK(tok.rfind("--xla_", 0) == 0, "[pjrt] XLA_FLAGS has an entry XLA would abort on; "
              "got \"", tok, "\", expected only --xla_* flags (unset XLA_FLAGS or fix it)");
}

std::vector<PJRT_NamedValue> to_c(const std::vector<NamedValue>& options) {
  std::vector<PJRT_NamedValue> out;
  for (const NamedValue& o : options) {
    auto v = make_args<PJRT_NamedValue>();
    v.name = o.name.data();
    v.name_size = o.name.size();
    v.value_size = 1;
    if (auto* s = std::get_if<std::string>(&o.value)) {
      v.type = kString, v.string_value = s->data(), v.value_size = s->size();
    } else if (auto* i = std::get_if<int64_t>(&o.value)) {
      v.type = kInt64, v.int64_value = *i;
    } else if (auto* l = std::get_if<std::vector<int64_t>>(&o.value)) {
      v.type = kInt64List, v.int64_array_value = l->data(), v.value_size = l->size();
    } else if (auto* f = std::get_if<float>(&o.value)) {
      v.type = kFloat, v.float_value = *f;
    } else {
      v.type = kBool, v.bool_value = std::get<bool>(o.value);
    }
    out.push_back(v);
  }
  return out;
}

std::string description_string(const PJRT_Api* api, Slot s, PJRT_DeviceDescription* d) {
  auto a = make_args<PJRT_DeviceDescription_String_Args>();
  a.description = d;
  PJRT_Error* e = s == Slot::DeviceDescription_Kind ? call<Slot::DeviceDescription_Kind>(api, &a)
                                                     : call<Slot::DeviceDescription_ToString>(api, &a);
  check(api, e, "reading a device description");
  return std::string(a.value, a.value_size);
}

}  // namespace

const PJRT_Api* Client::api() const { return plugin_->api_; }

std::shared_ptr<Client> Client::create(const Plugin& plugin, const std::vector<NamedValue>& options) {
  setenv("TF_CPP_MIN_LOG_LEVEL", "3", /*overwrite=*/0);
  check_xla_flags();
  const PJRT_Api* api = plugin.api_;
  std::vector<PJRT_NamedValue> opts = to_c(options);
  auto a = make_args<PJRT_Client_Create_Args>();
  a.create_options = opts.data();
  a.num_options = opts.size();
  check(api, call<Slot::Client_Create>(api, &a), "creating a client of " + plugin.path());
  std::shared_ptr<Client> c(new Client());  // from here on ~Client destroys a.client
  c->plugin_ = &plugin;
  c->client_ = a.client;

  auto name = make_args<PJRT_Client_String_Args>();
  name.client = c->client_;
  check(api, call<Slot::Client_PlatformName>(api, &name), "reading the platform name");
  c->platform_name_.assign(name.value, name.value_size);
  auto ver = make_args<PJRT_Client_String_Args>();
  ver.client = c->client_;
  check(api, call<Slot::Client_PlatformVersion>(api, &ver), "reading the platform version");
  c->platform_version_.assign(ver.value, ver.value_size);

  auto devs = make_args<PJRT_Client_AddressableDevices_Args>();
  devs.client = c->client_;
  check(api, call<Slot::Client_AddressableDevices>(api, &devs), "listing devices");
  for (size_t i = 0; i < devs.num_devices; ++i) {
    auto d = make_args<PJRT_Device_GetDescription_Args>();
    d.device = devs.devices[i];
    check(api, call<Slot::Device_GetDescription>(api, &d), "reading a device description");
    auto id = make_args<PJRT_DeviceDescription_Id_Args>();
    id.description = d.device_description;
    check(api, call<Slot::DeviceDescription_Id>(api, &id), "reading a device id");
    c->devices_.push_back({static_cast<int>(i), id.id,
                           description_string(api, Slot::DeviceDescription_Kind, d.device_description),
                           description_string(api, Slot::DeviceDescription_ToString, d.device_description)});
    c->raw_devices_.push_back(devs.devices[i]);
  }
  TPU_CHECK(!c->devices_.empty(), "[pjrt] client of ", plugin.path(),
            " has no devices; got 0 addressable devices, expected at least 1");
  return c;
}

Client::~Client() {
  if (client_ == nullptr) return;
  auto a = make_args<PJRT_Client_Args>();
  a.client = client_;
  destroy_error(api(), call<Slot::Client_Destroy>(api(), &a));  // nothing to do on failure
}

std::optional<MemoryStats> Client::memory_stats(int device) const {
  TPU_CHECK(device >= 0 && device < static_cast<int>(devices_.size()),
            "[pjrt] memory_stats: bad device index; got ", device, ", expected 0..",
            devices_.size() - 1);
  auto a = make_args<PJRT_Device_MemoryStats_Args>();
  a.device = raw_devices_[device];
  PJRT_Error* e = call<Slot::Device_MemoryStats>(api(), &a);
  if (e != nullptr) {
    std::string err = take_error(api(), e);
    if (err.rfind("UNIMPLEMENTED", 0) == 0) return std::nullopt;
    fail("reading memory stats", err);
  }
  MemoryStats s;
  s.bytes_in_use = a.bytes_in_use;
  auto opt = [](bool set, int64_t v) { return set ? std::optional<int64_t>(v) : std::nullopt; };
  s.peak_bytes_in_use = opt(a.peak_bytes_in_use_is_set, a.peak_bytes_in_use);
  s.num_allocs = opt(a.num_allocs_is_set, a.num_allocs);
  s.largest_alloc_size = opt(a.largest_alloc_size_is_set, a.largest_alloc_size);
  s.bytes_limit = opt(a.bytes_limit_is_set, a.bytes_limit);
  s.bytes_reserved = opt(a.bytes_reserved_is_set, a.bytes_reserved);
  s.peak_bytes_reserved = opt(a.peak_bytes_reserved_is_set, a.peak_bytes_reserved);
  s.pool_bytes = opt(a.pool_bytes_is_set, a.pool_bytes);
  s.peak_pool_bytes = opt(a.peak_pool_bytes_is_set, a.peak_pool_bytes);
  return s;
}

DeviceBuffer Client::to_device(const void* data, ir::DType dtype, const std::vector<int64_t>& dims,
                               int device, Event* done) const {
  TPU_CHECK(device >= 0 && device < static_cast<int>(devices_.size()),
            "[pjrt] to_device: bad device index; got ", device, ", expected 0..", devices_.size() - 1);
  for (int64_t d : dims)
    TPU_CHECK(d >= 0, "[pjrt] to_device: negative dimension; got ", d, ", expected >= 0");
  auto a = make_args<PJRT_Client_BufferFromHostBuffer_Args>();
  a.client = client_;
  a.data = data;
  a.type = to_pjrt(dtype);
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = done ? kImmutableUntilTransferCompletes : kImmutableOnlyDuringCall;
  a.device = raw_devices_[device];
  check(api(), call<Slot::Client_BufferFromHostBuffer>(api(), &a), "copying a host buffer to the device");
  DeviceBuffer buf(shared_from_this(), a.buffer);  // owns a.buffer from here
  Event ev(shared_from_this(), a.done_with_host_buffer, "host-to-device transfer");
  if (done != nullptr) *done = std::move(ev);  // else ~Event destroys it (already done)
  return buf;
}

std::string CompileOptions::bytes() const {
  // xla.CompileOptionsProto { executable_build_options (3) { num_replicas (4): 1,
  // num_partitions (5): 1 } }; portable adds device_ordinal (1) = -1 inside and
  // compile_portable_executable (4) = true (shared/notes/pjrt.md §2.4).
  static const char kDefault[] = "\x1a\x04\x20\x01\x28\x01";
  static const char kPortable[] =
      "\x1a\x0f\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x20\x01\x28\x01\x20\x01";
  return portable ? std::string(kPortable, sizeof kPortable - 1)
                  : std::string(kDefault, sizeof kDefault - 1);
}

Executable Client::compile(std::string_view mlir, const CompileOptions& options) const {
  std::string opts = options.bytes();
  auto prog = make_args<PJRT_Program>();
  prog.code = const_cast<char*>(mlir.data());  // read only by Compile
  prog.code_size = mlir.size();
  prog.format = "mlir";
  prog.format_size = 4;
  auto a = make_args<PJRT_Client_Compile_Args>();
  a.client = client_;
  a.program = &prog;
  a.compile_options = opts.data();
  a.compile_options_size = opts.size();
  check(api(), call<Slot::Client_Compile>(api(), &a), "compiling StableHLO");
  return load_executable(a.executable);
}

Executable Client::deserialize(std::string_view bytes) const {
  auto a = make_args<PJRT_Executable_DeserializeAndLoad_Args>();
  a.client = client_;
  a.serialized_executable = bytes.data();
  a.serialized_executable_size = bytes.size();
  check(api(), call<Slot::Executable_DeserializeAndLoad>(api(), &a), "deserializing an executable");
  return load_executable(a.loaded_executable);
}

}  // namespace torch_tpu::pjrt
