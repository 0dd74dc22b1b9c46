// at::PrivateUse1HooksInterface for "tpu" (what ATen asks of the backend: availability,
// generators, device of a pointer, storage resize, current device), and the mandatory
// AutocastPrivateUse1 fallthrough so torch.autocast("tpu") can run ops.
#include <ATen/Context.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>

#include "device/device.h"
#include "runtime/stream.h"

namespace torch_tpu::device {
at::Generator new_generator(int dev);  // generator.cpp
int device_of_ptr(const void* p);      // allocator.cpp: -1 when not a live tpu block
c10::Allocator* pinned_allocator();    // pinned.cpp
bool is_pinned_ptr(const void* p);     // pinned.cpp: a storage start from pinned_allocator()
}

namespace torch_tpu::device {
namespace {

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex idx) const override {
    return default_generator(idx);
  }
  at::Generator getNewGenerator(c10::DeviceIndex idx) const override { return new_generator(idx); }

  // The device of a block start from our allocator; any other pointer (device memory is host
  // memory here) is taken to be on the current device.
  at::Device getDeviceFromPtr(void* p) const override {
    int dev = device_of_ptr(p);
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev >= 0 ? dev : current_device())};
  }
  // pin_memory=True gets CPU memory that is_pinned() recognises (pinned.cpp); host copies are
  // memcpys that need no page locking.
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool isPinnedPtr(const void* p) const override { return is_pinned_ptr(p); }

  // UntypedStorage.resize_ (FSDP2 frees/re-allocates parameters with it). Does the work
  // itself: at::native::resize_bytes_nocuda would call back here forever.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "[storage] resize_ on a non-resizable tpu storage; got nbytes ",
                impl->nbytes(), ", requested ", newsize);
    int dev = impl->device().has_index() ? impl->device().index() : current_device();
    int prev = current_device();
    set_current_device(dev);
    c10::DataPtr fresh;
    try {
      fresh = allocator()->allocate(newsize);
    } catch (...) {
      set_current_device(prev);
      throw;
    }
    set_current_device(prev);
    size_t keep = std::min(impl->nbytes(), newsize);
    // Queued after the pending commands that may still write the old buffer; the old block
    // is reused only after the copy (stream order).
    if (keep > 0 && impl->data() != nullptr) {
      runtime::stream::flush_deferred(dev);  // and after deferred ones (the fused window)
      copy_bytes(dev, fresh.get(), impl->data(), keep);
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }

  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex idx) const override { set_current_device(idx); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex idx) const override {
    int old = current_device();
    if (idx >= 0) set_current_device(idx);
    return static_cast<c10::DeviceIndex>(old);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex idx) const override { return exchangeDevice(idx); }
};

const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());  // leaked: lives for the process
  return true;
}();

}  // namespace
// Errors of asynchronous commands surface at a sync point as the c10 error PyTorch CPU raises
// for the same failure (IndexError, NotImplementedError, else RuntimeError).
void throw_c10(runtime::stream::ErrorKind kind, const std::string& m) {
  switch (kind) {
    case runtime::stream::ErrorKind::NotImplemented: TORCH_CHECK_NOT_IMPLEMENTED(false, m);
    case runtime::stream::ErrorKind::Index: TORCH_CHECK_INDEX(false, m);
    default: TORCH_CHECK(false, m);
  }
}
const bool g_thrower_installed = (runtime::stream::set_thrower(&throw_c10), true);

}  // namespace torch_tpu::device

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}
