// The caching allocator for "tpu" device memory: Buffers from the runtime (runtime.h), kept
// per device in size classes and reused. Stream-ordered, as CUDA's: a block freed by the host
// goes back to the pool at once, even while queued commands still use it, because each device
// has one in-order stream and every later user of the block is queued after them. A cached
// block is returned to the runtime only once the stream has passed its last use (its free
// mark). Statistics follow c10::CachingDeviceAllocator::DeviceStats (torch.tpu.memory_stats).
// Thread-safe: allocation happens on user threads, frees on user and autograd threads.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/device.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"

namespace torch_tpu::device {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
constexpr size_t kSmall = 1 << 20;  // blocks up to 1 MiB count as the small pool
constexpr int kMaxDevices = runtime::stream::kMaxDevices;

// A block of device memory. DataPtrs are "simple" (context == data pointer == the runtime's
// Buffer handle, as copy-on-write requires); the allocator finds the Block in its live table.
struct Block {
  void* ptr;
  size_t size;       // rounded size (what is reserved)
  size_t requested;  // what the caller asked for
  int dev;
};

// A cached block and the stream position after which no queued command uses it.
struct Cached {
  void* ptr;
  uint64_t free_mark;
};

// TORCH_TPU_MEMORY_CAPACITY: bytes, or a number with a unit (KB/MB/GB/TB decimal,
// KiB/MiB/GiB/TiB binary), like an accelerator's HBM size. A malformed value is reported by
// the first allocation (a Python exception), never by aborting at load time.
int64_t parse_capacity(const char* s, std::string* err) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  std::string unit = end ? std::string(end) : std::string();
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},       {"B", 1},          {"KB", 1e3},           {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12},  {"KiB", 1024.0},   {"MiB", 1048576.0},    {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& [name, mult] : kUnits)
    if (unit == name && end != s && v > 0 && v * mult < 9.2e18) return static_cast<int64_t>(v * mult);
  *err = std::string("[allocator] TORCH_TPU_MEMORY_CAPACITY invalid; got '") + s +
         "', expected a positive size such as 17179869184, 16GB or 16GiB";
  return 0;
}

