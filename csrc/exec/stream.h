// The per-device command stream: commands run in order on one worker thread per device.
// Modes: Strict (asynchronous; the caller returns before the command ran) and Debug (the
// caller waits for its command). An exception inside a command is kept and rethrown, with
// the op named, at the next sync point (synchronize / wait). Thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace torch_tpu::exec {

enum class Mode : int { Fused = 0, Strict = 1, Debug = 2 };  // TorchTPU: DEFER_AND_FUSE, DEFER_NEVER, ..._LAUNCH_BLOCKING

// The mode in effect on this thread: the innermost thread override (eager_mode context,
// inherited by the autograd threads working for this thread) or the global mode
// (set_eager_mode; env TORCH_TPU_LAUNCH_BLOCKING=1 -> Debug at startup).
Mode mode();
void set_global_mode(Mode m);
Mode global_mode();
// Thread override stack (LIFO, like a context manager).
void push_thread_mode(Mode m);
void pop_thread_mode();

// Enqueues `fn` on device `dev`'s stream. In Debug mode waits for it (errors raise here).
// `name` must be a string literal (kept by pointer).
void enqueue(int dev, const char* name, std::function<void()> fn);
// Waits until every command enqueued on `dev` so far has run; rethrows a pending error.
void synchronize(int dev);
void synchronize_all();
// Sequence marks, for events: the number of commands enqueued so far on `dev`, whether
// the stream has completed that many, and waiting for it.
uint64_t mark(int dev);
bool done(int dev, uint64_t mark);
void wait(int dev, uint64_t mark);

// The fused mode's deferred window registers a hook that turns its pending ops into
// commands; synchronize / mark call it first (dev = -1: every device).
using FlushHook = void (*)(int dev);
void set_flush_hook(FlushHook hook);
void flush_deferred(int dev);

// Counters for metrics: commands executed per mode.
struct StreamCounters {
  int64_t strict_ops = 0, debug_ops = 0, fused_ops = 0;
};
StreamCounters counters();

}  // namespace torch_tpu::exec
