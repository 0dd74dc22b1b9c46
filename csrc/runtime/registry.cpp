// Runtime selection: a table of the runtimes this build has, one chosen per process
// (TORCH_TPU_RUNTIME or select() before first use).
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "base/error.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {
namespace {

struct Entry {
  const char* name;
  Runtime& (*get)();
};
// One row per runtime.
const Entry kRuntimes[] = {
    {"host", &host_runtime},
    {"pjrt", &pjrt_runtime},
};

std::mutex g_mu;
std::string g_wanted;                  // select()'s choice before first use
std::atomic<Runtime*> g_current{nullptr};

std::string known() {
  std::string s;
  for (const Entry& e : kRuntimes) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

Runtime& by_name(const std::string& name) {
  for (const Entry& e : kRuntimes)
    if (name == e.name) return e.get();
  TPU_CHECK(false, "[runtime] unknown runtime; got '", name, "', expected one of: ", known(),
            " (env TORCH_TPU_RUNTIME)");
  __builtin_unreachable();
}

}  // namespace

Runtime& current() {
  if (Runtime* r = g_current.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lk(g_mu);
  if (Runtime* r = g_current.load()) return *r;
  std::string name = g_wanted;
  if (name.empty()) {
    const char* e = std::getenv("TORCH_TPU_RUNTIME");
    name = e && *e ? e : "host";
  }
  Runtime& r = by_name(name);
  g_current.store(&r, std::memory_order_release);
  return r;
}

void select(const std::string& name) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (Runtime* r = g_current.load()) {
    TPU_CHECK(name == r->name(), "[runtime] the runtime is chosen at first use; got a request for '", name,
              "', but '", r->name(), "' is already in use");
    return;
  }
  (void)by_name(name);  // validates
  g_wanted = name;
}

std::vector<std::string> available() {
  std::vector<std::string> r;
  for (const Entry& e : kRuntimes) r.emplace_back(e.name);
  return r;
}

}  // namespace torch_tpu::runtime
