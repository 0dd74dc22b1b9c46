// oneDNN scratchpads for the host runtime's primitives (gemm.cpp, conv.cpp): user-managed.
// In oneDNN's default (library) mode a primitive's scratchpad is the creating thread's global
// one: on any other thread it is missing (oneDNN's gemm-based convolutions wrote through a null
// pointer when a primitive made by one thread ran on the stream worker). Our primitives are
// cached process-wide and run on whichever thread executes the plan, so each execution passes
// a scratchpad of the executing thread.
#pragma once
#include <cstdint>
#include <dnnl.hpp>
#include <memory>

namespace torch_tpu::host {

inline dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

// A scratchpad memory for `d` (empty desc: none needed) backed by this thread's buffer, valid
// until the thread's next call.
inline dnnl::memory thread_scratchpad(const dnnl::engine& e, const dnnl::memory::desc& d) {
  thread_local std::unique_ptr<char[]> buf;
  thread_local size_t cap = 0;
  size_t n = d.get_size();
  if (n + 64 > cap) {
    cap = n + 64;
    buf.reset(new char[cap]);
  }
  auto p = reinterpret_cast<std::uintptr_t>(buf.get());
  return dnnl::memory(d, e, reinterpret_cast<void*>((p + 63) / 64 * 64));
}

}  // namespace torch_tpu::host
