// Errors for the torch-free layers: TPU_CHECK throws torch_tpu::Error with a message
// of the house form "[component] what failed; got X, expected Y".
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace torch_tpu {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Raised for an op or dtype we have no lowering/kernel for (maps to NotImplementedError).
struct NotImplemented : Error {
  using Error::Error;
};
// An index out of range where PyTorch CPU raises IndexError (maps to IndexError).
struct IndexError : Error {
  using Error::Error;
};
// The prefix that marks a device-side check's message as an IndexError (Lower::check_index).
constexpr const char* kIndexErrorTag = "\x1fIndexError\x1f";

namespace detail {
inline void cat(std::ostringstream&) {}
template <class T, class... R>
void cat(std::ostringstream& os, const T& v, const R&... r) {
  os << v;
  cat(os, r...);
}
template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  cat(os, a...);
  return os.str();
}
}  // namespace detail
}  // namespace torch_tpu

#define TPU_CHECK(cond, ...)                                              \
  do {                                                                    \
    if (!(cond)) throw ::torch_tpu::Error(::torch_tpu::detail::str(__VA_ARGS__)); \
  } while (0)
#define TPU_UNIMPLEMENTED(...) \
  throw ::torch_tpu::NotImplemented(::torch_tpu::detail::str(__VA_ARGS__))
