// complex tensors on tpu as pairs of reals (complex.cpp).
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_tpu::lowering::complex {

// Runs `op` on the stack when one of its arguments is a complex tpu tensor (the ops complex.cpp
// implements, else NotImplementedError naming the op); false when no argument is complex.
// `unknown_ok`: an op complex.cpp does not implement returns false instead of raising (the
// CPU fallback's call: cpu_fallback_mode may still run it).
bool maybe_run(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool unknown_ok = false);

// The value of a complex tensor (tpu or not) as real pairs [..., 2]: a view, or a copy with the
// imaginary parts negated when it carries the conj bit.
at::Tensor real_pairs(const at::Tensor& t);

// The complex op `base` (its functional name, e.g. "index_select" for index_select_) of the
// index / gather / scatter / cat / stack / pad / flip / roll / repeat / *_scatter families, div,
// abs and angle, computed on real pairs (complex_shape.cpp); undefined when it is none of them.
at::Tensor shape_op(const std::string& base, const std::string& overload, c10::ArrayRef<c10::IValue> args);

// Copies between complex tensors (either side tpu) as their real pairs; false when neither
// is complex.
bool copy(const at::Tensor& src, const at::Tensor& dst);

}  // namespace torch_tpu::lowering::complex
