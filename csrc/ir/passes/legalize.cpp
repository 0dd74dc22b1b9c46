// The layout legalization pass (see legalize.h): binds storages, creates one flat parameter
// per storage, copies the graph with each parameter replaced by its view's read, and folds
// the outputs, in order, into each storage's next value.
#include "ir/passes/legalize.h"

#include <algorithm>
#include <map>

#include "base/error.h"

namespace torch_tpu::ir {
namespace {

struct Storage {
  DType dtype = DType::F32;
  int64_t numel = 0;
  bool written = false;
  bool needs_old = false;  // its first write keeps some old elements
  int param = -1;          // its parameter in the legalized graph
  Value value;             // its current value while outputs are folded in
};

class Legalizer {
 public:
  Legalizer(const Graph& g, const std::vector<StorageView>& params,
            const std::vector<StorageView>& outputs)
      : g_(g), params_(params), outputs_(outputs) {}

  Legalized run() {
    bind();
    make_params();
    copy_nodes();
    fold_outputs();
    out_.graph.verify();
    return std::move(out_);
  }

 private:
  // Records the storage a view binds, checking the binding against the graph's value.
  void bind_view(const StorageView& v, DType dt, const Shape& shape, const char* what, size_t i) {
    TPU_CHECK(v.sizes == shape, "[legalize] ", what, " ", i, " view does not match the graph; got sizes ",
              shape_str(v.sizes), ", expected ", shape_str(shape));
    view_kind(v);  // checks the view lies in its storage
    auto [it, fresh] = storages_.try_emplace(v.storage);
    Storage& s = it->second;
    if (fresh) {
      s.dtype = dt;
      s.numel = v.storage_numel;
      return;
    }
    TPU_CHECK(s.dtype == dt, "[legalize] storage ", v.storage, " is seen with two dtypes; got ",
              dtype_name(dt), " for ", what, " ", i, ", expected ", dtype_name(s.dtype));
    TPU_CHECK(s.numel == v.storage_numel, "[legalize] storage ", v.storage, " is seen with two sizes; got ",
              v.storage_numel, " for ", what, " ", i, ", expected ", s.numel);
  }

