// Copies between cpu and tpu memory (and tpu to tpu), ordered on the device stream, through
// the runtime (uploads are host operands of a graph; downloads are runtime reads queued on
// the stream). Counts bytes moved for metrics.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>

namespace torch_tpu::lowering::transfer {

// dst.copy_(src) where either side (or both) is on tpu; broadcasting and dtype conversion
// as in Tensor.copy_. cpu->tpu snapshots src before returning; tpu->cpu waits for the stream.
void copy(const at::Tensor& src, const at::Tensor& dst);
// A new contiguous CPU tensor with t's values (waits for the work queued before it).
at::Tensor to_host(const at::Tensor& t);

// The value of a one-element tpu tensor (waits for the stream).
at::Scalar read_scalar(const at::Tensor& t);

struct Counters {
  int64_t h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0;
};
Counters counters();

}  // namespace torch_tpu::lowering::transfer
