// The persistent executable cache of the pjrt runtime: compiled executables, serialized by
// the plugin, kept on disk so a new process skips XLA's compile (seconds per graph on a TPU).
//
// An entry is one file `<dir>/<16 hex digits>.xla` holding the entry's whole key (the
// StableHLO text, the compile-option bytes and the plugin's identity: platform name and
// version, XLA version, PJRT API version, device kind) and the plugin's bytes. A load
// compares the whole key, so a hash collision is a miss, never a wrong executable. Writes go
// to a temporary file renamed into place (atomic for concurrent processes). Nothing here
// throws: an unreadable or unwritable directory counts an error and the caller compiles.
//
// The directory: `$TORCH_TPU_CACHE_DIR/xla` (default `~/.cache/torch_tpu/xla`);
// `TORCH_TPU_CACHE_DIR=off` turns it off, as for the AOTAutograd cache next to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace torch_tpu::pjrt {

struct DiskCacheStats {
  int64_t hits = 0;    // entries loaded (the caller then deserializes them)
  int64_t misses = 0;  // no entry with this key
  int64_t writes = 0;  // entries written
  int64_t errors = 0;  // unreadable/unwritable files, bad entries, failed deserializations
};

class DiskCache {
 public:
  // dir == "": off (every load misses, stores do nothing).
  explicit DiskCache(std::string dir);
  // `$TORCH_TPU_CACHE_DIR/xla`, `$HOME/.cache/torch_tpu/xla`, or "" (off, or no home).
  static std::string default_dir();

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  // The stored payload of the entry whose key equals `key`; nullopt on a miss.
  std::optional<std::string> load(const std::string& key) const;
  // Writes (or replaces) the entry. Thread- and process-safe.
  void store(const std::string& key, std::string_view payload) const;
  // Counts an entry whose payload the plugin refused (the caller recompiles and stores).
  static void count_error();

  // Totals of every DiskCache in this process.
  static DiskCacheStats stats();

 private:
  std::string path_for(const std::string& key) const;
  std::string dir_;
};

}  // namespace torch_tpu::pjrt
