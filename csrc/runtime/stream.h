// The per-device command stream: commands run in order on one worker thread per device.
// Everything that touches device memory (executables, transfers, checks) runs as a command,
// so one stream order holds for all of it; the caching allocator relies on that order to
// reuse freed memory at once. An exception inside a command is kept and rethrown, with the
// command named, at the next wait; the failed command's outputs are unspecified, and later
// commands still run (work that does not read those outputs stays correct). Thread-safe.
// Torch-free: the eager modes that decide when to wait live in exec/stream.h.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace torch_tpu::runtime::stream {

constexpr int kMaxDevices = 16;

// Queues `fn` on device `dev`'s stream and returns at once. `name` must be a string literal
// (kept by pointer); it prefixes the error message of a failing command.
void enqueue(int dev, const char* name, std::function<void()> fn);
// Like enqueue(), but when `dev`'s stream is idle (nothing queued, nothing running, no other
// thread running a command inline) runs `fn` at once on the calling thread, as the stream's
// next command: the order is the same as if it had been queued, and a failure is kept, named,
// for the next wait exactly as a queued command's. For small commands, where handing one to the
// worker thread costs more than running it. `fn` must not wait on a stream (on_worker() is
// true while it runs); commands it queues run after it.
void run_or_enqueue(int dev, const char* name, std::function<void()> fn);
// run_or_enqueue()'s inline half: runs `fn(ctx)` as above and returns true when the stream is
// idle; else returns false having run and queued nothing (the caller enqueues the command).
// Lets a caller skip building a std::function (a heap allocation) for the usual inline run.
bool try_run_inline(int dev, const char* name, void (*fn)(void*), void* ctx);

// Work recorded above the stream and not yet queued (the fused eager window) registers a hook
// that queues it; mark() and synchronize() call it first (dev = -1: every device).
using FlushHook = void (*)(int dev);
void set_flush_hook(FlushHook hook);
void flush_deferred(int dev);

// Positions: the number of commands queued on `dev` so far (after flushing deferred work),
// whether the stream has run that many, and waiting for it (rethrows a pending error).
uint64_t mark(int dev);
// The same position without flushing deferred work (safe inside any lock, e.g. a deleter).
uint64_t queued(int dev);
bool done(int dev, uint64_t mark);
void wait(int dev, uint64_t mark);
// wait() for the launch-blocking (debug) mode: the error is raised by the op's own call, so
// its message does not carry wait()'s "raised at a sync point" hint.
void wait_at_call(int dev, uint64_t mark);
// Waits like wait() but leaves a pending error for the next wait (for the allocator).
void drain(int dev, uint64_t mark);
// Flushes deferred work and waits for everything queued so far.
void synchronize(int dev);
void synchronize_all();
// Whether the calling thread is a stream worker (it must never wait on a stream).
bool on_worker();
// Whether the calling thread is a stream worker whose user threads are not waiting on its
// stream: they are running (dispatching the next ops) beside it and need a core of their own
// (host::parallel_for leaves them one).
bool worker_beside_running_user();

// What wait() raises for a failed command: by default torch_tpu::Error / NotImplemented /
// IndexError; the torch side installs a thrower that raises the matching c10 errors
// (RuntimeError, NotImplementedError, IndexError in Python).
enum class ErrorKind { Runtime, NotImplemented, Index };
using Thrower = void (*)(ErrorKind kind, const std::string& message);
void set_thrower(Thrower t);

// A forked child of a process whose streams had started has no worker threads (fork copies
// only the calling thread): enqueue, mark, wait and synchronize then raise at once instead of
// hanging ("use the 'spawn' start method"); queued/done/drain are no-ops there, so storages
// inherited from the parent can still be freed. True in such a child.
bool in_bad_fork();

// Nanoseconds device `dev`'s worker has spent running commands since its stream started
// (0 for a stream not started); for torch.tpu.utilization.
int64_t busy_ns(int dev);

// Observes commands while a profiler runs. `on_enqueue` runs on the queuing thread inside
// enqueue() and returns a tag kept with the command; `on_run` runs on the worker after the
// command, with its start and end in nanoseconds since the Unix epoch (system_clock). Both
// must be thread-safe and must not touch the stream. The pointer is read at each enqueue and
// must stay valid for the life of the process (a static); nullptr removes it. A command
// queued while none was set is not reported.
struct Observer {
  uint64_t (*on_enqueue)(int dev, const char* name);
  void (*on_run)(int dev, const char* name, uint64_t tag, int64_t start_ns, int64_t end_ns);
};
void set_observer(const Observer* observer);

}  // namespace torch_tpu::runtime::stream
