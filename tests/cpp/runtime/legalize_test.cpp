// Layout legalization by numbers: each case runs a graph on the host runtime twice, once on
// strided views of its storages directly and once legalized (whole flat storages in, each
// storage's next value out), and expects the storages and pass-through outputs to agree
// bit for bit. Views sweep the read kinds (slices, transposes, broadcast, nested, negative,
// overlapping, empty, one element) and the write kinds, for f32, bf16, i64 and bool.
#include <algorithm>

#include "ir/passes/legalize.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using ir::Legalized;
using ir::StorageView;
using ir::ViewKind;

// The one place a test builds a runtime view of a storage (adapt here when
// runtime::View changes).
runtime::View view_of(Tensor& storage, const StorageView& v) {
  return runtime::View{host::as_buffer(storage.data()), storage.dtype, v.sizes, v.strides, v.offset};
}

StorageView sv(int storage, int64_t numel, Shape sizes, std::vector<int64_t> strides = {},
               int64_t offset = 0) {
  return StorageView{storage, numel, std::move(sizes), std::move(strides), offset};
}
const StorageView kPass{};  // storage -1: passed through

Tensor flat(DType d, int64_t n, int salt = 0) {
  return make(d, {n}, [&](int64_t i) { return d == DType::Bool ? (i + salt) % 3 == 0 : 0.5 * i - 3 + salt; });
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  size_t n = static_cast<size_t>(a.numel()) * ir::dtype_size(a.dtype);
  return a.shape == b.shape && std::equal(a.bytes.begin(), a.bytes.begin() + n, b.bytes.begin());
}

struct Case {
  std::vector<Tensor> storages;  // initial values, flat, indexed by storage id
  std::vector<Tensor> scalars;   // pass-through parameters, in parameter order
  std::vector<StorageView> params, outputs;
};

// Runs g on the views directly; returns the storages after and the pass-through outputs.
std::pair<std::vector<Tensor>, std::vector<Tensor>> run_direct(const Graph& g, Case c) {
  std::vector<runtime::View> in, out;
  size_t si = 0;
  for (const StorageView& v : c.params)
    in.push_back(v.storage < 0 ? c.scalars[si++].view() : view_of(c.storages[v.storage], v));
  std::vector<Tensor> pass(c.outputs.size());
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    const StorageView& v = c.outputs[j];
    pass[j] = Tensor(g.dtype(g.outputs()[j]), g.shape(g.outputs()[j]));
    out.push_back(v.storage < 0 ? pass[j].view() : view_of(c.storages[v.storage], v));
  }
  runtime::host_runtime().compile(g)->run(in, out);
  return {std::move(c.storages), std::move(pass)};
}

// Runs the legalized graph on whole storages (fresh output buffers, as an accelerator
// returns them) and stores each output as its storage's new value.
std::pair<std::vector<Tensor>, std::vector<Tensor>> run_legalized(const Legalized& l, Case c) {
  std::vector<int> scalar_of(c.params.size(), -1);
  for (size_t i = 0, si = 0; i < c.params.size(); ++i)
    if (c.params[i].storage < 0) scalar_of[i] = static_cast<int>(si++);
  std::vector<Tensor> in;
  for (size_t p = 0; p < l.param_storage.size(); ++p) {
    if (int i = l.param_view[p]; i >= 0) {  // a moving view's start: where this call's view sits
      size_t np = c.params.size();
      int64_t at = ir::lowest_element(static_cast<size_t>(i) < np ? c.params[i] : c.outputs[i - np]);
      in.push_back(make(DType::I64, {}, [&](int64_t) { return static_cast<double>(at); }));
      continue;
    }
    in.push_back(l.param_storage[p] >= 0 ? c.storages[l.param_storage[p]] : c.scalars[scalar_of[l.param_origin[p]]]);
  }
  std::vector<Tensor> outs = run(l.graph, in);
  std::vector<Tensor> pass(c.outputs.size());
  for (size_t j = 0; j < outs.size(); ++j) {
    if (l.output_storage[j] >= 0) {
      EXPECT_EQ(outs[j].shape, c.storages[l.output_storage[j]].shape);
      c.storages[l.output_storage[j]] = outs[j];
    } else {
      pass[l.output_origin[j]] = outs[j];
    }
  }
  return {std::move(c.storages), std::move(pass)};
}

