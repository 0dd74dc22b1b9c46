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
  // Single f32 GEMMs run through oneDNN, on the OpenMP thread pool the rest of the host
  // runtime uses; TORCH_TPU_GEMM=openblas selects OpenBLAS sgemm (its own pthread pool, which
  // spins between calls and contends with the OpenMP team: docs/decisions/gemm.md).
  bool gemm_onednn = true;
  // Fused eager: a window of more than this many IR nodes is flushed while recording goes on
  // (TORCH_TPU_FUSED_WINDOW_NODES), so the device runs one part while Python records the next.
  size_t fused_window_nodes = 4096;
};

inline const Config& config() {
  static const Config c = [] {
    Config r;
    if (const char* v = std::getenv("TORCH_TPU_HOST_FUSION"))
      r.host_fusion = !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 ||
                        std::strcmp(v, "off") == 0);
    if (const char* v = std::getenv("TORCH_TPU_GEMM")) r.gemm_onednn = std::strcmp(v, "openblas") != 0;
    if (const char* v = std::getenv("TORCH_TPU_FUSED_WINDOW_NODES")) {
      long n = std::strtol(v, nullptr, 10);
      if (n > 0) r.fused_window_nodes = static_cast<size_t>(n);
    }
    return r;
  }();
  return c;
}

}  // namespace torch_tpu
