// Compile cache implementation.
#include "runtime/compile_cache.h"

namespace torch_tpu::runtime {

std::shared_ptr<Executable> CompileCache::find(uint64_t key) {
  std::lock_guard<std::mutex> lk(mu_);
  ++reqs_;
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  ++hits_;
  ++it->second.stats.read_count;
  return it->second.exe;
}

std::shared_ptr<Executable> CompileCache::insert(uint64_t key, const ir::Graph& graph, Runtime& rt) {
  auto t0 = std::chrono::steady_clock::now();
  auto exe = rt.compile(graph);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(mu_);
  auto& e = map_[key];
  e.exe = exe;
  e.stats.key = key;
  e.stats.compilation_duration_us = us;
  e.stats.read_count = 1;
  return exe;
}

std::shared_ptr<Executable> CompileCache::get(const ir::Graph& graph, Runtime& rt) {
  uint64_t key = graph.hash();
  if (auto exe = find(key)) return exe;
  return insert(key, graph, rt);
}

CacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  CacheStats s;
  s.num_cache_reqs = reqs_;
  s.num_cache_hits = hits_;
  for (auto& [k, e] : map_) s.per_entry_stats.push_back(e.stats);
  return s;
}

void CompileCache::clear() {
  std::lock_guard<std::mutex> lk(mu_);
  map_.clear();
  reqs_ = hits_ = 0;
}

CompileCache& CompileCache::global() {
  static CompileCache* c = new CompileCache();
  return *c;
}

}  // namespace torch_tpu::runtime