// Legalizes, runs both ways and compares; checks the donation and storage maps.
Legalized check(const Graph& g, const Case& c) {
  Legalized l = ir::legalize(g, c.params, c.outputs);
  EXPECT_NO_THROW(l.graph.to_stablehlo());  // every op the pass emits prints
  auto [want, want_pass] = run_direct(g, c);
  auto [got, got_pass] = run_legalized(l, c);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(same_bytes(got[k], want[k])) << "storage " << k;
  for (size_t j = 0; j < c.outputs.size(); ++j)
    if (c.outputs[j].storage < 0) EXPECT_TRUE(same_bytes(got_pass[j], want_pass[j])) << "output " << j;
  for (size_t j = 0; j < l.donated.size(); ++j) {
    int p = l.donated[j];
    if (p >= 0) EXPECT_EQ(l.param_storage[p], l.output_storage[j]);
    bool read = false;
    for (int k : l.param_storage) read |= k >= 0 && k == l.output_storage[j];
    EXPECT_EQ(p >= 0, read) << "output " << j << " is donated exactly when its storage is a parameter";
  }
  return l;
}

Value bump(Graph& g, Value x) {  // x + 1 in x's dtype (bool: or true)
  return g.binary(OpCode::Add, x, g.broadcast(g.constant(1, g.dtype(x)), g.shape(x), {}));
}

const std::vector<DType> kDtypes = {DType::F32, DType::BF16, DType::I64, DType::Bool};

struct ViewRow {
  const char* name;
  int64_t numel;  // of the storage
  Shape sizes;
  std::vector<int64_t> strides;
  int64_t offset;
  ViewKind kind;
};

// Views of a storage: every kind the pass distinguishes.
const std::vector<ViewRow>& view_rows() {
  static const std::vector<ViewRow> rows = {
      {"whole", 12, {3, 4}, {}, 0, ViewKind::kWhole},
      {"offset range", 20, {2, 3}, {3, 1}, 5, ViewKind::kNested},
      {"transpose", 12, {4, 3}, {1, 4}, 0, ViewKind::kNested},
      {"column slice", 16, {4, 2}, {4, 1}, 1, ViewKind::kNested},
      {"every other", 10, {5}, {2}, 0, ViewKind::kNested},
      {"nested steps (padded)", 48, {3, 2}, {18, 3}, 1, ViewKind::kNested},
      {"nested steps (aligned box)", 54, {3, 2}, {18, 3}, 1, ViewKind::kNested},
      {"permuted 3-d with offset", 70, {2, 3, 4}, {3, 1, 12}, 13, ViewKind::kNested},
      {"wraps a row (padded)", 22, {2, 5}, {10, 1}, 7, ViewKind::kNested},
      {"negative stride", 10, {4}, {-2}, 7, ViewKind::kNested},
      {"flipped rows and columns", 12, {3, 4}, {-4, -1}, 11, ViewKind::kNested},
      {"size-1 dims", 30, {1, 3, 1}, {99, 5, 7}, 2, ViewKind::kNested},
      {"one element (0-d)", 5, {}, {}, 3, ViewKind::kNested},
      {"empty", 5, {0, 3}, {3, 1}, 0, ViewKind::kEmpty},
      {"overlapping (unfold)", 8, {3, 4}, {2, 1}, 0, ViewKind::kIndexed},
      {"overlapping, negative", 8, {3, 3}, {-1, 2}, 2, ViewKind::kIndexed},
  };
  return rows;
}

TEST(Legalize, ViewReads) {
  for (DType d : kDtypes)
    for (const ViewRow& r : view_rows()) {
      SCOPED_TRACE(std::string(r.name) + " " + ir::dtype_name(d));
      StorageView in = sv(0, r.numel, r.sizes, r.strides, r.offset);
      EXPECT_EQ(ir::view_kind(in), r.kind);
      Graph g;
      g.set_outputs({bump(g, g.param(d, r.sizes))});
      int64_t n = ir::numel(r.sizes);
      Legalized l = check(g, {{flat(d, r.numel), flat(d, n, 1)}, {}, {in}, {sv(1, n, r.sizes)}});
      EXPECT_EQ(l.param_storage, (std::vector<int>{0}));  // the dense whole write needs no old value
      EXPECT_EQ(l.donated, (std::vector<int>{-1}));
    }
}

