// Host-runtime entry points beyond the generic Runtime interface: compiling with explicit
// plan options (tests and benchmarks compare fused and unfused executables this way), and
// the host's Buffer handles, which are the memory's address (for this runtime's own
// kernels and tests only; nothing above csrc/runtime may use them).
#pragma once
#include <memory>

#include "runtime/host/plan.h"
#include "runtime/runtime.h"

namespace torch_tpu::host {

// Like runtime::host_runtime().compile(graph), with `opt` instead of the process
// defaults (config()). The executable is thread-safe, as every host executable.
std::shared_ptr<runtime::Executable> compile_host(const ir::Graph& graph, const PlanOptions& opt);

// A host address as a Buffer handle of the host runtime (tests wrap their own memory).
inline runtime::Buffer* as_buffer(void* p) { return static_cast<runtime::Buffer*>(p); }
// The address of a view's element [0, ..., 0] (host operand or buffer + offset); null when
// the view has neither.
void* address(const runtime::View& v);

}  // namespace torch_tpu::host
