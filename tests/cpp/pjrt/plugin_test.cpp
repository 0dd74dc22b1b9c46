// Plugin loading (attributes, bad paths, too-old or short API tables) and client basics.
#include <stdlib.h>

#include <fstream>

#include "pjrt_test_util.h"

namespace torch_tpu::pjrt {
namespace {

using test::expect_error;

TEST(PjrtPlugin, LoadsWithAttributes) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  const Plugin& p = c->plugin();
  EXPECT_EQ(p.api_major(), 0);
  EXPECT_GE(p.api_minor(), 57);
  EXPECT_GE(p.xla_version(), 1);
  std::vector<int64_t> cur = p.stablehlo_current_version(), min = p.stablehlo_minimum_version();
  ASSERT_EQ(cur.size(), 3u);
  ASSERT_EQ(min.size(), 3u);
  EXPECT_LE(min, cur);
  ASSERT_NE(p.attribute("xla_version"), nullptr);
  EXPECT_EQ(p.attribute("no_such_attribute"), nullptr);
  // Loading the same file again returns the same, already initialized plugin.
  EXPECT_EQ(&Plugin::load(p.path()), &p);
  for (const NamedValue& a : p.attributes()) std::printf("  [attr] %s\n", a.to_string().c_str());
}

TEST(PjrtPlugin, ClientDevicesAndMemoryStats) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  EXPECT_FALSE(c->platform_name().empty());
  EXPECT_FALSE(c->platform_version().empty());
  ASSERT_GE(c->devices().size(), 1u);
  for (size_t i = 0; i < c->devices().size(); ++i) {
    EXPECT_EQ(c->devices()[i].index, static_cast<int>(i));
    EXPECT_FALSE(c->devices()[i].kind.empty());
  }
  std::optional<MemoryStats> s = c->memory_stats(0);  // the CPU plugin may not implement it
  if (s) {
    EXPECT_GE(s->bytes_in_use, 0);
  }
  std::printf("  [client] %s %s, %zu devices, kind %s, memory stats %s\n", c->platform_name().c_str(),
              c->platform_version().c_str(), c->devices().size(), c->devices()[0].kind.c_str(),
              s ? "yes" : "unimplemented");
  expect_error([&] { c->memory_stats(99); }, {"[pjrt] memory_stats: bad device index", "99"});
}

TEST(PjrtPlugin, CpuDeviceCountOption) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  if (c->platform_name() != "cpu") GTEST_SKIP() << "cpu_device_count is a CPU plugin option";
  std::shared_ptr<Client> two = Client::create(c->plugin(), {{"cpu_device_count", int64_t{2}}});
  EXPECT_EQ(two->devices().size(), 2u);
}

TEST(PjrtPlugin, MissingAndEmptyPaths) {
  expect_error([] { Plugin::load("/nonexistent/plugin.so"); },
               {"[pjrt] plugin /nonexistent/plugin.so not found", "tools/pjrt-plugin",
                "TORCH_TPU_PJRT_PLUGIN"});
  expect_error([] { Plugin::load(""); }, {"[pjrt] no PJRT plugin", "tools/pjrt-plugin"});
}

TEST(PjrtPlugin, NotASharedLibrary) {
  std::string path = ::testing::TempDir() + "tpu_pjrt_not_a_plugin.so";
  std::ofstream(path) << "not an ELF file\n";
  expect_error([&] { Plugin::load(path); },
               {"[pjrt] loading plugin " + path + " failed", "tools/pjrt-plugin"});
}

TEST(PjrtPlugin, LibraryWithoutGetPjrtApi) {
  // libm is a real shared library with no GetPjrtApi.
  const char* libm = nullptr;
  for (const char* p : {"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                        "/lib64/libm.so.6"})
    if (std::ifstream(p).good()) libm = p;
  if (libm == nullptr) GTEST_SKIP() << "libm.so.6 not found at the usual paths";
  expect_error([&] { Plugin::load(libm); },
               {std::string("[pjrt] ") + libm + " is not a PJRT plugin; got no GetPjrtApi symbol",
                "tools/pjrt-plugin"});
}

TEST(PjrtPlugin, TooOldApi) {
  expect_error([] { Plugin::load(TPU_PJRT_FAKE_OLD); },
               {std::string("[pjrt] plugin ") + TPU_PJRT_FAKE_OLD,
                "unsupported PJRT C API version; got 0.40, expected 0.57 or newer",
                "tools/pjrt-plugin"});
}

TEST(PjrtPlugin, ShortFunctionTable) {
  expect_error([] { Plugin::load(TPU_PJRT_FAKE_SHORT); },
               {std::string("[pjrt] plugin ") + TPU_PJRT_FAKE_SHORT, "(PJRT C API 0.90)",
                "short function table; got 280 bytes, expected at least 632"});
}

TEST(PjrtPlugin, DefaultPathHonoursEnv) {
  const char* old = getenv("TORCH_TPU_PJRT_PLUGIN");
  std::string saved = old ? old : "";
  setenv("TORCH_TPU_PJRT_PLUGIN", "/some/where/libtpu.so", 1);
  EXPECT_EQ(default_plugin_path(), "/some/where/libtpu.so");
  if (old) setenv("TORCH_TPU_PJRT_PLUGIN", saved.c_str(), 1);
  else unsetenv("TORCH_TPU_PJRT_PLUGIN");
}

TEST(PjrtPlugin, RejectsNonXlaFlags) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  const char* old = getenv("XLA_FLAGS");
  std::string saved = old ? old : "";
  setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false -v=3", 1);
  expect_error([&] { Client::create(c->plugin()); },
               {"[pjrt] XLA_FLAGS has an entry XLA would abort on; got \"-v=3\""});
  if (old) setenv("XLA_FLAGS", saved.c_str(), 1);
  else unsetenv("XLA_FLAGS");
}

}  // namespace
}  // namespace torch_tpu::pjrt
