// complex tensors on tpu as pairs of reals (complex.cpp).
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_tpu::lowering::complex {

// Runs `op` on the stack when one of its arguments is a complex tpu tensor (the ops complex.cpp
// implements, else NotImplementedError naming the op); false when no argument is complex.
bool maybe_run(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Copies between complex tensors (either side tpu) as their real pairs; false when neither
// is complex.
bool copy(const at::Tensor& src, const at::Tensor& dst);

}  // namespace torch_tpu::lowering::complex
