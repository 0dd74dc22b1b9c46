// Fallback kernel registered for every aten op without a PrivateUse1 kernel.
#include "lowering/from_aten/fallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "exec/stream.h"
#include "lowering/from_aten/complex.h"

namespace torch_tpu::lowering {
namespace {

std::atomic<bool> g_enabled{[] {
  const char* e = std::getenv("TORCH_TPU_CPU_FALLBACK");
  return e && std::string(e) == "1";
}()};
std::mutex g_mu;
std::map<std::string, int64_t> g_counts;

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (complex::maybe_run(op, stack, /*unknown_ok=*/true)) return;  // complex tpu tensors: real pairs
  const std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(g_enabled.load(), "[", name,
                              "] has no tpu lowering; run it under torch_tpu.cpu_fallback_mode() "
                              "or set TORCH_TPU_CPU_FALLBACK=1 to run it on CPU");
  bool first;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    first = g_counts[name]++ == 0;
  }
  if (first)
    TORCH_WARN("[", name, "] has no tpu lowering; running it on CPU (cpu_fallback_mode). "
               "Counted in torch_tpu.metrics()['fallbacks'].");
  exec::synchronize_all();
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

bool cpu_fallback_enabled() { return g_enabled.load(); }
bool set_cpu_fallback_enabled(bool on) { return g_enabled.exchange(on); }
std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_counts;
}
void reset_fallback_counts() {
  std::lock_guard<std::mutex> lk(g_mu);
  g_counts.clear();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>());
}

}  // namespace torch_tpu::lowering
