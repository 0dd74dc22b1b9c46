// The fallback for ATen ops without a tpu lowering: NotImplementedError naming the op, or,
// when enabled (torch_tpu.cpu_fallback_mode / env TORCH_TPU_CPU_FALLBACK=1), the op runs on
// CPU with a once-per-op warning and a per-op counter.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace torch_tpu::lowering {
bool cpu_fallback_enabled();
bool set_cpu_fallback_enabled(bool on);  // returns the previous value
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();
}  // namespace torch_tpu::lowering
