// arcreduce.torch._C: the runtime's C++ API for torch tensors. The Python package
// (arcreduce/torch) wraps it; everything here is thin: checks, zero-copy views, handle table.
// Runtime errors (a Status that is not ok, arcreduce::Error) raise arcreduce.torch.ArcreduceError
// with the runtime's message; blocking calls release the GIL.
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arcreduce/arcreduce.h"
#include "ddp_hook.h"
#include "handle_table.h"
#include "tensor_view.h"

namespace arcreduce_torch {
namespace {

namespace py = pybind11;

// Never destroyed: tensors still held at exit must not be released after the interpreter is gone.
HandleTable& table() {
  static HandleTable* instance = new HandleTable();
  return *instance;
}

uint64_t allreduce_async(const at::Tensor& tensor, const std::string& name, int op,
                         std::optional<std::string> compressor, std::optional<double> ratio,
                         std::optional<std::string> error_feedback,
                         std::optional<std::string> granularity, int process_set) {
  arcreduce::Tensor view = view_of(tensor, name, Use::kAllreduce);
  arcreduce::AllreduceOptions options;
  options.process_set = process_set;
  options.op = static_cast<arcreduce::ReduceOp>(op);  // checked by the runtime
  options.compression.compressor = std::move(compressor);
  options.compression.ratio = ratio;
  options.compression.error_feedback = std::move(error_feedback);
  options.compression.granularity = std::move(granularity);
  const uint64_t handle = arcreduce::allreduce_async(name, view, options);
  table().hold(handle, tensor);
  return handle;
}

uint64_t broadcast_async(const at::Tensor& tensor, const std::string& name, int root_rank,
                         int process_set) {
  arcreduce::Tensor view = view_of(tensor, name, Use::kBroadcast);
  arcreduce::BroadcastOptions options;
  options.process_set = process_set;
  const uint64_t handle = arcreduce::broadcast_async(name, view, root_rank, options);
  table().hold(handle, tensor);
  return handle;
}

// Collective kinds of shaped_async (Python passes them by number).
enum class Shaped { kAllgather = 0, kAlltoall = 1, kReducescatter = 2 };

// allgather, alltoall, reducescatter: the output is a new tensor of the input's dtype, allocated
// by the runtime's callback once every rank's shape is known (any thread: no GIL needed).
uint64_t shaped_async(const at::Tensor& tensor, const std::string& name, int kind, int op,
                      std::vector<int64_t> splits, int process_set) {
  arcreduce::Tensor view = view_of(tensor, name, Use::kBroadcast);
  auto slot = std::make_shared<OutputSlot>();
  arcreduce::CollectiveOptions options;
  options.process_set = process_set;
  options.op = static_cast<arcreduce::ReduceOp>(op);  // checked by the runtime
  options.splits = std::move(splits);
  const c10::ScalarType dtype = tensor.scalar_type();
  options.allocate = [slot, dtype](const std::vector<int64_t>& shape,
                                   const std::vector<int64_t>& rows) -> void* {
    slot->tensor = at::empty(shape, at::TensorOptions().dtype(dtype));
    slot->rows = rows;
    return slot->tensor.numel() > 0 ? slot->tensor.data_ptr() : nullptr;
  };
  uint64_t handle = 0;
  switch (static_cast<Shaped>(kind)) {
    case Shaped::kAllgather:
      handle = arcreduce::allgather_async(name, view, std::move(options));
      break;
    case Shaped::kAlltoall:
      handle = arcreduce::alltoall_async(name, view, std::move(options));
      break;
    default:
      handle = arcreduce::reducescatter_async(name, view, std::move(options));
  }
  table().hold(handle, tensor, slot);
  return handle;
}

arcreduce::Status wait(uint64_t handle) {
  py::gil_scoped_release release;
  return arcreduce::synchronize(handle);
}

// Waits for `handle`; returns the tensor it worked on (None for an unknown handle's error).
at::Tensor synchronize(uint64_t handle) {
  const arcreduce::Status status = wait(handle);
  HandleTable::Held held = table().release(handle);
  if (!status.ok()) throw arcreduce::Error(status.message(), status.code());
  return held.output ? held.output->tensor : held.tensor;
}

// Waits for a shaped_async handle; returns (output, rows per rank).
std::pair<at::Tensor, std::vector<int64_t>> synchronize_output(uint64_t handle) {
  const arcreduce::Status status = wait(handle);
  HandleTable::Held held = table().release(handle);
  if (!status.ok()) throw arcreduce::Error(status.message(), status.code());
  if (!held.output)
    throw arcreduce::Error("handle " + std::to_string(handle) + " has no output",
                           arcreduce::StatusCode::kInvalidArgument);
  return {held.output->tensor, held.output->rows};
}

py::dict stats_dict(int process_set) {
  const arcreduce::Stats s = arcreduce::stats(process_set);
  py::dict d;
  d["ops_completed"] = s.ops_completed;
  d["ops_failed"] = s.ops_failed;
  d["buckets"] = s.buckets;
  d["cycles"] = s.cycles;
  d["cache_hits"] = s.cache_hits;
  d["full_negotiations"] = s.full_negotiations;
  d["collectives"] = s.collectives;
  d["negotiation_collectives"] = s.negotiation_collectives;
  d["held_steps"] = s.held_steps;
  d["coordinator_cpu_seconds"] = s.coordinator_cpu_seconds;
  d["negotiation_seconds"] = s.negotiation_seconds;
  d["copy_seconds"] = s.copy_seconds;
  d["bytes_sent"] = s.bytes_sent;
  d["bytes_received"] = s.bytes_received;
  d["communication_seconds"] = s.communication_seconds;
  d["compression_seconds"] = s.compression_seconds;
  py::dict per_compressor;
  for (const auto& kv : s.compressors) {
    py::dict c;
    c["tensors"] = kv.second.tensors;
    c["bytes_sent"] = kv.second.bytes_sent;
    c["bytes_received"] = kv.second.bytes_received;
    c["dense_fallbacks"] = kv.second.dense_fallbacks;
    per_compressor[py::str(kv.first)] = c;
  }
  d["compressors"] = per_compressor;
  py::dict calls, bytes;
  for (const auto& kv : s.allreduce_calls) calls[py::str(kv.first)] = kv.second;
  for (const auto& kv : s.allreduce_bytes) bytes[py::str(kv.first)] = kv.second;
  d["allreduce_calls"] = calls;
  d["allreduce_bytes"] = bytes;
  py::dict collective_calls, collective_bytes;
  for (const auto& kv : s.collective_calls) collective_calls[py::str(kv.first)] = kv.second;
  for (const auto& kv : s.collective_bytes) collective_bytes[py::str(kv.first)] = kv.second;
  d["collective_calls"] = collective_calls;
  d["collective_bytes"] = collective_bytes;
  d["hosts"] = s.hosts;
  d["hierarchical"] = s.hierarchical;
  d["link_latency_us"] = s.link_latency_us;
  d["link_mbit_per_s"] = s.link_mbit_per_s;
  return d;
}

// The configuration init() reads (ARCREDUCE_* variables and their defaults): what
// DistributedOptimizer needs to pair error feedback with the optimizer (docs/pytorch.md).
py::dict config_dict() {
  const arcreduce::Config c = arcreduce::Config::from_env();
  py::dict d;
  d["compressor"] = c.compressor;
  d["compress_ratio"] = c.compress_ratio;
  d["error_feedback"] = c.error_feedback;
  d["ef_momentum"] = c.ef_momentum;
  d["ef_init"] = c.ef_init;
  d["ef_masking"] = c.ef_masking;
  d["warmup_steps"] = c.warmup_steps;
  return d;
}

}  // namespace
}  // namespace arcreduce_torch

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  using namespace arcreduce_torch;
  py::register_exception<arcreduce::Error>(m, "ArcreduceError", PyExc_RuntimeError);

  m.def(
      "init", [] { arcreduce::init(); }, py::call_guard<py::gil_scoped_release>());
  m.def(
      "shutdown", [] { arcreduce::shutdown(); }, py::call_guard<py::gil_scoped_release>());
  m.def("initialized", &arcreduce::initialized);
  m.def("rank", &arcreduce::rank);
  m.def("size", &arcreduce::size);
  m.def("local_rank", &arcreduce::local_rank);
  m.def("local_size", &arcreduce::local_size);
  m.def("allreduce_async_", &allreduce_async, py::arg("tensor"), py::arg("name"), py::arg("op"),
        py::arg("compressor"), py::arg("ratio"), py::arg("error_feedback"), py::arg("granularity"),
        py::arg("process_set") = 0);
  m.def("broadcast_async_", &broadcast_async, py::arg("tensor"), py::arg("name"),
        py::arg("root_rank"), py::arg("process_set") = 0);
  m.def(
      "refuse",
      [](const std::string& name, const std::string& reason, int process_set) {
        // Already failed locally (the caller raises): only the other ranks are told.
        (void)arcreduce::refuse(name, reason, process_set);
      },
      py::arg("name"), py::arg("reason"), py::arg("process_set") = 0);
  // Process sets: collective calls that may wait for the other ranks release the GIL.
  m.def(
      "add_process_set", [](std::vector<int> ranks) { return arcreduce::add_process_set(ranks); },
      py::call_guard<py::gil_scoped_release>(), py::arg("ranks"));
  m.def(
      "remove_process_set", [](int id) { arcreduce::remove_process_set(id); },
      py::call_guard<py::gil_scoped_release>(), py::arg("process_set"));
  m.def("process_set_ranks", &arcreduce::process_set_ranks, py::arg("process_set"));
  m.def("process_set_rank", &arcreduce::process_set_rank, py::arg("process_set"));
  m.def("process_set_ids", &arcreduce::process_set_ids);
  m.def(
      "join", [] { return arcreduce::join(); }, py::call_guard<py::gil_scoped_release>());
  m.def("poll", &arcreduce::poll, py::arg("handle"));
  m.def("synchronize", &synchronize, py::arg("handle"));
  m.def("shaped_async", &shaped_async, py::arg("tensor"), py::arg("name"), py::arg("kind"),
        py::arg("op"), py::arg("splits"), py::arg("process_set") = 0);
  m.def("synchronize_output", &synchronize_output, py::arg("handle"));
  m.def("held_tensors", [] { return table().size(); });
  m.def(
      "save_state", [](const std::string& path) { arcreduce::save_state(path); },
      py::call_guard<py::gil_scoped_release>(), py::arg("path"));
  m.def(
      "load_state", [](const std::string& path) { arcreduce::load_state(path); },
      py::call_guard<py::gil_scoped_release>(), py::arg("path"));
  m.def("stats", &stats_dict, py::arg("process_set") = 0);
  m.def("config", &config_dict);
  add_ddp_hook(m);
}
