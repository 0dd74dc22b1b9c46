// The pjrt runtime's persistent executable cache (disk_cache.h).
#include "runtime/pjrt/disk_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace torch_tpu::pjrt {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'X', 'L', 'A', '0', '1'};

std::atomic<int64_t> g_hits{0}, g_misses{0}, g_writes{0}, g_errors{0}, g_seq{0};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void put_u64(std::string& out, uint64_t x) { out.append(reinterpret_cast<const char*>(&x), sizeof x); }

bool get_u64(std::istream& in, uint64_t& x) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&x), sizeof x));
}

}  // namespace

DiskCache::DiskCache(std::string dir) : dir_(std::move(dir)) {}

std::string DiskCache::default_dir() {
  const char* root = std::getenv("TORCH_TPU_CACHE_DIR");
  if (root && *root) {
    std::string r = root;
    if (r == "off" || r == "0") return "";
    return r + "/xla";
  }
  const char* home = std::getenv("HOME");
  if (!home || !*home) return "";
  return std::string(home) + "/.cache/torch_tpu/xla";
}

std::string DiskCache::path_for(const std::string& key) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.xla", static_cast<unsigned long long>(fnv1a(key)));
  return dir_ + "/" + name;
}

std::optional<std::string> DiskCache::load(const std::string& key) const {
  if (!enabled()) return std::nullopt;
  std::ifstream in(path_for(key), std::ios::binary);
  if (!in) {
    ++g_misses;
    return std::nullopt;
  }
  char magic[sizeof kMagic];
  uint64_t key_size = 0, payload_size = 0;
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0 || !get_u64(in, key_size)) {
    ++g_errors;
    return std::nullopt;
  }
  if (key_size != key.size()) {  // another key with the same hash: a miss
    ++g_misses;
    return std::nullopt;
  }
  std::string stored(key_size, '\0');
  if (!in.read(stored.data(), static_cast<std::streamsize>(key_size)) || !get_u64(in, payload_size)) {
    ++g_errors;
    return std::nullopt;
  }
  if (stored != key) {
    ++g_misses;
    return std::nullopt;
  }
  std::string payload(payload_size, '\0');
  if (!in.read(payload.data(), static_cast<std::streamsize>(payload_size)) || in.peek() != EOF) {
    ++g_errors;  // truncated or trailing bytes: not an entry we wrote
    return std::nullopt;
  }
  ++g_hits;
  return payload;
}

void DiskCache::store(const std::string& key, std::string_view payload) const {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  std::string path = path_for(key);
  std::ostringstream tmp_name;
  tmp_name << path << ".tmp." << ::getpid() << "." << g_seq++;
  std::string tmp = tmp_name.str();
  std::string head(kMagic, sizeof kMagic);
  put_u64(head, key.size());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      out.write(head.data(), static_cast<std::streamsize>(head.size()));
      out.write(key.data(), static_cast<std::streamsize>(key.size()));
      std::string n;
      put_u64(n, payload.size());
      out.write(n.data(), static_cast<std::streamsize>(n.size()));
      out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    }
    if (!out || !out.flush()) {
      ++g_errors;
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ++g_errors;
    std::filesystem::remove(tmp, ec);
    return;
  }
  ++g_writes;
}

void DiskCache::count_error() { ++g_errors; }

DiskCacheStats DiskCache::stats() {
  return DiskCacheStats{g_hits.load(), g_misses.load(), g_writes.load(), g_errors.load()};
}

}  // namespace torch_tpu::pjrt
