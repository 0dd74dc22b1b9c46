// Compile cache implementation.
#include "runtime/compile_cache.h"

#include <algorithm>
#include <cstdlib>

namespace torch_tpu::runtime {

std::shared_ptr<Executable> CompileCache::find(uint64_t key) {
  std::lock_guard<std::mutex> lk(mu_);
  ++reqs_;
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  ++hits_;
  ++it->second.stats.read_count;
  it->second.used = ++tick_;
  return it->second.exe;
}

namespace {
// "f32[4,16] i64[] -> f32[4,16]": the graph's parameters and outputs, in order.
std::string signature(const ir::Graph& g) {
  std::string s;
  auto add = [&s](ir::DType dt, const ir::Shape& shape) {
    if (!s.empty() && s.back() != ' ') s += ' ';
    s += ir::dtype_name(dt);
    s += ir::shape_str(shape);
  };
  for (const ir::Node& n : g.nodes())
    if (n.is_param) add(n.dtype, n.shape);
  s += s.empty() ? "-> " : " -> ";
  for (ir::Value v : g.outputs()) add(g.dtype(v), g.shape(v));
  return s;
}
}  // namespace

std::shared_ptr<Executable> CompileCache::insert(uint64_t key, const ir::Graph& graph, Runtime& rt,
                                                 const char* name) {
  std::string sig = signature(graph);
  auto t0 = std::chrono::steady_clock::now();
  auto exe = rt.compile(graph);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lk(mu_);
  auto& e = map_[key];
  e.exe = exe;
  e.stats.key = key;
  e.stats.compilation_duration_us = us;
  e.stats.read_count = 1;
  e.stats.name = name ? name : "";
  e.stats.signature = std::move(sig);
  e.stats.miss_index = reqs_ - hits_;
  e.used = ++tick_;
  if (map_.size() > capacity_) evict_locked();
  return exe;
}

size_t CompileCache::default_capacity() {
  const char* s = std::getenv("TORCH_TPU_COMPILE_CACHE_ENTRIES");
  long n = s && *s ? std::atol(s) : 0;
  return n > 0 ? static_cast<size_t>(n) : 4096;
}

void CompileCache::set_capacity(size_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  capacity_ = std::max<size_t>(n, 1);
  if (map_.size() > capacity_) evict_locked();
}

// Drops the least recently used entries down to 7/8 of the capacity.
void CompileCache::evict_locked() {
  size_t keep = capacity_ - capacity_ / 8;
  if (map_.size() <= keep) return;
  std::vector<uint64_t> ticks;
  ticks.reserve(map_.size());
  for (auto& [k, e] : map_) ticks.push_back(e.used);
  size_t drop = map_.size() - keep;
  std::nth_element(ticks.begin(), ticks.begin() + (drop - 1), ticks.end());
  uint64_t cut = ticks[drop - 1];
  for (auto it = map_.begin(); it != map_.end() && drop > 0;) {
    if (it->second.used <= cut) {
      it = map_.erase(it);
      --drop;
    } else {
      ++it;
    }
  }
}

std::shared_ptr<Executable> CompileCache::get(const ir::Graph& graph, Runtime& rt, const char* name) {
  uint64_t key = graph.hash();
  if (auto exe = find(key)) return exe;
  return insert(key, graph, rt, name);
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
