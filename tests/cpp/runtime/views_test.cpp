// run_copy against an element-by-element reference: permutations (the tiled transpose
// path, with ragged tile edges), negative and zero strides, every element size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "runtime/host/views.h"

namespace torch_tpu::host {
namespace {

// dst (contiguous in `perm` order of src's dims) = src viewed with src strides; reference
// by index arithmetic. `flip` reverses src dim 0 (negative stride).
template <class T>
void check_permute(const ir::Shape& src_shape, const std::vector<int64_t>& perm, bool flip) {
  int r = static_cast<int>(src_shape.size());
  std::vector<int64_t> sst = contiguous_strides(src_shape);
  int64_t n = ir::numel(src_shape);
  std::vector<T> src(n), dst(n), want(n);
  for (int64_t i = 0; i < n; ++i) src[i] = static_cast<T>(i * 2654435761u + 7);
  ir::Shape shape(r);
  std::vector<int64_t> from(r);
  for (int k = 0; k < r; ++k) shape[k] = src_shape[perm[k]], from[k] = sst[perm[k]];
  const T* base = src.data();
  if (flip) {  // src dim 0 walked backwards: start at its last index
    base += (src_shape[0] - 1) * sst[0];
    for (int k = 0; k < r; ++k)
      if (perm[k] == 0) from[k] = -from[k];
  }
  std::vector<int64_t> dstst = contiguous_strides(shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int k = 0; k < r; ++k) off += idx[k] * from[k];
    want[i] = base[off];
    for (int k = r - 1; k >= 0; --k) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  CopyPlan p = make_copy_plan(shape, dstst.data(), from.data());
  run_copy(p, dst.data(), base, sizeof(T));
  ASSERT_EQ(0, std::memcmp(dst.data(), want.data(), n * sizeof(T)))
      << "elem " << sizeof(T) << " rank " << r << " flip " << flip;
}

template <class T>
void check_all() {
  const std::vector<std::pair<ir::Shape, std::vector<int64_t>>> cases = {
      {{37, 29}, {1, 0}},           {{64, 64}, {1, 0}},          {{8, 128}, {1, 0}},
      {{3, 17, 9}, {0, 2, 1}},      {{3, 17, 9}, {2, 1, 0}},     {{3, 17, 9}, {1, 2, 0}},
      {{2, 40, 3, 33}, {0, 2, 3, 1}}, {{2, 40, 3, 33}, {0, 2, 1, 3}}, {{5, 1, 70}, {2, 1, 0}},
      {{100, 2}, {1, 0}},           {{2, 100}, {1, 0}},          {{9, 9, 9}, {2, 0, 1}}};
  for (const auto& [s, perm] : cases)
    for (bool flip : {false, true}) check_permute<T>(s, perm, flip);
}

TEST(HostViews, PermuteCopiesMatchReference) {
  check_all<uint8_t>();
  check_all<uint16_t>();
  check_all<uint32_t>();
  check_all<uint64_t>();
}

TEST(HostViews, BroadcastStrideZero) {
  std::vector<float> src = {1, 2, 3}, dst(12);
  ir::Shape shape = {4, 3};
  int64_t dstst[] = {3, 1}, srcst[] = {0, 1};
  run_copy(make_copy_plan(shape, dstst, srcst), dst.data(), src.data(), 4);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(dst[i], src[i % 3]);
  int64_t srcst_t[] = {1, 0};  // [4, 3] from a [4] column: src contiguous along dim 0
  std::vector<float> col = {5, 6, 7, 8};
  run_copy(make_copy_plan(shape, dstst, srcst_t), dst.data(), col.data(), 4);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(dst[i], col[i / 3]);
}

}  // namespace
}  // namespace torch_tpu::host
