// Plugin loading: dlopen, GetPjrtApi, version checks, PJRT_Plugin_Initialize once per file
// per process, attributes; default_plugin_path().
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <map>
#include <mutex>
#include <sstream>

#include "runtime/pjrt/client.h"
#include "runtime/pjrt/internal.h"

namespace torch_tpu::pjrt {

using namespace impl;  // NOLINT

namespace {

constexpr const char* kInstalledCpuPlugin = "/usr/local/lib/torch_tpu/pjrt_cpu_plugin.so";
constexpr const char* kInstallHint =
    "install the pinned XLA CPU plugin with tools/pjrt-plugin (it goes to "
    "/usr/local/lib/torch_tpu/pjrt_cpu_plugin.so) or set TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so "
    "(libtpu.so, xla_cuda_plugin.so)";

bool is_file(const char* p) {
  struct stat st;
  return p != nullptr && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

std::string version_str(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

NamedValue from_c(const PJRT_NamedValue& v) {
  NamedValue out;
  out.name.assign(v.name, v.name_size);
  switch (v.type) {
    case kString: out.value = std::string(v.string_value, v.value_size); break;
    case kInt64: out.value = v.int64_value; break;
    case kInt64List:
      out.value = std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size);
      break;
    case kFloat: out.value = v.float_value; break;
    case kBool: out.value = v.bool_value; break;
    default: out.value = std::string("(unknown attribute type)"); break;
  }
  return out;
}

}  // namespace

std::string default_plugin_path() {
  if (const char* p = getenv("TORCH_TPU_PJRT_PLUGIN"); p != nullptr && *p != '\0') return p;
  // libtpu as JAX and torch_xla find it without Python: TPU_LIBRARY_PATH. (The libtpu
  // Python package's libtpu.get_library_path() is resolved by the Python layer, which passes
  // it as TORCH_TPU_PJRT_PLUGIN.)
  if (const char* p = getenv("TPU_LIBRARY_PATH"); p != nullptr && *p != '\0') return p;
  if (is_file(kInstalledCpuPlugin)) return kInstalledCpuPlugin;
  return "";
}

std::string NamedValue::to_string() const {
  std::ostringstream os;
  os << name << "=";
  if (auto* s = std::get_if<std::string>(&value)) os << *s;
  if (auto* i = std::get_if<int64_t>(&value)) os << *i;
  if (auto* f = std::get_if<float>(&value)) os << *f;
  if (auto* b = std::get_if<bool>(&value)) os << (*b ? "true" : "false");
  if (auto* l = std::get_if<std::vector<int64_t>>(&value))
    for (size_t k = 0; k < l->size(); ++k) os << (k ? "." : "") << (*l)[k];
  return os.str();
}

const NamedValue* Plugin::attribute(std::string_view name) const {
  for (const NamedValue& a : attributes_)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t Plugin::xla_version() const {
  const NamedValue* a = attribute("xla_version");
  const int64_t* v = a ? std::get_if<int64_t>(&a->value) : nullptr;
  return v ? *v : -1;
}

std::vector<int64_t> Plugin::stablehlo_current_version() const {
  const NamedValue* a = attribute("stablehlo_current_version");
  const auto* v = a ? std::get_if<std::vector<int64_t>>(&a->value) : nullptr;
  return v ? *v : std::vector<int64_t>{};
}

std::vector<int64_t> Plugin::stablehlo_minimum_version() const {
  const NamedValue* a = attribute("stablehlo_minimum_version");
  const auto* v = a ? std::get_if<std::vector<int64_t>>(&a->value) : nullptr;
  return v ? *v : std::vector<int64_t>{};
}

struct PluginLoader {
  // Opens the library and checks the table; nothing is initialized yet.
  static std::unique_ptr<Plugin> open(const std::string& path) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      throw Error(str("[pjrt] loading plugin ", path, " failed; got \"", e ? e : "?",
                      "\", expected a PJRT C API plugin shared library: ", kInstallHint));
    }
    using GetApi = const PJRT_Api* (*)();
    auto get = reinterpret_cast<GetApi>(dlsym(lib, "GetPjrtApi"));
    if (get == nullptr) {
      dlclose(lib);  // not a plugin: nothing of it was used
      throw Error(str("[pjrt] ", path, " is not a PJRT plugin; got no GetPjrtApi symbol, "
                      "expected a shared library exporting GetPjrtApi: ", kInstallHint));
    }
    const PJRT_Api* api = get();
    TPU_CHECK(api != nullptr, "[pjrt] plugin ", path, " returned no API table; got "
              "GetPjrtApi() == NULL, expected a PJRT_Api: ", kInstallHint);
    auto p = std::unique_ptr<Plugin>(new Plugin());
    p->path_ = path;
    p->major_ = api->pjrt_api_version.major_version;
    p->minor_ = api->pjrt_api_version.minor_version;
    std::string v = version_str(p->major_, p->minor_);
    TPU_CHECK(p->major_ == 0 && p->minor_ >= kMinMinorVersion, "[pjrt] plugin ", path,
              " has an unsupported PJRT C API version; got ", v, ", expected 0.",
              kMinMinorVersion, " or newer (major 0): ", kInstallHint);
    TPU_CHECK(api->struct_size >= kMinApiStructSize, "[pjrt] plugin ", path, " (PJRT C API ", v,
              ") has a short function table; got ", api->struct_size, " bytes, expected at least ",
              kMinApiStructSize, ": ", kInstallHint);
    p->api_ = api;
    return p;
  }

  static void initialize(Plugin& p) {
    std::string what = "initializing plugin " + p.path_ + " (PJRT C API " +
                       version_str(p.major_, p.minor_) + ")";
    auto init = make_args<PJRT_Plugin_Initialize_Args>();
    check(p.api_, call<Slot::Plugin_Initialize>(p.api_, &init), what);
    auto attrs = make_args<PJRT_Plugin_Attributes_Args>();
    check(p.api_, call<Slot::Plugin_Attributes>(p.api_, &attrs), "reading attributes of " + p.path_);
    for (size_t i = 0; i < attrs.num_attributes; ++i)
      p.attributes_.push_back(from_c(attrs.attributes[i]));
  }
};

const Plugin& Plugin::load(const std::string& path) {
  TPU_CHECK(!path.empty(), "[pjrt] no PJRT plugin; got an empty path (TORCH_TPU_PJRT_PLUGIN unset "
            "and no ", kInstalledCpuPlugin, "), expected a plugin .so: ", kInstallHint);
  char real[PATH_MAX];
  TPU_CHECK(realpath(path.c_str(), real) != nullptr && is_file(real), "[pjrt] plugin ", path,
            " not found; got no such file, expected a PJRT plugin .so: ", kInstallHint);
  // Loaded plugins and initialization failures, by realpath: Initialize runs once per file.
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, Plugin*>();     // never freed
  static auto* failed = new std::map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded->find(real); it != loaded->end()) return *it->second;
  if (auto it = failed->find(real); it != failed->end()) throw Error(it->second);
  setenv("TF_CPP_MIN_LOG_LEVEL", "3", /*overwrite=*/0);  // XLA's logging: errors only
  std::unique_ptr<Plugin> p = PluginLoader::open(path);
  try {
    PluginLoader::initialize(*p);
  } catch (const Error& e) {
    failed->emplace(real, e.what());
    throw;
  }
  Plugin* raw = p.release();  // process lifetime, like the library
  loaded->emplace(real, raw);
  return *raw;
}

}  // namespace torch_tpu::pjrt