TEST(Legalize, BroadcastReads) {
  Graph g;
  Value x = g.param(DType::F32, {3, 4}), y = g.param(DType::F32, {2, 3, 4});
  g.set_outputs({g.binary(OpCode::Add, g.broadcast(x, {2, 3, 4}, {1, 2}), y)});
  // x: a row expanded down 3 rows; y: a column of 3 expanded over 2 and 4, reversed.
  check(g, {{flat(DType::F32, 9), flat(DType::F32, 24, 2)},
            {},
            {sv(0, 9, {3, 4}, {0, 1}, 2), sv(0, 9, {2, 3, 4}, {0, -1, 0}, 8)},
            {sv(1, 24, {2, 3, 4})}});
}

TEST(Legalize, StridedWrites) {  // out= into a strided tensor: the old value fills the rest
  for (DType d : kDtypes)
    for (const ViewRow& r : view_rows()) {
      if (r.kind == ViewKind::kIndexed) continue;  // overlapping writes: see OverlappingWrite
      SCOPED_TRACE(std::string(r.name) + " " + ir::dtype_name(d));
      int64_t n = ir::numel(r.sizes);
      Graph g;
      g.set_outputs({bump(g, g.param(d, r.sizes))});
      StorageView out = sv(1, r.numel, r.sizes, r.strides, r.offset);
      Legalized l = check(g, {{flat(d, n), flat(d, r.numel, 1)}, {}, {sv(0, n, r.sizes)}, {out}});
      bool covers = ir::covers_storage(out);
      EXPECT_EQ(covers, r.kind == ViewKind::kWhole || r.numel == n);
      EXPECT_EQ(l.param_storage, (covers ? std::vector<int>{0} : std::vector<int>{0, 1}));
      EXPECT_EQ(l.output_storage, (std::vector<int>{1}));
    }
}

// Views at a runtime offset (StorageView::dynamic_offset): the program legalized for one
// placement of each view row, run at every other placement that fits its storage, equals
// running on the views directly; reads and in-place writes, every dtype.
TEST(Legalize, DynamicOffsetsServeEveryPlacement) {
  for (DType d : kDtypes)
    for (const ViewRow& r : view_rows()) {
      if (r.kind == ViewKind::kEmpty || r.kind == ViewKind::kWhole) continue;
      int64_t n = ir::numel(r.sizes);
      StorageView base = sv(0, r.numel + 7, r.sizes, r.strides, r.offset);
      base.dynamic_offset = true;
      Graph g;
      g.set_outputs({bump(g, g.param(d, r.sizes)), bump(g, g.param(d, r.sizes))});
      // Read at one view, write the result back through the same view, and copy it out.
      Legalized l = ir::legalize(g, {base, base}, {base, sv(1, n, r.sizes)});
      ASSERT_EQ(std::count_if(l.param_view.begin(), l.param_view.end(), [](int i) { return i >= 0; }), 3);
      EXPECT_NO_THROW(l.graph.to_stablehlo());
      for (int64_t shift : {int64_t(0), int64_t(1), int64_t(3), int64_t(7)}) {
        SCOPED_TRACE(std::string(r.name) + " " + ir::dtype_name(d) + " shifted by " + std::to_string(shift));
        StorageView at = base;
        at.offset += shift;
        Case c{{flat(d, r.numel + 7), flat(d, n, 1)}, {}, {at, at}, {at, sv(1, n, r.sizes)}};
        auto [want, want_pass] = run_direct(g, c);
        auto [got, got_pass] = run_legalized(l, c);
        for (size_t k = 0; k < want.size(); ++k) EXPECT_TRUE(same_bytes(got[k], want[k])) << "storage " << k;
      }
    }
}

TEST(Legalize, PermutedCoverNeedsNoOldValue) {
  // A transposed view of the whole storage replaces every element: a transpose and reshape.
  Graph g;
  g.set_outputs({bump(g, g.param(DType::F32, {4, 3}))});
  Legalized l = check(g, {{flat(DType::F32, 12), flat(DType::F32, 12, 1)}, {}, {sv(0, 12, {4, 3})},
                          {sv(1, 12, {4, 3}, {1, 4})}});
  EXPECT_EQ(l.param_storage, (std::vector<int>{0}));
  EXPECT_EQ(l.donated, (std::vector<int>{-1}));
}

