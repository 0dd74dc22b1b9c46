// Compile cache implementation.
#include "runtime/compile_cache.h"

#include <algorithm>
#include <cstdlib>

namespace torch_tpu::runtime {

namespace {
std::atomic<uint64_t> g_next_id{1};
}  // namespace

CompileCache::CompileCache() : id_(g_next_id.fetch_add(1)) {}

CompileCache::Front& CompileCache::front(uint64_t key) {
  thread_local Front t[kFront];
  return t[(key ^ (key >> 17)) % kFront];
}

std::shared_ptr<Executable> CompileCache::find(uint64_t key) {
  Front& f = front(key);
  // The usual hit: no lock. `live` is read after the slot matched: an entry evicted meanwhile
  // may still count this hit (a benign race with a concurrent eviction).
  if (f.cache == id_ && f.key == key && f.e->live.load(std::memory_order_acquire)) {
    Entry& e = *f.e;
    e.reads.fetch_add(1, std::memory_order_relaxed);
    uint64_t t = tick_.load(std::memory_order_relaxed);
    if (e.used.load(std::memory_order_relaxed) != t) e.used.store(t, std::memory_order_relaxed);
    return e.exe;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    ++misses_;
    return nullptr;
  }
  Entry& e = *it->second;
  e.reads.fetch_add(1, std::memory_order_relaxed);
  e.used.store(tick_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  f = {id_, key, it->second};
  return e.exe;
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
  const bool crowded = rt.executables_crowded();
  auto e = std::make_shared<Entry>();
  e->exe = exe;
  e->stats.key = key;
  e->stats.compilation_duration_us = us;
  e->stats.name = name ? name : "";
  e->stats.signature = std::move(sig);
  std::lock_guard<std::mutex> lk(mu_);
  e->stats.miss_index = misses_;
  e->used.store(tick_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  auto& slot = map_[key];
  if (slot) drop_locked(*slot);  // two threads compiled the same graph: the later one stays
  slot = std::move(e);
  if (map_.size() > capacity_) evict_locked(capacity_ - capacity_ / 8);
  else if (crowded) evict_locked(map_.size() / 2);
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
  if (map_.size() > capacity_) evict_locked(capacity_ - capacity_ / 8);
}

// Takes `e` out of service: front slots stop serving it, its hits stay counted.
void CompileCache::drop_locked(Entry& e) {
  e.live.store(false, std::memory_order_release);
  dropped_hits_ += e.reads.load(std::memory_order_relaxed) - 1;
}

// Drops the least recently used entries down to `keep`.
void CompileCache::evict_locked(size_t keep) {
  if (map_.size() <= keep) return;
  std::vector<uint64_t> ticks;
  ticks.reserve(map_.size());
  for (auto& [k, e] : map_) ticks.push_back(e->used.load(std::memory_order_relaxed));
  size_t drop = map_.size() - keep;
  std::nth_element(ticks.begin(), ticks.begin() + (drop - 1), ticks.end());
  uint64_t cut = ticks[drop - 1];
  for (auto it = map_.begin(); it != map_.end() && drop > 0;) {
    if (it->second->used.load(std::memory_order_relaxed) <= cut) {
      drop_locked(*it->second);
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
  s.num_cache_hits = dropped_hits_;
  for (auto& [k, e] : map_) {
    s.per_entry_stats.push_back(e->stats);
    s.per_entry_stats.back().read_count = e->reads.load(std::memory_order_relaxed);
    s.num_cache_hits += s.per_entry_stats.back().read_count - 1;
  }
  s.num_cache_reqs = s.num_cache_hits + misses_;
  return s;
}

void CompileCache::clear() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [k, e] : map_) e->live.store(false, std::memory_order_release);
  map_.clear();
  misses_ = dropped_hits_ = 0;
}

CompileCache& CompileCache::global() {
  static CompileCache* c = new CompileCache();
  return *c;
}

}  // namespace torch_tpu::runtime
