// DiskCache (runtime/pjrt/disk_cache.h): entries round-trip, another key is a miss, damaged
// files are errors (never a wrong payload), "off" stores nothing. No plugin needed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/pjrt/disk_cache.h"

namespace torch_tpu::pjrt {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const char* name) {
  fs::path d = fs::temp_directory_path() / (std::string("tpu_disk_cache_") + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(DiskCache, StoreThenLoadReturnsThePayload) {
  fs::path d = fresh_dir("roundtrip");
  DiskCache c(d.string());
  DiskCacheStats before = DiskCache::stats();
  EXPECT_FALSE(c.load("key one").has_value());
  std::string payload("bytes\0with a nul", 16);
  c.store("key one", payload);
  std::optional<std::string> got = c.load("key one");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, payload);
  EXPECT_FALSE(c.load("key two").has_value());
  DiskCacheStats after = DiskCache::stats();
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.misses - before.misses, 2);
  EXPECT_EQ(after.writes - before.writes, 1);
  // A second cache over the same directory (another process) sees the entry.
  EXPECT_EQ(*DiskCache(d.string()).load("key one"), payload);
  fs::remove_all(d);
}

TEST(DiskCache, DamagedEntriesAreErrorsNotPayloads) {
  fs::path d = fresh_dir("damaged");
  DiskCache c(d.string());
  c.store("k", std::string(1000, 'x'));
  ASSERT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::path entry = fs::directory_iterator(d)->path();
  for (size_t keep : {size_t(0), size_t(5), size_t(20), size_t(500)}) {
    fs::resize_file(entry, keep);  // truncated at several points
    DiskCacheStats before = DiskCache::stats();
    EXPECT_FALSE(c.load("k").has_value()) << keep;
    EXPECT_EQ(DiskCache::stats().errors - before.errors, 1) << keep;
  }
  c.store("k", "fresh");  // replaced whole
  EXPECT_EQ(*c.load("k"), "fresh");
  std::ofstream(entry, std::ios::app) << "trailing";
  EXPECT_FALSE(c.load("k").has_value());
  fs::remove_all(d);
}

TEST(DiskCache, OffStoresNothing) {
  DiskCache off("");
  EXPECT_FALSE(off.enabled());
  off.store("k", "v");
  EXPECT_FALSE(off.load("k").has_value());
}

TEST(DiskCache, DefaultDirFollowsTheEnvironment) {
  const char* old = std::getenv("TORCH_TPU_CACHE_DIR");
  std::string saved = old ? old : "";
  ::setenv("TORCH_TPU_CACHE_DIR", "/some/root", 1);
  EXPECT_EQ(DiskCache::default_dir(), "/some/root/xla");
  ::setenv("TORCH_TPU_CACHE_DIR", "off", 1);
  EXPECT_EQ(DiskCache::default_dir(), "");
  if (old) ::setenv("TORCH_TPU_CACHE_DIR", saved.c_str(), 1);
  else ::unsetenv("TORCH_TPU_CACHE_DIR");
}

TEST(DiskCache, UnwritableDirectoryCountsAnError) {
  DiskCache c("/proc/definitely/not/writable");
  DiskCacheStats before = DiskCache::stats();
  c.store("k", "v");
  EXPECT_EQ(DiskCache::stats().errors - before.errors, 1);
  EXPECT_FALSE(c.load("k").has_value());
}

}  // namespace
}  // namespace torch_tpu::pjrt