  void bind() {
    TPU_CHECK(params_.size() == static_cast<size_t>(g_.num_params()), "[legalize] wrong number of parameter views; got ",
              params_.size(), ", expected ", g_.num_params());
    TPU_CHECK(outputs_.size() == g_.outputs().size(), "[legalize] wrong number of output views; got ",
              outputs_.size(), ", expected ", g_.outputs().size());
    param_node_.assign(params_.size(), -1);
    for (size_t id = 0; id < g_.nodes().size(); ++id)
      if (g_.nodes()[id].is_param) param_node_[g_.nodes()[id].param_index] = static_cast<int>(id);
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].storage < 0) continue;
      const Node& n = g_.nodes()[param_node_[i]];
      bind_view(params_[i], n.dtype, n.shape, "parameter", i);
    }
    for (size_t j = 0; j < outputs_.size(); ++j) {
      const StorageView& v = outputs_[j];
      if (v.storage < 0) continue;
      Value o = g_.outputs()[j];
      bind_view(v, g_.dtype(o), g_.shape(o), "output", j);
      Storage& s = storages_[v.storage];
      if (!s.written) s.needs_old = v.dynamic_offset || !covers_storage(v);
      s.written = true;
    }
  }

  // Appends a legalized parameter; returns its index (its value is params_v_[index]).
  int add_param(DType dt, Shape shape, int storage, int origin, int view = -1) {
    params_v_.push_back(out_.graph.param(dt, std::move(shape)));
    out_.param_storage.push_back(storage);
    out_.param_origin.push_back(origin);
    out_.param_view.push_back(view);
    return static_cast<int>(out_.param_storage.size()) - 1;
  }

  // Storage parameters in order of first read, then the old values writes need.
  void make_params() {
    passthrough_.assign(params_.size(), -1);
    for (size_t i = 0; i < params_.size(); ++i) {
      int k = params_[i].storage;
      const Node& n = g_.nodes()[param_node_[i]];
      if (k < 0) {
        passthrough_[i] = add_param(n.dtype, n.shape, -1, static_cast<int>(i));
      } else if (storages_[k].param < 0) {
        storages_[k].param = add_param(n.dtype, {storages_[k].numel}, k, -1);
      }
    }
    for (const StorageView& v : outputs_) {
      if (v.storage < 0) continue;
      Storage& s = storages_[v.storage];
      if (s.needs_old && s.param < 0) s.param = add_param(s.dtype, {s.numel}, v.storage, -1);
    }
    for (auto& [k, s] : storages_)
      if (s.param >= 0) s.value = params_v_[s.param];
    // The runtime starts of dynamic-offset views.
    size_t nviews = params_.size() + outputs_.size();
    start_.assign(nviews, Value{});
    for (size_t i = 0; i < nviews; ++i) {
      const StorageView& v = i < params_.size() ? params_[i] : outputs_[i - params_.size()];
      if (v.storage >= 0 && v.dynamic_offset)
        start_[i] = params_v_[add_param(DType::I64, {}, -1, -1, static_cast<int>(i))];
    }
  }

  // Copies every node in order; a parameter becomes its view's read of the storage value
  // (always the old value: every input is read before any output is written).
  void copy_nodes() {
    Graph& g = out_.graph;
    remap_.assign(g_.nodes().size(), Value{});
    for (size_t id = 0; id < g_.nodes().size(); ++id) {
      const Node& n = g_.nodes()[id];
      if (n.is_param) {
        const StorageView& v = params_[n.param_index];
        Value start = start_[n.param_index];
        remap_[id] = v.storage < 0      ? params_v_[passthrough_[n.param_index]]
                     : start.valid() ? read_view_at(g, storages_[v.storage].value, v, start)
                                     : read_view(g, storages_[v.storage].value, v);
        continue;
      }
      std::vector<Value> ops;
      for (int o : n.operands) ops.push_back(remap_[o]);
      remap_[id] = g.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
    }
  }

  // Outputs in order: each write updates its storage's value; one graph output per storage
  // (at its first write) or pass-through output.
  void fold_outputs() {
    Graph& g = out_.graph;
    std::vector<int> slots;  // per legalized output: storage k, or -1 - original output index
    for (size_t j = 0; j < outputs_.size(); ++j) {
      const StorageView& v = outputs_[j];
      Value x = remap_[g_.outputs()[j].id];
      if (v.storage < 0) {
        slots.push_back(-1 - static_cast<int>(j));
        continue;
      }
      Storage& s = storages_[v.storage];
      if (std::find(slots.begin(), slots.end(), v.storage) == slots.end()) slots.push_back(v.storage);
      Value start = start_[params_.size() + j];
      s.value = start.valid() ? write_view_at(g, s.value, x, v, start) : write_view(g, s.value, x, v);
    }
    std::vector<Value> outs;
    for (int slot : slots) {
      bool pass = slot < 0;
      outs.push_back(pass ? remap_[g_.outputs()[-1 - slot].id] : storages_[slot].value);
      out_.output_storage.push_back(pass ? -1 : slot);
      out_.output_origin.push_back(pass ? -1 - slot : -1);
      out_.donated.push_back(pass ? -1 : storages_[slot].param);
    }
    g.set_outputs(std::move(outs));
  }

  const Graph& g_;
  const std::vector<StorageView>& params_;
  const std::vector<StorageView>& outputs_;
  std::map<int, Storage> storages_;
  std::vector<int> param_node_;   // original parameter index -> node id
  std::vector<int> passthrough_;  // original param index -> legalized param index, or -1
  std::vector<Value> params_v_;   // legalized param index -> its value
  std::vector<Value> remap_;      // original node id -> legalized value
  std::vector<Value> start_;      // view index -> its runtime start (dynamic offsets), or invalid
  Legalized out_;
};

}  // namespace

Legalized legalize(const Graph& g, const std::vector<StorageView>& params,
                   const std::vector<StorageView>& outputs) {
  return Legalizer(g, params, outputs).run();
}

}  // namespace torch_tpu::ir
