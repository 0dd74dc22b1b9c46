// Helpers shared by the IR tests: expect a torch_tpu::Error whose message contains a string.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "ir/graph.h"

namespace torch_tpu::ir::ir_test {

template <class F>
void expect_error(F&& f, const std::string& substr) {
  try {
    f();
    ADD_FAILURE() << "expected torch_tpu::Error containing \"" << substr << "\"";
  } catch (const torch_tpu::Error& e) {
    EXPECT_NE(std::string(e.what()).find(substr), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << substr;
  }
}

inline Attrs dims_attr(std::vector<int64_t> dims) {
  Attrs a;
  a.dims = std::move(dims);
  return a;
}

inline Attrs dot_attr(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
                      std::vector<int64_t> rc, Precision p = Precision::Default) {
  Attrs a;
  a.lhs_batch = std::move(lb);
  a.rhs_batch = std::move(rb);
  a.lhs_contract = std::move(lc);
  a.rhs_contract = std::move(rc);
  a.precision = p;
  return a;
}

}  // namespace torch_tpu::ir::ir_test
