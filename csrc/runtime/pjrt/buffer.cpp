// DeviceBuffer (a PJRT_Buffer: metadata, device -> host copies, ready events) and Event.
#include <utility>

#include "runtime/pjrt/client.h"
#include "runtime/pjrt/internal.h"

namespace torch_tpu::pjrt {

using namespace impl;  // NOLINT

// ---- Event ----------------------------------------------------------------------------------

Event::Event(std::shared_ptr<const Client> owner, PJRT_Event* e, const char* what)
    : owner_(std::move(owner)), event_(e), what_(what) {}

Event::Event(Event&& o) noexcept
    : owner_(std::move(o.owner_)), event_(std::exchange(o.event_, nullptr)), what_(o.what_),
      awaited_(o.awaited_), error_(std::move(o.error_)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::move(o.owner_);
    event_ = std::exchange(o.event_, nullptr);
    what_ = o.what_;
    awaited_ = o.awaited_;
    error_ = std::move(o.error_);
  }
  return *this;
}

Event::~Event() { reset(); }

void Event::reset() noexcept {
  if (event_ != nullptr) {
    auto a = make_args<PJRT_Event_Args>();
    a.event = event_;
    destroy_error(owner_->api(), call<Slot::Event_Destroy>(owner_->api(), &a));
    event_ = nullptr;
  }
  owner_.reset();
}

bool Event::is_ready() const {
  if (event_ == nullptr || awaited_) return true;
  auto a = make_args<PJRT_Event_IsReady_Args>();
  a.event = event_;
  check(owner_->api(), call<Slot::Event_IsReady>(owner_->api(), &a), "polling an event");
  return a.is_ready;
}

void Event::await() {
  if (event_ != nullptr && !awaited_) {
    auto a = make_args<PJRT_Event_Args>();
    a.event = event_;
    error_ = take_error(owner_->api(), call<Slot::Event_Await>(owner_->api(), &a));
    awaited_ = true;
  }
  if (!error_.empty()) fail(what_, error_);
}

namespace {
struct OnReady {
  std::shared_ptr<const Client> owner;
  const PJRT_Api* api;
  std::function<void(const std::string&)> fn;
};
void on_ready_trampoline(PJRT_Error* err, void* arg) {
  std::unique_ptr<OnReady> r(static_cast<OnReady*>(arg));
  std::string msg;
  try {
    msg = take_error(r->api, err);
  } catch (...) {
    msg = "UNKNOWN: (could not read the error)";
  }
  try {
    r->fn(msg);
  } catch (...) {  // a plugin thread cannot take an exception
  }
}
}  // namespace

void Event::on_ready(std::function<void(const std::string& error)> fn) {
  if (event_ == nullptr || awaited_) {
    fn(error_);
    reset();
    return;
  }
  const PJRT_Api* api = owner_->api();
  auto* r = new OnReady{owner_, api, std::move(fn)};
  auto a = make_args<PJRT_Event_OnReady_Args>();
  a.event = event_;
  a.callback = on_ready_trampoline;
  a.user_arg = r;
  PJRT_Error* e = call<Slot::Event_OnReady>(api, &a);
  if (e != nullptr) delete r;  // not registered: the callback will never run
  check(api, e, "registering an event callback");
  reset();  // the registration holds what it needs; the callback owns `r`
}

