// The compile cache shared by every execution mode: graph hash -> Executable, with
// TorchTPU-style stats (requests, hits, per-entry compile time and read count).
// Bounded: past `capacity()` entries (env TORCH_TPU_COMPILE_CACHE_ENTRIES, default 4096)
// the least recently used eighth is dropped (executables still in use live on in their
// launches). Thread-safe.
#pragma once
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
  size_t capacity() const { return capacity_; }
  void set_capacity(size_t n);
  static CompileCache& global();

 private:
  struct Entry {
    std::shared_ptr<Executable> exe;
    CacheEntryStats stats;
    uint64_t used = 0;  // tick of the last find/insert
  };
  void evict_locked();
  size_t capacity_ = default_capacity();
  static size_t default_capacity();
  uint64_t tick_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> map_;
  int64_t reqs_ = 0, hits_ = 0;
};

}  // namespace torch_tpu::runtime
