// One launch record: an executable run with its operands, built in this one place by every
// path that runs a graph (strict/debug ops, the fast path, the fused window, torch.compile
// replays) and queued on the device stream. Sees ATen (exec glue).
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/views.h"
#include "runtime/runtime.h"

namespace torch_tpu::exec {

// The executable for graph `g` (hash `key`) from the compile cache shared by every mode,
// compiled by the process's runtime on a miss. Throws torch_tpu::Error / NotImplemented.
std::shared_ptr<runtime::Executable> compiled(uint64_t key, const ir::Graph& g, const char* name = nullptr);

// The runtime view of storage `st` seen as `m` (no buffer for an empty view). `write`
// materializes a copy-on-write storage first; a read leaves it shared.
runtime::View device_view(const c10::Storage& st, const Meta& m, bool write);

// Operands are added in parameter order (inputs) and output order (outputs). A tpu operand
// names its storage's runtime Buffer and the view (sizes, strides, offset); a CPU operand
// (staged uploads, rng states) is a host operand kept alive by the launch until it ran.
// tpu storages are NOT kept alive: once submitted, a storage may be freed at once, because
// the caching allocator reuses memory in stream order (device/allocator.cpp).
class Launch {
 public:
  Launch(const char* name, std::shared_ptr<runtime::Executable> exe);
  void read(const at::Tensor& t, ir::DType dt);
  void read(const c10::Storage& st, const Meta& m);
  void scalar(uint64_t bits, ir::DType dt);
  void write(const at::Tensor& t, ir::DType dt);
  void write(const c10::Storage& st, const Meta& m);
  // Queues the run on `dev`'s stream under the current eager mode (Debug waits for it).
  // `for_wait`: the caller waits for it next (a window flushed at a sync point), so on the
  // host runtime an idle stream runs it on the calling thread (exec::try_inline).
  void submit(int dev, bool for_wait = false);

  Launch(Launch&&) = default;
  ~Launch();

  struct Payload;

 private:
  struct Recycle {
    void operator()(Payload* p) const;
  };
  // Reused per thread after an inline run (its vectors and views keep their capacity), so a
  // small strict launch allocates nothing; a queued one is owned by its command.
  std::unique_ptr<Payload, Recycle> p_;
};

// Queues a command on `dev`'s stream that reads the 0-d bool tpu tensors `flags` (written by
// earlier commands) and raises messages[k] for the first set flag: the error surfaces at the
// next sync point, naming the op, as any asynchronous error.
void submit_checks(int dev, const char* name, const std::vector<at::Tensor>& flags, std::vector<std::string> messages);

}  // namespace torch_tpu::exec
