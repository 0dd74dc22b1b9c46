// Recompile visibility for the fused window (issue 19): windows that differ only in shapes
// (the same ops, dtypes and wiring, in the same order) are one program structure compiled once
// per shape signature. Past TORCH_TPU_RECOMPILE_WARN signatures of one structure (default 8,
// as for torch.compile graphs; 0: never), a warning names the window inputs whose sizes
// changed, once per structure: on a TPU each signature is a compile of seconds.
#include <c10/util/Exception.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "exec/window_internal.h"

namespace torch_tpu::exec::detail {
namespace {

constexpr size_t kMaxTracked = 4096;  // structures remembered (bounded memory)
constexpr size_t kShown = 4;          // values shown per changing dim

struct History {
  std::vector<ir::Shape> first;                     // parameter shapes of the first signature
  std::unordered_set<uint64_t> signatures;          // graph hashes seen (until warned)
  std::map<std::pair<size_t, size_t>, std::set<int64_t>> changing;  // (input, dim) -> sizes
  bool warned = false;
};

std::mutex g_mu;
std::unordered_map<uint64_t, History> g_history;

int warn_after() {
  static const int n = [] {
    const char* s = std::getenv("TORCH_TPU_RECOMPILE_WARN");
    return s && *s ? std::atoi(s) : 8;
  }();
  return n;
}

// Ops, dtypes and operand wiring, not shapes or attributes (slice limits and broadcast shapes
// change with the sizes too).
uint64_t structure(const ir::Graph& g) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (const ir::Node& n : g.nodes()) {
    mix(n.is_param ? 0xFFFFu : static_cast<uint64_t>(n.op));
    mix(static_cast<uint64_t>(n.dtype));
    for (int o : n.operands) mix(static_cast<uint64_t>(o) + 1);
  }
  for (ir::Value v : g.outputs()) mix(static_cast<uint64_t>(v.id) << 1);
  return h;
}

std::vector<ir::Shape> param_shapes(const ir::Graph& g) {
  std::vector<ir::Shape> s;
  for (const ir::Node& n : g.nodes())
    if (n.is_param) {
      if (s.size() <= static_cast<size_t>(n.param_index)) s.resize(n.param_index + 1);
      s[n.param_index] = n.shape;
    }
  return s;
}

}  // namespace

void note_window_shapes(const ir::Graph& g, uint64_t hash) {
  const int limit = warn_after();
  if (limit <= 0) return;
  std::string message;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    uint64_t key = structure(g);
    auto it = g_history.find(key);
    if (it == g_history.end()) {
      if (g_history.size() >= kMaxTracked) g_history.clear();
      it = g_history.emplace(key, History{}).first;
      it->second.first = param_shapes(g);
    }
    History& h = it->second;
    if (h.warned || !h.signatures.insert(hash).second) return;
    std::vector<ir::Shape> now = param_shapes(g);
    for (size_t i = 0; i < now.size() && i < h.first.size(); ++i)
      if (now[i].size() == h.first[i].size())
        for (size_t d = 0; d < now[i].size(); ++d)
          if (now[i][d] != h.first[i][d]) {
            auto& vals = h.changing[{i, d}];
            vals.insert(h.first[i][d]);
            vals.insert(now[i][d]);
          }
    if (static_cast<int>(h.signatures.size()) <= limit) return;
    h.warned = true;
    h.signatures.clear();
    std::ostringstream os;
    if (h.changing.empty()) {  // same input sizes: slice bounds, constants or input ranks differ
      os << "[fused window] the same deferred graph was compiled " << limit + 1
         << " times (TORCH_TPU_RECOMPILE_WARN=" << limit << ") for inputs of unchanged sizes: the "
         << "windows differ in attributes (slice bounds or indices, constants) or input ranks. Each "
            "is a new compiled program (seconds each on a TPU): pass changing indices or scalars as "
            "tensors, or use torch.compile(backend=\"tpu\").";
      message = os.str();
    } else {
      os << "[fused window] the same deferred graph was compiled for " << limit + 1
         << " different input shapes (TORCH_TPU_RECOMPILE_WARN=" << limit << "), once per shape; changing: ";
      size_t k = 0;
      for (const auto& [id, vals] : h.changing) {
        if (k++ == 6) {
          os << "; and " << h.changing.size() - 6 << " more input dims";
          break;
        }
        if (k > 1) os << "; ";
        os << "input " << id.first << " dim " << id.second << ": " << vals.size() << " values ";
        size_t j = 0;
        for (int64_t v : vals) {
          if (j == kShown) {
            os << ", ...";
            break;
          }
          os << (j++ ? ", " : "") << v;
        }
      }
      os << ". Each is a new compiled program (seconds each on a TPU): pad these dimensions to a few "
            "sizes, or use torch.compile(backend=\"tpu\") with TORCH_TPU_BUCKETS.";
      message = os.str();
    }
  }
  TORCH_WARN(message);
}

}  // namespace torch_tpu::exec::detail
