// Shared by the PJRT tests: one client per process on the plugin default_plugin_path() finds
// (tests skip with the reason when there is none), host <-> device helpers.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/pjrt/client.h"

namespace torch_tpu::pjrt::test {

// The process-wide client, or nullptr with `why` set.
inline std::shared_ptr<Client> shared_client(std::string* why) {
  static std::string reason;
  static std::shared_ptr<Client> client = [] {
    std::string path = default_plugin_path();
    if (path.empty()) {
      reason = "no PJRT plugin (TORCH_TPU_PJRT_PLUGIN unset, /usr/local/lib/torch_tpu/"
               "pjrt_cpu_plugin.so missing): run tools/pjrt-plugin";
      return std::shared_ptr<Client>();
    }
    return Client::create(Plugin::load(path));  // a broken plugin fails the tests, not skips
  }();
  if (why) *why = reason;
  return client;
}

#define TPU_PJRT_CLIENT_OR_SKIP(var)                               \
  std::string var##_why;                                           \
  std::shared_ptr<::torch_tpu::pjrt::Client> var =                 \
      ::torch_tpu::pjrt::test::shared_client(&var##_why);          \
  if (!var) GTEST_SKIP() << var##_why

template <class T>
DeviceBuffer upload(const Client& c, const std::vector<T>& v, ir::DType t,
                    const std::vector<int64_t>& dims, int device = 0) {
  return c.to_device(v.data(), t, dims, device);
}

template <class T>
std::vector<T> download(const DeviceBuffer& b) {
  std::vector<T> out(b.host_size() / sizeof(T));
  b.to_host(out.data(), out.size() * sizeof(T));
  return out;
}

// Runs f and expects a torch_tpu::Error whose message contains every string in `parts`.
template <class F>
std::string expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const torch_tpu::Error& e) {
    std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    return msg;
  }
  ADD_FAILURE() << "expected a torch_tpu::Error";
  return "";
}

}  // namespace torch_tpu::pjrt::test
