// Foreach ops (aten::_foreach_*: optimizers, clip_grad_norm_, GradScaler call them on whole
// tensor lists): one program for a run of consecutive calls instead of one per op and tensor
// shape. PyTorch's slow path (the CompositeExplicitAutograd kernel: the per-tensor op on each
// element) runs with this thread in the fused mode, so each element's graph is inlined into
// the device's deferred window (exec/window.h). The window is left open: the next foreach call
// joins it (an AdamW step is one graph), and the first op that is not deferred flushes it
// before its own launch (Lower::launch, fast::replay, uploads), as does any sync point or
// compiled-graph run. Each step builds the same graph, so the compile cache replays one
// program. In the debug mode (each op completes before returning) and the fused mode (ops
// defer anyway) the slow path runs as it is.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <string>

#include "exec/stream.h"

namespace torch_tpu::lowering {
namespace {

void foreach_deferred(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (exec::mode() != exec::Mode::Strict) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
    return;
  }
  exec::push_thread_mode(exec::Mode::Fused);
  try {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
  } catch (...) {
    exec::pop_thread_mode();
    throw;
  }
  exec::pop_thread_mode();
}

}  // namespace

// Every aten::_foreach_* overload whose slow path PyTorch registers (all of them today), so a
// foreach op added by a later PyTorch is covered without a list here.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  const std::string prefix = "aten::_foreach_";
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.compare(0, prefix.size(), prefix) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) continue;
    std::string op = name.name.substr(6);  // without "aten::"
    if (!name.overload_name.empty()) op += "." + name.overload_name;
    m.impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_deferred>());
  }
}

}  // namespace torch_tpu::lowering