TEST(Legalize, InPlaceEveryOtherPlusOne) {  // x[::2] += 1
  for (DType d : kDtypes) {
    SCOPED_TRACE(ir::dtype_name(d));
    Graph g;
    g.set_outputs({bump(g, g.param(d, {5}))});
    StorageView half = sv(0, 10, {5}, {2}, 0);
    Legalized l = check(g, {{flat(d, 10)}, {}, {half}, {half}});
    EXPECT_EQ(l.param_storage, (std::vector<int>{0}));
    EXPECT_EQ(l.output_storage, (std::vector<int>{0}));
    EXPECT_EQ(l.donated, (std::vector<int>{0}));
  }
}

TEST(Legalize, InPlaceOnViews) {
  // x.t()[1:, :2] *= y on a [4, 5] storage; y is a broadcast row of another storage.
  Graph g;
  Value x = g.param(DType::F32, {4, 2}), y = g.param(DType::F32, {4, 2});
  g.set_outputs({g.binary(OpCode::Mul, x, y)});
  StorageView v = sv(0, 20, {4, 2}, {1, 5}, 1);
  check(g, {{flat(DType::F32, 20), flat(DType::F32, 2, 3)}, {}, {v, sv(1, 2, {4, 2}, {0, 1})}, {v}});
}

TEST(Legalize, OutputOverlapsItsInputWithAnotherLayout) {
  // out = flip(x) written over x shifted by one: the read must see the old values.
  Graph g;
  Value x = g.param(DType::I64, {6});
  ir::Attrs a;
  a.dims = {0};
  g.set_outputs({g.op(OpCode::Reverse, {x}, a)});
  check(g, {{flat(DType::I64, 8)}, {}, {sv(0, 8, {6}, {1}, 0)}, {sv(0, 8, {6}, {1}, 2)}});
  // In-place transpose of a square matrix.
  Graph t;
  t.set_outputs({t.transpose(t.param(DType::BF16, {3, 3}), {1, 0})});
  check(t, {{flat(DType::BF16, 9)}, {}, {sv(0, 9, {3, 3})}, {sv(0, 9, {3, 3})}});
}

TEST(Legalize, TwoOutputsIntoOneStorage) {
  // Disjoint halves, and overlapping views where the later output wins; storage 0 is also
  // read, so the host writes outputs in order.
  for (DType d : kDtypes) {
    SCOPED_TRACE(ir::dtype_name(d));
    Graph g;
    Value x = g.param(d, {2, 3});
    Value a = bump(g, x), b = g.binary(OpCode::Max, x, g.transpose(g.param(d, {3, 2}), {1, 0}));
    g.set_outputs({a, b, g.binary(OpCode::Mul, a, b)});
    Case c{{flat(d, 12), flat(d, 6, 2)},
           {},
           {sv(0, 12, {2, 3}, {1, 2}, 0), sv(1, 6, {3, 2})},
           {sv(0, 12, {2, 3}, {3, 1}, 6), sv(0, 12, {2, 3}, {6, 2}, 1), sv(1, 6, {2, 3}, {1, 2})}};
    Legalized l = check(g, c);
    EXPECT_EQ(l.output_storage, (std::vector<int>{0, 1}));
    EXPECT_EQ(l.donated, (std::vector<int>{0, 1}));
  }
}

TEST(Legalize, OneValueIntoTwoStoragesAcrossAnOverlappingWrite) {
  // a goes to storage 0 (then partly overwritten by b) and to storage 1: storage 1 gets a,
  // not the overwritten memory. Checked by hand: the host runtime, run on the views
  // directly, writes a straight into storage 0 and copies it to storage 1 only after b's
  // write, so it is no reference here.
  Graph g;
  Value x = g.param(DType::F32, {2, 3});
  Value a = bump(g, x), b = g.binary(OpCode::Mul, x, x);
  g.set_outputs({a, b, a});
  Case c{{flat(DType::F32, 12), flat(DType::F32, 6, 2)},
         {},
         {sv(0, 12, {2, 3}, {1, 2}, 0)},
         {sv(0, 12, {2, 3}, {3, 1}, 6), sv(0, 12, {2, 3}, {6, 2}, 1), sv(1, 6, {2, 3}, {1, 2})}};
  Legalized l = ir::legalize(g, c.params, c.outputs);
  auto [got, pass] = run_legalized(l, c);
  auto s0 = [](int64_t k) { return 0.5 * k - 3; };  // flat(F32, 12)
  std::vector<double> want0(12), want1(6);
  for (int64_t k = 0; k < 12; ++k) want0[k] = s0(k);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double xv = s0(i + 2 * j);
      want0[6 + 3 * i + j] = xv + 1;        // a
      want0[1 + 6 * i + 2 * j] = xv * xv;   // b, later
      want1[i + 2 * j] = xv + 1;            // a again
    }
  for (int64_t k = 0; k < 12; ++k) EXPECT_EQ(got[0].get(k), want0[k]) << k;
  for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(got[1].get(k), want1[k]) << k;
}

