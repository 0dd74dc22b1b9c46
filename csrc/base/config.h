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
  // Which library kernel runs an f32 GEMM (TORCH_TPU_GEMM): by default (`tune`) each shape
  // and layout times oneDNN's matmul primitive against oneDNN's sgemm on first use and keeps
  // the faster (the choice, so the last bits, can differ between processes); `fixed`: the
  // primitive on AVX-512 CPUs and sgemm elsewhere, the same in every process; `matmul` or
  // `sgemm` forces one; `openblas` sends a single f32 GEMM to OpenBLAS sgemm (its own pthread
  // pool, which spins between calls and contends with ours: docs/decisions/gemm.md).
  enum class Gemm : unsigned char { Tune, Fixed, Matmul, Sgemm, OpenBlas };
  Gemm gemm = Gemm::Tune;
  // One f32 GEMM of at least this many multiply-adds runs whole on the OpenMP team instead of
  // split across the host pool (TORCH_TPU_GEMM_TEAM_MACS; docs/decisions/gemm.md).
  long long gemm_team_macs = 1LL << 29;
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
    if (const char* v = std::getenv("TORCH_TPU_GEMM")) {
      if (std::strcmp(v, "openblas") == 0) r.gemm = Config::Gemm::OpenBlas;
      else if (std::strcmp(v, "matmul") == 0 || std::strcmp(v, "onednn") == 0) r.gemm = Config::Gemm::Matmul;
      else if (std::strcmp(v, "sgemm") == 0) r.gemm = Config::Gemm::Sgemm;
      else if (std::strcmp(v, "fixed") == 0) r.gemm = Config::Gemm::Fixed;
    }
    if (const char* v = std::getenv("TORCH_TPU_GEMM_TEAM_MACS")) {
      long long n = std::strtoll(v, nullptr, 10);
      if (n > 0) r.gemm_team_macs = n;
    }
    if (const char* v = std::getenv("TORCH_TPU_FUSED_WINDOW_NODES")) {
      long n = std::strtol(v, nullptr, 10);
      if (n > 0) r.fused_window_nodes = static_cast<size_t>(n);
    }
    return r;
  }();
  return c;
}

}  // namespace torch_tpu
