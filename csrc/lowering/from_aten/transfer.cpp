// Transfers: cpu->tpu stages a private copy and enqueues the write; tpu->cpu syncs and
// copies out of the host-visible device memory; tpu->tpu is an IR graph (convert + write).
#include "lowering/from_aten/transfer.h"

#include <atomic>

#include "exec/stream.h"
#include "lowering/from_aten/lower.h"

namespace torch_tpu::lowering::transfer {
namespace {
std::atomic<int64_t> g_h2d{0}, g_d2h{0}, g_d2d{0};
}

Counters counters() { return {g_h2d.load(), g_d2h.load(), g_d2d.load()}; }

at::Tensor to_host_alias(const at::Tensor& t) {
  exec::synchronize(t.device().index());
  auto opts = at::TensorOptions().dtype(t.scalar_type()).device(at::kCPU);
  if (t.numel() == 0) return at::empty(t.sizes(), opts);
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), opts);
}

at::Scalar read_scalar(const at::Tensor& t) {
  TORCH_CHECK(t.numel() == 1, "[aten::item] a Tensor with ", t.numel(), " elements cannot be converted to Scalar");
  g_d2h += t.itemsize();
  return to_host_alias(t).item();
}

void copy(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.is_privateuseone() && dst.is_privateuseone()) {
    Lower L("aten::copy_");
    Value v = L.bcast(L.in(src), shape_of(dst));
    L.run_into({v}, {dst});
    g_d2d += dst.nbytes();
    return;
  }
  if (dst.is_privateuseone()) {
    TORCH_CHECK(src.is_cpu(), "[aten::copy_] cannot copy from ", src.device(), " to tpu; expected a cpu source");
    // A private contiguous snapshot in dst's dtype and shape, so src may change right away.
    at::Tensor staged = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
    staged.copy_(src);
    Lower L("aten::copy_");
    Value v = L.in_host(staged);
    L.run_into({v}, {dst});
    g_h2d += staged.nbytes();
    return;
  }
  TORCH_CHECK(dst.is_cpu(), "[aten::copy_] cannot copy from tpu to ", dst.device(), "; expected a cpu destination");
  at::Tensor host = to_host_alias(src);
  dst.copy_(host);
  g_d2h += src.nbytes();
}

}  // namespace torch_tpu::lowering::transfer
