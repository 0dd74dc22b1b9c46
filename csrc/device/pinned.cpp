// The pinned-memory allocator of "tpu" (`tensor.pin_memory()`, DataLoader(pin_memory=True)):
// ordinary CPU memory, remembered so that `is_pinned()` answers True for it as on CUDA.
// Host<->device copies are memcpys on the host runtime, so page locking would buy nothing.
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <mutex>
#include <unordered_set>

namespace torch_tpu::device {
namespace {

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = c10::alloc_cpu(n == 0 ? 1 : n);  // a distinct pointer even for 0 bytes
    {
      std::lock_guard<std::mutex> lk(mu_);
      live_.insert(p);
    }
    return {p, p, &PinnedAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &PinnedAllocator::release; }
  void copy_data(void* dst, const void* src, std::size_t count) const override { default_copy_data(dst, src, count); }

  bool owns(const void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.count(const_cast<void*>(p)) > 0;
  }

 private:
  static void release(void* p);

  std::mutex mu_;
  std::unordered_set<void*> live_;  // block starts (a storage's data pointer)
};

// Leaked on purpose: pinned storages may be freed during static destruction.
PinnedAllocator* const g_pinned = new PinnedAllocator();

void PinnedAllocator::release(void* p) {
  {
    std::lock_guard<std::mutex> lk(g_pinned->mu_);
    g_pinned->live_.erase(p);
  }
  c10::free_cpu(p);
}

}  // namespace

c10::Allocator* pinned_allocator() { return g_pinned; }
bool is_pinned_ptr(const void* p) { return p != nullptr && g_pinned->owns(p); }

}  // namespace torch_tpu::device