int g_allocator_device_of(const void* p);

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    TORCH_CHECK(capacity_error_.empty(), capacity_error_);
    // A forked child of a process that used tpu fails at its first tpu tensor, before a
    // fused window could defer the failure to a later (maybe background-thread) sync.
    TORCH_CHECK(!runtime::stream::in_bad_fork(),
                "[tpu] cannot use tpu in a forked subprocess: the parent process had started its tpu "
                "command streams, whose threads a fork does not copy. To use tpu with multiprocessing "
                "(DataLoader workers included), use the 'spawn' or 'forkserver' start method");
    int dev = current_device();
    c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev));
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, device};
    void* p = take(dev, n);
    if (c10::memoryProfilingEnabled()) report(p, dev, +1);
    return {p, p, &TpuAllocator::release, device};
  }

  // A device-to-device copy (copy-on-write materialization, storage copies), queued on the
  // stream of dst's device after the commands that write src.
  void copy_data(void* dst, const void* src, std::size_t count) const override {
    int dev = g_allocator_device_of(dst);
    copy_bytes(dev >= 0 ? dev : current_device(), dst, src, count);
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
    std::unique_lock<std::mutex> lk(mu_);
    for (int d = 0; d < kMaxDevices; ++d) release_cached(lk, d, /*wait=*/true);
  }

  // One stream per device: every user of a block is ordered on it already.
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
    check_index("allocator", d);
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
    size_t size = runtime::current().allocation_size(n);
    std::unique_lock<std::mutex> lk(mu_);
    DeviceStats& s = stats_[dev];
    Block b{nullptr, size, n, dev};
    auto& pool = cache_[dev];
    auto it = pool.find(size);
    if (it != pool.end() && !it->second.empty()) {
      b.ptr = it->second.back().ptr;  // reusable at once: later commands run after earlier users
      it->second.pop_back();
    } else {
      b.ptr = fresh(lk, dev, size);
    }
    if (!spare_nodes_.empty()) {  // a node freed before: no heap allocation per tensor
      auto node = std::move(spare_nodes_.back());
      spare_nodes_.pop_back();
      node.key() = b.ptr;
      node.mapped() = b;
      live_.insert(std::move(node));
    } else {
      live_.emplace(b.ptr, b);
    }
    both(s.allocation, size, [](auto& x) { x.increase(1); });
    both(s.active, size, [](auto& x) { x.increase(1); });
    both(s.allocated_bytes, size, [&](auto& x) { x.increase(size); });
    both(s.active_bytes, size, [&](auto& x) { x.increase(size); });
    both(s.requested_bytes, size, [&](auto& x) { x.increase(n); });
    return b.ptr;
  }

  // A new segment from the runtime. Under capacity pressure (or when the runtime has no
  // memory) the cached blocks the stream is done with are released first, then, waiting for
  // queued work, all of them.
  void* fresh(std::unique_lock<std::mutex>& lk, int dev, size_t size) {
    DeviceStats& s = stats_[dev];
    auto over = [&] { return capacity_ > 0 && s.reserved_bytes[0].current + int64_t(size) > capacity_; };
    auto get = [&]() -> void* { return over() ? nullptr : runtime::current().allocate(dev, size); };
    void* p = get();
    for (int attempt = 0; !p && attempt < 2; ++attempt) {
      ++s.num_alloc_retries;
      release_cached(lk, dev, /*wait=*/attempt == 1);
      p = get();
    }
    if (!p) {
      ++s.num_ooms;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "[allocator] out of memory on tpu:", dev, "; tried to allocate ",
                       size, " bytes with ", s.allocated_bytes[0].current, " bytes allocated, ",
                       s.reserved_bytes[0].current, " bytes reserved, capacity ",
                       capacity_ > 0 ? std::to_string(capacity_) : std::string("unlimited"),
                       " (env TORCH_TPU_MEMORY_CAPACITY)");
    }
    ++s.num_device_alloc;
    both(s.segment, size, [](auto& x) { x.increase(1); });
    both(s.reserved_bytes, size, [&](auto& x) { x.increase(size); });
    return p;
  }

  // Returns `dev`'s cached blocks to the runtime: those whose last use has run; with `wait`
  // (never on a stream worker) first waits, unlocked, for the queued work that uses the rest.
  void release_cached(std::unique_lock<std::mutex>& lk, int dev, bool wait) {
    if (wait && !runtime::stream::on_worker()) {
      uint64_t last = 0;
      for (auto& [size, blocks] : cache_[dev])
        for (const Cached& c : blocks) last = std::max(last, c.free_mark);
      if (last > 0 && !runtime::stream::done(dev, last)) {
        lk.unlock();
        runtime::stream::drain(dev, last);
        lk.lock();
      }
    }
    DeviceStats& s = stats_[dev];
    runtime::Runtime& rt = runtime::current();
    for (auto it = cache_[dev].begin(); it != cache_[dev].end();) {
      size_t size = it->first;
      auto& blocks = it->second;
      auto keep = std::partition(blocks.begin(), blocks.end(),
                                 [&](const Cached& c) { return !runtime::stream::done(dev, c.free_mark); });
      for (auto b = keep; b != blocks.end(); ++b) {
        rt.deallocate(buffer_of(b->ptr));
        ++s.num_device_free;
        both(s.segment, size, [](auto& x) { x.decrease(1); });
        both(s.reserved_bytes, size, [&](auto& x) { x.decrease(size); });
      }
      blocks.erase(keep, blocks.end());
      it = blocks.empty() ? cache_[dev].erase(it) : std::next(it);
    }
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
    // Every command using the block was queued before this free (the tensor was alive when
    // it was queued): the block is unused once the stream passes this position.
    cache_[b.dev][size].push_back({p, runtime::stream::queued(b.dev)});
    if (spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
  }

  static void release(void* ptr);

  // Tells torch.profiler(profile_memory=True) about a block allocated (sign +1) or freed
  // (-1) on the calling thread, with the device's totals after it.
  void report(void* p, int dev, int sign) {
    int64_t size, allocated, reserved;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return;
      size = static_cast<int64_t>(it->second.size);
      allocated = stats_[dev].allocated_bytes[0].current - (sign < 0 ? size : 0);
      reserved = stats_[dev].reserved_bytes[0].current;
    }
    c10::reportMemoryUsageToProfiler(p, sign * size, allocated, reserved,
                                     c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev)));
  }

  std::mutex mu_;
  DeviceStats stats_[kMaxDevices];
  std::map<size_t, std::vector<Cached>> cache_[kMaxDevices];  // free blocks by size class
  std::unordered_map<void*, Block> live_;
  // Nodes of live_ kept from freed blocks, reused by take() (bounded).
  static constexpr size_t kSpareNodes = 64;
  std::vector<std::unordered_map<void*, Block>::node_type> spare_nodes_;
  std::string capacity_error_;
  const int64_t capacity_ = parse_capacity(std::getenv("TORCH_TPU_MEMORY_CAPACITY"), &capacity_error_);
};

// Leaked on purpose: stream workers may free blocks during static destruction.
TpuAllocator* const g_allocator = new TpuAllocator();
void TpuAllocator::release(void* ptr) {
  if (c10::memoryProfilingEnabled()) {
    int dev = g_allocator->device_of(ptr);
    if (dev >= 0) g_allocator->report(ptr, dev, -1);
  }
  g_allocator->put_back(ptr);
}
int g_allocator_device_of(const void* p) { return g_allocator->device_of(p); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, g_allocator);

}  // namespace

c10::Allocator* allocator() { return g_allocator; }

void copy_bytes(int dev, const void* dst, const void* src, size_t n) {
  if (n == 0) return;
  runtime::Buffer* d = buffer_of(dst);
  runtime::Buffer* s = buffer_of(src);
  runtime::stream::enqueue(dev, "copy_bytes", [d, s, n] { runtime::current().copy(d, 0, s, 0, n); });
}
int device_of_ptr(const void* p) { return g_allocator->device_of(p); }

}  // namespace torch_tpu::device
