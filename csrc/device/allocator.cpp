// The caching allocator for "tpu" device memory (64-byte aligned host memory on the host
// runtime). Freed blocks are kept per device in size classes and reused; statistics follow
// c10::CachingDeviceAllocator::DeviceStats (what torch.tpu.memory_stats reports).
// Thread-safe: allocation happens on user threads, frees also on stream/autograd workers.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/device.h"
#include "exec/stream.h"

namespace torch_tpu::device {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
constexpr size_t kAlign = 64;
constexpr size_t kSmall = 1 << 20;  // blocks up to 1 MiB count as the small pool
constexpr int kMaxDevices = 16;

// Size classes: multiples of 512 B up to 1 MiB, then 4 classes per power of two.
size_t round_size(size_t n) {
  if (n <= kSmall) return (n + 511) & ~size_t(511);
  size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // largest power of two < n
  size_t step = p / 4;
  return (n + step - 1) / step * step;
}

// A block of device memory. DataPtrs are "simple" (context == data pointer, as copy-on-write
// requires); the allocator finds the Block of a pointer in its live table.
struct Block {
  void* ptr;
  size_t size;       // rounded size (what is reserved)
  size_t requested;  // what the caller asked for
  int dev;
};

int64_t read_capacity() {
  const char* s = std::getenv("TORCH_TPU_MEMORY_CAPACITY");
  if (!s || !*s) return 0;
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  TORCH_CHECK(end && *end == '\0' && v > 0, "[allocator] TORCH_TPU_MEMORY_CAPACITY invalid; got '", s,
              "', expected a positive number of bytes");
  return v;
}

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    int dev = current_device();
    c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev));
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, device};
    void* p = take(dev, n);
    return {p, p, &TpuAllocator::release, device};
  }

  // A device-to-device copy. Pending commands may still write `src`, so the streams drain
  // first. Must not be called from inside a stream command (it would wait on itself).
  void copy_data(void* dst, const void* src, std::size_t count) const override {
    exec::synchronize_all();
    std::memcpy(dst, src, count);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &TpuAllocator::release; }

  // The device owning `p` (a pointer into a live block's start), or -1.
  int device_of(const void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = live_.find(const_cast<void*>(p));
    return it == live_.end() ? -1 : it->second.dev;
  }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t = {0, 0}) override {
    std::lock_guard<std::mutex> lk(mu_);
    for (int d = 0; d < kMaxDevices; ++d) free_cached(d);
  }

  // Commands hold Storage references until they ran, so a freed block is never in use.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex idx) override {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_[check(idx)];
  }
  void resetAccumulatedStats(c10::DeviceIndex idx) override {
    std::lock_guard<std::mutex> lk(mu_);
    DeviceStats& s = stats_[check(idx)];
    for_all(s, [](c10::CachingAllocator::Stat& x) { x.reset_accumulated(); });
    s.num_alloc_retries = s.num_ooms = 0;
    s.num_device_alloc = s.num_device_free = 0;
  }
  void resetPeakStats(c10::DeviceIndex idx) override {
    std::lock_guard<std::mutex> lk(mu_);
    for_all(stats_[check(idx)], [](c10::CachingAllocator::Stat& x) { x.reset_peak(); });
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex idx) override {
    std::lock_guard<std::mutex> lk(mu_);
    int d = check(idx);
    size_t total = capacity_ > 0 ? capacity_ : 0;
    size_t used = stats_[d].reserved_bytes[0].current;
    return {total > used ? total - used : 0, total};
  }

 private:
  static int check(c10::DeviceIndex idx) {
    int d = idx < 0 ? current_device() : idx;
    TORCH_CHECK(d < device_count(), "[allocator] invalid device index; got ", d, ", expected 0..",
                device_count() - 1);
    return d;
  }
  template <class F>
  static void for_all(DeviceStats& s, F f) {
    for (auto* arr : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                      &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes})
      for (auto& x : *arr) f(x);
    f(s.oversize_allocations);
    f(s.oversize_segments);
  }
  // Applies `f` to the aggregate entry and to the pool entry of a block of `size`.
  template <class F>
  static void both(c10::CachingAllocator::StatArray& a, size_t size, F f) {
    f(a[0]);
    f(a[size <= kSmall ? 1 : 2]);
  }

  void* take(int dev, size_t n) {
    size_t size = round_size(n);
    std::lock_guard<std::mutex> lk(mu_);
    DeviceStats& s = stats_[dev];
    Block b{nullptr, size, n, dev};
    auto& pool = cache_[dev];
    auto it = pool.find(size);
    if (it != pool.end() && !it->second.empty()) {
      b.ptr = it->second.back();
      it->second.pop_back();
    } else {
      b.ptr = fresh(dev, size);
    }
    live_.emplace(b.ptr, b);
    both(s.allocation, size, [](auto& x) { x.increase(1); });
    both(s.active, size, [](auto& x) { x.increase(1); });
    both(s.allocated_bytes, size, [&](auto& x) { x.increase(size); });
    both(s.active_bytes, size, [&](auto& x) { x.increase(size); });
    both(s.requested_bytes, size, [&](auto& x) { x.increase(n); });
    return b.ptr;
  }

  // A new segment from the system; under capacity pressure the cache is dropped first.
  void* fresh(int dev, size_t size) {
    DeviceStats& s = stats_[dev];
    auto over = [&] { return capacity_ > 0 && s.reserved_bytes[0].current + int64_t(size) > capacity_; };
    void* p = over() ? nullptr : std::aligned_alloc(kAlign, size);
    if (!p) {
      ++s.num_alloc_retries;
      free_cached(dev);
      p = over() ? nullptr : std::aligned_alloc(kAlign, size);
    }
    if (!p) {
      ++s.num_ooms;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "[allocator] out of memory on tpu:", dev, "; tried to allocate ",
                       size, " bytes with ", s.reserved_bytes[0].current, " bytes reserved, capacity ",
                       capacity_ > 0 ? std::to_string(capacity_) : std::string("unlimited"),
                       " (env TORCH_TPU_MEMORY_CAPACITY)");
    }
    ++s.num_device_alloc;
    both(s.segment, size, [](auto& x) { x.increase(1); });
    both(s.reserved_bytes, size, [&](auto& x) { x.increase(size); });
    return p;
  }

  // Caller holds mu_.
  void free_cached(int dev) {
    DeviceStats& s = stats_[dev];
    for (auto& [size, blocks] : cache_[dev]) {
      for (void* p : blocks) {
        std::free(p);
        ++s.num_device_free;
        both(s.segment, size, [](auto& x) { x.decrease(1); });
        both(s.reserved_bytes, size, [&](auto& x) { x.decrease(size); });
      }
    }
    cache_[dev].clear();
  }

  void put_back(void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    auto node = live_.extract(p);
    TORCH_INTERNAL_ASSERT(!node.empty(), "[allocator] freeing a pointer it does not own");
    const Block& b = node.mapped();
    DeviceStats& s = stats_[b.dev];
    size_t size = b.size;
    both(s.allocation, size, [](auto& x) { x.decrease(1); });
    both(s.active, size, [](auto& x) { x.decrease(1); });
    both(s.allocated_bytes, size, [&](auto& x) { x.decrease(size); });
    both(s.active_bytes, size, [&](auto& x) { x.decrease(size); });
    both(s.requested_bytes, size, [&](auto& x) { x.decrease(b.requested); });
    cache_[b.dev][size].push_back(p);
  }

  static void release(void* ptr);

  std::mutex mu_;
  DeviceStats stats_[kMaxDevices];
  std::map<size_t, std::vector<void*>> cache_[kMaxDevices];  // free blocks by size class
  std::unordered_map<void*, Block> live_;
  const int64_t capacity_ = read_capacity();
};

// Leaked on purpose: stream workers may free blocks during static destruction.
TpuAllocator* const g_allocator = new TpuAllocator();
void TpuAllocator::release(void* ptr) { g_allocator->put_back(ptr); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, g_allocator);

}  // namespace

c10::Allocator* allocator() { return g_allocator; }
int device_of_ptr(const void* p) { return g_allocator->device_of(p); }

}  // namespace torch_tpu::device
