// The fused mode's deferred window (TorchTPU's DEFER_AND_FUSE): ops are recorded into one
// IR graph per device instead of running. At a sync point, a size limit, or an op that cannot
// be deferred, the window is flushed: the graph gets as outputs only the values whose tensors
// are still alive, is compiled once (compile cache, shared with every mode) and queued on the
// device stream as one command. The host runtime fuses its elementwise clusters.
// Thread-safe (one mutex per device window). Sees ATen (exec glue).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::exec {

// One lowered op: its small graph (param i is bound by binds[i]) and where its outputs go.
struct OpRecord {
  struct Bind {
    at::Tensor tensor;  // a tpu tensor, or a CPU tensor the command reads (staging, rng state)
    uint64_t bits = 0;  // scalar value in `dtype` when tensor is undefined
    ir::DType dtype;
    uint64_t rng_n = 0;  // > 0: `tensor` is a Philox state reserving rng_n counters from `gen`
    std::optional<at::Generator> gen;
  };
  const char* name;
  const ir::Graph* graph;
  std::vector<Bind> binds;
  std::vector<at::Tensor> dsts;  // graph output k is written to dsts[k]
  // Range-check flags (0-d bool tpu tensors among dsts) and their messages: after the window
  // holding this op runs, a command raises check_msgs[k] when check_flags[k] is set (at the
  // next sync point). Recorded with the op, under the window's lock, so that they travel with
  // the window that computes them even when another thread (or the size limit) flushes it.
  std::vector<at::Tensor> check_flags;
  std::vector<std::string> check_msgs;
};

// Records `r` into device `dev`'s window (may flush first when views alias unsafely).
void defer(int dev, OpRecord& r);
// Flushes device `dev`'s window (dev = -1: all); a no-op when it is empty.
void flush(int dev);
// flush(), by a caller about to wait for the window (a download, synchronize): on the host
// runtime an idle stream runs it on the calling thread instead of waking the worker.
void flush_for_wait(int dev);
bool has_pending(int dev);
// Whether device `dev`'s window is capturing a torch.compile graph (capture.cpp).
bool capturing(int dev);
// True when device `dev`'s pending window reads or writes t's storage, or is a capture: work
// queued on the stream now would run before the window, out of recording order.
bool window_uses(int dev, const at::Tensor& t);

struct WindowStats {
  int64_t deferred_ops = 0, flushes = 0, skipped_outputs = 0;
  std::string last_flush_reason;
};
WindowStats window_stats();
// The pending graph of `dev` as StableHLO text, with the given tensors' values as outputs
// (all live values when `tensors` is empty).
std::string pending_stablehlo(int dev, const std::vector<at::Tensor>& tensors);
// Number of ops recorded and nodes in the pending window.
std::pair<int64_t, int64_t> pending_size(int dev);
// The pending graph itself (for tests: cluster counts). Copies.
ir::Graph pending_graph(int dev, const std::vector<at::Tensor>& tensors);

// ---- Capture (torch.compile): one recording replayed without per-op dispatch ------------
// begin_capture flushes `dev`'s window and records the ops that follow (in fused mode) as one
// program whose parameters are `inputs` (tpu tensors). end_capture runs the recording for
// this call and returns the program, or null with `why` set when it cannot be replayed (a
// sync point inside, outputs not computed by the recording, reads outside the inputs).
struct Program;
void begin_capture(int dev, const std::vector<at::Tensor>& inputs);
std::shared_ptr<Program> end_capture(int dev, const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& outputs, std::string* why);
// Runs `p` on new inputs (same sizes, strides, offsets and dtypes as the captured ones) and
// returns new output tensors. Asynchronous, like every tpu op.
std::vector<at::Tensor> run_program(const Program& p, const std::vector<at::Tensor>& inputs);
bool program_matches(const Program& p, const std::vector<at::Tensor>& inputs);
std::string program_stablehlo(const Program& p);
int64_t program_nodes(const Program& p);

}  // namespace torch_tpu::exec
