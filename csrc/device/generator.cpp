// The "tpu" random generator: counter-based Philox state {uint64 seed, int64 offset}
// (16 bytes, the layout DTensor's OffsetBasedRNGTracker reads), one lazily created default
// generator per device, and philox_reserve (how random ops take counters).
#include <ATen/Functions.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <array>
#include <mutex>

#include "device/device.h"

namespace torch_tpu::device {
namespace {

constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // c10::default_rng_seed_val, as CPU/CUDA
constexpr size_t kStateBytes = 16;

class PhiloxGenerator final : public c10::GeneratorImpl {
 public:
  explicit PhiloxGenerator(int dev, uint64_t seed = kDefaultSeed)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(dev)),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        seed_(seed) {}

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  void set_offset(uint64_t offset) override {
    TORCH_CHECK(offset % 4 == 0, "[generator] offset must be a multiple of 4; got ", offset);
    offset_ = offset;
  }
  uint64_t get_offset() const override { return offset_; }

  // A CPU uint8 tensor of 16 bytes: [0:8] seed (uint64), [8:16] offset (int64), native order.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor t = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
    auto* p = static_cast<uint8_t*>(t.data_ptr());
    int64_t off = static_cast<int64_t>(offset_);
    std::memcpy(p, &seed_, 8);
    std::memcpy(p + 8, &off, 8);
    return t.getIntrusivePtr();
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                "[generator] set_state needs a uint8 tensor; got ", state.dtype());
    TORCH_CHECK(state.numel() == static_cast<int64_t>(kStateBytes), "[generator] set_state got ",
                state.numel(), " bytes, expected ", kStateBytes, " (uint64 seed, int64 offset)");
    TORCH_CHECK(state.device().is_cpu() && state.is_contiguous(),
                "[generator] set_state needs a contiguous CPU tensor; got device ", state.device());
    const auto* p = static_cast<const uint8_t*>(state.data());
    int64_t off = 0;
    std::memcpy(&seed_, p, 8);
    std::memcpy(&off, p + 8, 8);
    TORCH_CHECK(off >= 0, "[generator] set_state got a negative offset ", off);
    offset_ = static_cast<uint64_t>(off);
  }

  // Takes counters [offset, offset + n), advancing by n rounded up to a multiple of 4.
  std::pair<uint64_t, uint64_t> reserve(uint64_t n) {
    uint64_t off = offset_;
    offset_ += (n + 3) / 4 * 4;
    return {seed_, off};
  }

  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  PhiloxGenerator* clone_impl() const override {
    auto* g = new PhiloxGenerator(device().index(), seed_);
    g->offset_ = offset_;
    return g;
  }

  uint64_t seed_;
  uint64_t offset_ = 0;
};

struct DefaultGenerators {
  std::once_flag once[16];
  std::array<at::Generator, 16> gens;
};
DefaultGenerators& defaults() {
  static auto* d = new DefaultGenerators();  // leaked: used until process exit
  return *d;
}

}  // namespace

const at::Generator& default_generator(int dev) {
  if (dev < 0) dev = current_device();
  check_index("generator", dev);
  auto& d = defaults();
  std::call_once(d.once[dev], [&] { d.gens[dev] = at::make_generator<PhiloxGenerator>(dev); });
  return d.gens[dev];
}

at::Generator new_generator(int dev) {
  if (dev < 0) dev = current_device();
  return at::make_generator<PhiloxGenerator>(dev);
}

std::pair<uint64_t, uint64_t> philox_reserve(const std::optional<at::Generator>& gen, int dev, uint64_t n) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(dev);
  TORCH_CHECK(g.device().type() == c10::DeviceType::PrivateUse1,
              "[generator] expected a tpu generator; got a generator for ", g.device());
  std::lock_guard<std::mutex> lk(g.mutex());
  return at::check_generator<PhiloxGenerator>(g)->reserve(n);
}

}  // namespace torch_tpu::device
