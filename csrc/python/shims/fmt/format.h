// Kineto's headers include <fmt/format.h> for fmt::format("{}", v) and fmt::format_to; where
// libfmt's headers are missing (this environment), profiler.cpp gets those two from std::format.
#pragma once
#include <format>

namespace fmt {
using std::format;
using std::format_to;
}  // namespace fmt
