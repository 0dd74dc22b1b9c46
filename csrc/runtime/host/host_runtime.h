// Host-runtime entry points beyond the generic Runtime interface: compiling with explicit
// plan options (tests and benchmarks compare fused and unfused executables this way).
#pragma once
#include <memory>

#include "runtime/host/plan.h"
#include "runtime/runtime.h"

namespace torch_tpu::host {

// Like runtime::host_runtime().compile(graph), with `opt` instead of the process
// defaults (config()). The executable is thread-safe, as every host executable.
std::shared_ptr<runtime::Executable> compile_host(const ir::Graph& graph, const PlanOptions& opt);

}  // namespace torch_tpu::host
