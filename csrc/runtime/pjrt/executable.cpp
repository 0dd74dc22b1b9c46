// Executable: a PJRT_LoadedExecutable — outputs count, execute on one device, serialize.
#include <utility>

#include "runtime/pjrt/client.h"
#include "runtime/pjrt/internal.h"

namespace torch_tpu::pjrt {

using namespace impl;  // NOLINT

namespace {
// The PJRT_Executable view of a loaded one (for NumOutputs, Serialize); destroyed on scope exit.
struct ExecutableView {
  const PJRT_Api* api;
  PJRT_Executable* exec = nullptr;
  ExecutableView(const PJRT_Api* a, PJRT_LoadedExecutable* loaded) : api(a) {
    auto g = make_args<PJRT_LoadedExecutable_GetExecutable_Args>();
    g.loaded_executable = loaded;
    check(api, call<Slot::LoadedExecutable_GetExecutable>(api, &g), "reading an executable");
    exec = g.executable;
  }
  ~ExecutableView() {
    auto d = make_args<PJRT_Executable_Args>();
    d.executable = exec;
    destroy_error(api, call<Slot::Executable_Destroy>(api, &d));
  }
  ExecutableView(const ExecutableView&) = delete;
  ExecutableView& operator=(const ExecutableView&) = delete;
};
}  // namespace

Executable::Executable(std::shared_ptr<const Client> owner, PJRT_LoadedExecutable* e)
    : owner_(std::move(owner)), exec_(e) {}

Executable::Executable(Executable&& o) noexcept
    : owner_(std::move(o.owner_)), exec_(std::exchange(o.exec_, nullptr)),
      num_outputs_(o.num_outputs_), portable_(o.portable_), device_(o.device_) {}

Executable& Executable::operator=(Executable&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::move(o.owner_);
    exec_ = std::exchange(o.exec_, nullptr);
    num_outputs_ = o.num_outputs_;
    portable_ = o.portable_;
    device_ = o.device_;
  }
  return *this;
}

Executable::~Executable() { reset(); }

void Executable::reset() noexcept {
  if (exec_ != nullptr) {
    auto a = make_args<PJRT_LoadedExecutable_Args>();
    a.executable = exec_;
    destroy_error(owner_->api(), call<Slot::LoadedExecutable_Destroy>(owner_->api(), &a));
    exec_ = nullptr;
  }
  owner_.reset();
}

Executable Client::load_executable(PJRT_LoadedExecutable* e) const {
  Executable ex(shared_from_this(), e);  // owns e from here
  ExecutableView view(api(), e);
  auto n = make_args<PJRT_Executable_NumOutputs_Args>();
  n.executable = view.exec;
  check(api(), call<Slot::Executable_NumOutputs>(api(), &n), "reading the number of outputs");
  ex.num_outputs_ = n.num_outputs;
  // A non-portable executable lists the device(s) of its assignment; a portable one none.
  auto d = make_args<PJRT_LoadedExecutable_AddressableDevices_Args>();
  d.executable = e;
  check(api(), call<Slot::LoadedExecutable_AddressableDevices>(api(), &d),
        "listing an executable's devices");
  ex.portable_ = d.num_devices == 0;
  if (!ex.portable_) {
    TPU_CHECK(d.num_devices == 1, "[pjrt] executable spans several devices; got ", d.num_devices,
              ", expected 1 (multi-device programs are not supported yet)");
    ex.device_ = d.devices[0];
  }
  return ex;
}

ExecuteResult Executable::execute(const std::vector<DeviceBuffer*>& inputs,
                                  const ExecuteOptions& opts) const {
  TPU_CHECK(exec_ != nullptr, "[pjrt] execute on an empty executable; got none, expected one");
  const Client& client = *owner_;
  std::vector<PJRT_Buffer*> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TPU_CHECK(inputs[i] != nullptr && inputs[i]->valid(), "[pjrt] execute: input ", i,
              " is empty; got no buffer, expected a DeviceBuffer");
    TPU_CHECK(inputs[i]->owner_.get() == &client, "[pjrt] execute: input ", i,
              " belongs to another client; got a foreign buffer, expected one of this client");
    args.push_back(inputs[i]->buffer_);
  }
  PJRT_Device* device = nullptr;
  if (portable_) {
    int idx = opts.device < 0 ? 0 : opts.device;
    TPU_CHECK(idx < static_cast<int>(client.raw_devices_.size()), "[pjrt] execute: bad device index; got ",
              idx, ", expected 0..", client.raw_devices_.size() - 1);
    device = client.raw_devices_[idx];
  } else if (opts.device >= 0) {
    TPU_CHECK(opts.device < static_cast<int>(client.raw_devices_.size()) &&
                  client.raw_devices_[opts.device] == device_,
              "[pjrt] execute: a non-portable executable runs on its compiled device; got device ",
              opts.device, ", expected that device (compile with CompileOptions{.portable = true})");
  }
  auto eo = make_args<PJRT_ExecuteOptions>();
  eo.non_donatable_input_indices = opts.non_donatable.data();
  eo.num_non_donatable_input_indices = opts.non_donatable.size();
  std::vector<PJRT_Buffer*> outs(num_outputs_, nullptr);
  PJRT_Buffer* const* arg_list = args.data();
  PJRT_Buffer** out_list = outs.data();
  PJRT_Event* done = nullptr;
  auto a = make_args<PJRT_LoadedExecutable_Execute_Args>();
  a.executable = exec_;
  a.options = &eo;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = args.size();
  a.output_lists = &out_list;
  a.device_complete_events = &done;
  a.execute_device = device;
  check(client.api(), call<Slot::LoadedExecutable_Execute>(client.api(), &a), "executing");
  ExecuteResult r;
  r.done = Event(owner_, done, "execution");
  r.outputs.reserve(outs.size());
  for (PJRT_Buffer* b : outs) r.outputs.push_back(DeviceBuffer(owner_, b));
  return r;
}

std::string Executable::serialize() const {
  TPU_CHECK(exec_ != nullptr, "[pjrt] serialize on an empty executable; got none, expected one");
  const PJRT_Api* api = owner_->api();
  ExecutableView view(api, exec_);
  auto a = make_args<PJRT_Executable_Serialize_Args>();
  a.executable = view.exec;
  check(api, call<Slot::Executable_Serialize>(api, &a), "serializing an executable");
  // The bytes live as long as a.serialized_executable, freed by its deleter exactly once.
  struct Free {
    PJRT_Executable_Serialize_Args* a;
    ~Free() {
      if (a->serialized_executable_deleter) a->serialized_executable_deleter(a->serialized_executable);
    }
  } free_on_exit{&a};
  return std::string(a.serialized_bytes, a.serialized_bytes_size);
}

}  // namespace torch_tpu::pjrt
