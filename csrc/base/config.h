// Process configuration read once from the environment (the only place env vars are
// read in the torch-free layers). Thread-safe: the first call initializes, later calls
// return the same object.
#pragma once
#include <cstdlib>
#include <cstring>

namespace torch_tpu {

struct Config {
  // TORCH_TPU_HOST_FUSION=0 turns off fused loops in the host runtime (each node then runs
  // as its own kernel). Default on. Compile options can override it per executable.
  bool host_fusion = true;
};

inline const Config& config() {
  static const Config c = [] {
    Config r;
    if (const char* v = std::getenv("TORCH_TPU_HOST_FUSION"))
      r.host_fusion = !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 ||
                        std::strcmp(v, "off") == 0);
    return r;
  }();
  return c;
}

}  // namespace torch_tpu
