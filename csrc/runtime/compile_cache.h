// The compile cache shared by every execution mode: graph hash -> Executable, with
// TorchTPU-style stats (requests, hits, per-entry compile time and read count).
// Bounded: past `capacity()` entries (env TORCH_TPU_COMPILE_CACHE_ENTRIES, default 4096)
// the least recently used eighth is dropped (executables still in use live on in their
// launches), and half of the entries when the runtime says its executables crowd the process
// (Runtime::executables_crowded). Thread-safe. A hit is lock-free on the thread's own small front table (its last
// keys): the entry's counters are atomics, and an evicted or cleared entry is marked dead so
// a front slot never serves it. Recency for eviction is the tick of the last miss, insert or
// locked hit (front hits since the last miss tie).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/runtime.h"

namespace torch_tpu::runtime {

struct CacheEntryStats {
  uint64_t key = 0;
  int64_t compilation_duration_us = 0;
  int64_t read_count = 0;
  // What compiled it (the op, "fused_window", "torch.compile"), and its parameters
  // and outputs ("f32[4,16] i64[] -> f32[4,16]"): which programs a loop compiles, per which shapes.
  std::string name, signature;
  int64_t miss_index = 0;  // misses counted when it was compiled (its place in compile order)
};

struct CacheStats {
  int64_t num_cache_reqs = 0;
  int64_t num_cache_hits = 0;
  std::vector<CacheEntryStats> per_entry_stats;
};

class CompileCache {
 public:
  // Returns the executable for `graph` (by its structural hash), compiling it on a miss.
  // `name` labels the entry in stats() (copied).
  std::shared_ptr<Executable> get(const ir::Graph& graph, Runtime& rt, const char* name = nullptr);
  // Lookup by a caller-computed key (skips hashing the graph); nullptr on a miss.
  std::shared_ptr<Executable> find(uint64_t key);
  std::shared_ptr<Executable> insert(uint64_t key, const ir::Graph& graph, Runtime& rt, const char* name = nullptr);
  CacheStats stats() const;
  void clear();
  CompileCache();
  size_t capacity() const { return capacity_; }
  void set_capacity(size_t n);
  static CompileCache& global();

 private:
  // Shared with the threads' front tables; `stats.read_count` is filled from `reads`.
  struct Entry {
    std::shared_ptr<Executable> exe;
    CacheEntryStats stats;
    std::atomic<int64_t> reads{1};   // the miss that compiled it, then one per hit
    std::atomic<uint64_t> used{0};   // tick of the last miss/insert/locked hit seen
    std::atomic<bool> live{true};    // false once evicted or cleared
  };
  // This thread's front table: the entries of its last hits, by key.
  struct Front {
    uint64_t cache = 0, key = 0;
    std::shared_ptr<Entry> e;
  };
  static constexpr size_t kFront = 16;
  static Front& front(uint64_t key);
  void drop_locked(Entry& e);
  void evict_locked(size_t keep);
  size_t capacity_ = default_capacity();
  static size_t default_capacity();
  const uint64_t id_;  // tells this cache's front slots from another's
  std::atomic<uint64_t> tick_{0};
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Entry>> map_;
  // Requests = hits + misses; hits = dropped_hits_ + the live entries' reads - 1.
  int64_t misses_ = 0, dropped_hits_ = 0;
};

}  // namespace torch_tpu::runtime