TEST(Legalize, ReadOfAStorageAnEarlierOutputWrites) {
  // Output 0 rewrites storage 1 that parameter 1 reads for output 1: output 1 still sees
  // the old values.
  Graph g;
  Value x = g.param(DType::F32, {4}), y = g.param(DType::F32, {4});
  g.set_outputs({bump(g, x), g.binary(OpCode::Add, x, y)});
  check(g, {{flat(DType::F32, 4), flat(DType::F32, 8, 1), flat(DType::F32, 4, 2)},
            {},
            {sv(0, 4, {4}), sv(1, 8, {4}, {2}, 1)},
            {sv(1, 8, {4}, {1}, 2), sv(2, 4, {4})}});
}

TEST(Legalize, ScalarsAndOutputsPassThrough) {
  Graph g;
  Value s = g.param(DType::F32, {}), x = g.param(DType::F32, {3});
  Value y = g.binary(OpCode::Mul, x, g.broadcast(s, {3}, {}));
  g.set_outputs({y, g.reduce(y, ir::Reducer::Sum, {0})});
  Case c{{flat(DType::F32, 6)}, {make(DType::F32, {}, [](int64_t) { return 2.5; })},
         {kPass, sv(0, 6, {3}, {-2}, 5)}, {sv(0, 6, {3}, {2}, 0), kPass}};
  Legalized l = check(g, c);
  EXPECT_EQ(l.param_storage, (std::vector<int>{-1, 0}));
  EXPECT_EQ(l.param_origin, (std::vector<int>{0, -1}));
  EXPECT_EQ(l.output_storage, (std::vector<int>{0, -1}));
  EXPECT_EQ(l.output_origin, (std::vector<int>{-1, 1}));
  EXPECT_EQ(l.donated, (std::vector<int>{1, -1}));
}

TEST(Legalize, OverlappingWrite) {
  // A write through overlapping dims (as_strided): the last write in row-major order wins,
  // as on the host runtime (torch refuses such writes; XLA leaves the winner unspecified).
  Graph g;
  g.set_outputs({bump(g, g.param(DType::I64, {3, 4}))});
  check(g, {{flat(DType::I64, 8), flat(DType::I64, 12)}, {}, {sv(1, 12, {3, 4})},
            {sv(0, 8, {3, 4}, {2, 1}, 0)}});
}

TEST(Legalize, BroadcastWriteKeepsTheLastRow) {
  // out= into an expanded view (torch refuses it): each element is written 3 times; the
  // last write in row-major order (row 2) stays. Checked by hand.
  Graph g;
  g.set_outputs({g.param(DType::F32, {3, 2})});
  Case c{{flat(DType::F32, 6), flat(DType::F32, 4, 1)}, {}, {sv(0, 6, {3, 2})}, {sv(1, 4, {3, 2}, {0, 1}, 1)}};
  auto [got, pass] = run_legalized(ir::legalize(g, c.params, c.outputs), c);
  // storage 1 was [-2, -1.5, -1, -0.5]; elements 1..2 take row 2 of x = storage 0 [4..5].
  std::vector<double> want = {-2, 0.5 * 4 - 3, 0.5 * 5 - 3, -0.5};
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(got[1].get(k), want[k]) << k;
}

TEST(Legalize, EmptyStorageAndViews) {
  Graph g;
  Value x = g.param(DType::F32, {0, 2});
  g.set_outputs({bump(g, x), x});
  check(g, {{Tensor(DType::F32, {0}), flat(DType::F32, 3)}, {}, {sv(0, 0, {0, 2})},
            {sv(0, 0, {0, 2}), sv(1, 3, {0, 2}, {1, 1}, 1)}});
}

}  // namespace
}  // namespace torch_tpu::host::testing
