// The eager modes over the device command stream (runtime/stream.h): Strict (asynchronous;
// the caller returns before the command ran), Debug (the caller waits for its command) and
// Fused (ops are recorded into the deferred window, exec/window.h). Thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/stream.h"

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

// Enqueues `fn` on device `dev`'s stream, counted under the current mode. In Debug mode
// waits for it (errors raise here). `name` must be a string literal (kept by pointer).
// `small`: a command that costs less than a handoff to the stream's worker; in Strict mode on
// the host runtime it runs at once on the calling thread when the stream is idle
// (runtime::stream::run_or_enqueue: same order, errors still raised at the next sync point).
void enqueue(int dev, const char* name, std::function<void()> fn, bool small = false);
// enqueue(small=true)'s inline run without a std::function: in Strict mode on the host runtime,
// when `dev`'s stream is idle, runs `fn(ctx)` at once (counted) and returns true; otherwise
// returns false having done nothing, and the caller enqueues the command.
// `for_wait`: the caller waits for the command right away (a fused window flushed at a sync
// point), so it runs inline in any mode: the caller would only sleep until the worker ran it
// (a futex wake and two context switches per sync: half of a small fused step's host time).
bool try_inline(int dev, const char* name, void (*fn)(void*), void* ctx, bool for_wait = false);
// A command the caller waits for right away (a download's read): on the host runtime it runs
// at once on the calling thread when the stream is idle, else it is queued (not counted).
void run_for_wait(int dev, const char* name, std::function<void()> fn);

// The stream's positions and waits (runtime/stream.h), re-exported for the exec users.
using runtime::stream::done;
using runtime::stream::mark;
using runtime::stream::synchronize;
using runtime::stream::synchronize_all;
using runtime::stream::wait;

// Counters for metrics: commands executed per mode.
struct StreamCounters {
  int64_t strict_ops = 0, debug_ops = 0, fused_ops = 0;
};
StreamCounters counters();

}  // namespace torch_tpu::exec