// ---- DeviceBuffer -------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(std::shared_ptr<const Client> owner, PJRT_Buffer* b)
    : owner_(std::move(owner)), buffer_(b) {}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : owner_(std::move(o.owner_)), buffer_(std::exchange(o.buffer_, nullptr)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::move(o.owner_);
    buffer_ = std::exchange(o.buffer_, nullptr);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() noexcept {
  if (buffer_ != nullptr) {
    auto a = make_args<PJRT_Buffer_Args>();
    a.buffer = buffer_;
    destroy_error(owner_->api(), call<Slot::Buffer_Destroy>(owner_->api(), &a));
    buffer_ = nullptr;
  }
  owner_.reset();
}

#define TPU_PJRT_CHECK_VALID(fn) \
  TPU_CHECK(buffer_ != nullptr, "[pjrt] DeviceBuffer::" fn " on an empty buffer; got none, expected a buffer")

ir::DType DeviceBuffer::dtype() const {
  TPU_PJRT_CHECK_VALID("dtype");
  auto a = make_args<PJRT_Buffer_ElementType_Args>();
  a.buffer = buffer_;
  check(owner_->api(), call<Slot::Buffer_ElementType>(owner_->api(), &a), "reading a buffer type");
  return from_pjrt(a.type);
}

std::vector<int64_t> DeviceBuffer::dims() const {
  TPU_PJRT_CHECK_VALID("dims");
  auto a = make_args<PJRT_Buffer_Dimensions_Args>();
  a.buffer = buffer_;
  check(owner_->api(), call<Slot::Buffer_Dimensions>(owner_->api(), &a), "reading buffer dims");
  return std::vector<int64_t>(a.dims, a.dims + a.num_dims);
}

int64_t DeviceBuffer::numel() const {
  int64_t n = 1;
  for (int64_t d : dims()) n *= d;
  return n;
}

size_t DeviceBuffer::host_size() const {
  return static_cast<size_t>(numel()) * ir::dtype_size(dtype());
}

size_t DeviceBuffer::on_device_size() const {
  TPU_PJRT_CHECK_VALID("on_device_size");
  auto a = make_args<PJRT_Buffer_OnDeviceSizeInBytes_Args>();
  a.buffer = buffer_;
  check(owner_->api(), call<Slot::Buffer_OnDeviceSizeInBytes>(owner_->api(), &a),
        "reading a buffer's device size");
  return a.size;
}

bool DeviceBuffer::is_deleted() const {
  TPU_PJRT_CHECK_VALID("is_deleted");
  auto a = make_args<PJRT_Buffer_IsDeleted_Args>();
  a.buffer = buffer_;
  check(owner_->api(), call<Slot::Buffer_IsDeleted>(owner_->api(), &a), "polling a buffer");
  return a.is_deleted;
}

Event DeviceBuffer::ready() const {
  TPU_PJRT_CHECK_VALID("ready");
  auto a = make_args<PJRT_Buffer_ReadyEvent_Args>();
  a.buffer = buffer_;
  check(owner_->api(), call<Slot::Buffer_ReadyEvent>(owner_->api(), &a), "getting a buffer's ready event");
  return Event(owner_, a.event, "computing a buffer");
}

Event DeviceBuffer::to_host_async(void* dst, size_t size) const {
  TPU_PJRT_CHECK_VALID("to_host");
  std::vector<int64_t> d = dims();
  size_t want = host_size();
  TPU_CHECK(size == want, "[pjrt] to_host: destination size mismatch; got ", size,
            " bytes, expected ", want, " (", ir::dtype_name(dtype()), ", ", d.size(), " dims)");
  // Dense row-major host layout, always given: without it a TPU copies its tiled device
  // layout out (shared/notes/pjrt.md §2.6).
  std::vector<int64_t> minor_to_major(d.size());
  for (size_t i = 0; i < d.size(); ++i) minor_to_major[i] = static_cast<int64_t>(d.size() - 1 - i);
  auto layout = make_args<PJRT_Buffer_MemoryLayout>();
  layout.type = kTiled;
  layout.tiled.struct_size = kStructSize<PJRT_Buffer_MemoryLayout_Tiled>;
  layout.tiled.minor_to_major = minor_to_major.data();
  layout.tiled.minor_to_major_size = minor_to_major.size();
  auto a = make_args<PJRT_Buffer_ToHostBuffer_Args>();
  a.src = buffer_;
  a.host_layout = &layout;
  a.dst = dst;
  a.dst_size = size;
  check(owner_->api(), call<Slot::Buffer_ToHostBuffer>(owner_->api(), &a), "copying a buffer to the host");
  return Event(owner_, a.event, "device-to-host transfer");
}

uintptr_t DeviceBuffer::unsafe_pointer() const {
  TPU_PJRT_CHECK_VALID("unsafe_pointer");
  auto a = make_args<PJRT_Buffer_UnsafePointer_Args>();
  a.buffer = buffer_;
  check(owner_->api(), call<Slot::Buffer_UnsafePointer>(owner_->api(), &a), "reading a buffer pointer");
  return a.pointer;
}

}  // namespace torch_tpu::pjrt
