// The per-device command stream: commands run in order on one worker thread per device.
// Everything that touches device memory (executables, transfers, checks) runs as a command,
// so one stream order holds for all of it; the caching allocator relies on that order to
// reuse freed memory at once. An exception inside a command is kept and rethrown, with the
// command named, at the next wait; later commands are dropped until then. Thread-safe.
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
// Waits like wait() but leaves a pending error for the next wait (for the allocator).
void drain(int dev, uint64_t mark);
// Flushes deferred work and waits for everything queued so far.
void synchronize(int dev);
void synchronize_all();
// Whether the calling thread is a stream worker (it must never wait on a stream).
bool on_worker();

// What wait() raises for a failed command: by default torch_tpu::Error / NotImplemented /
// IndexError; the torch side installs a thrower that raises the matching c10 errors
// (RuntimeError, NotImplementedError, IndexError in Python).
enum class ErrorKind { Runtime, NotImplemented, Index };
using Thrower = void (*)(ErrorKind kind, const std::string& message);
void set_thrower(Thrower t);

}  // namespace torch_tpu::runtime::stream
