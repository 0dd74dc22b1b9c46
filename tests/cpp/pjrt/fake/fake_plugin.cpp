// A fake PJRT plugin for the loader's error paths: GetPjrtApi returns a table with API
// version 0.FAKE_MINOR and FAKE_SLOTS function slots, all NULL (the loader must refuse it
// before calling anything).
#include <cstddef>
#include <cstdint>

namespace {
struct FakeApi {
  size_t struct_size;
  void* extension_start;
  size_t version_struct_size;
  void* version_extension_start;
  int major_version;
  int minor_version;
  void* slots[FAKE_SLOTS];
};
FakeApi api = {40 + 8 * FAKE_SLOTS, nullptr, 24, nullptr, 0, FAKE_MINOR, {}};
}  // namespace

extern "C" __attribute__((visibility("default"))) const void* GetPjrtApi() { return &api; }
