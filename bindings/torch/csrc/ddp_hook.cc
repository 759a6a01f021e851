#include "ddp_hook.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <pybind11/stl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "arcreduce/arcreduce.h"
#include "tensor_view.h"

namespace arcreduce_torch {
namespace {

namespace py = pybind11;

// One bucket's exchange: shared by the completion callbacks of its ops. The last callback to
// run (on the coordinator thread, or on the submitting thread for an op refused at once)
// completes the Future with the bucket's buffer, or with the first op's error. DDP's Python hook
// interface takes a Future whose value is a Python object, so the buffer's Python object is made
// at submission (under the GIL) and completing the Future only copies a reference: a CPU Future
// extracts no storages, so nothing on the coordinator thread needs the GIL. The views are made
// here from the buffer, without Python objects, so dropping them needs no GIL either.
struct BucketExchange {
  BucketExchange(c10::IValue v, size_t n)
      : value(std::move(v)),
        remaining(n),
        future(c10::make_intrusive<c10::ivalue::Future>(c10::PyObjectType::get())) {}

  void done(const arcreduce::Status& status) {
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(mutex);
      if (error.empty()) error = status.message();
    }
    if (remaining.fetch_sub(1) != 1) return;
    finish();
  }

  // Runs once, in the last op's callback, where no lock of the runtime is held. The Future and
  // the buffer's Python object leave this state here: if they are the last references (DDP has
  // already dropped the Future), their destructors take the GIL now, never later where the
  // runtime may hold a lock that a thread holding the GIL waits for (a submission).
  void finish() {
    std::string message;
    {
      std::lock_guard<std::mutex> lock(mutex);
      message = error;
    }
    c10::intrusive_ptr<c10::ivalue::Future> completed = std::move(future);
    c10::IValue result = std::move(value);
    if (message.empty()) {
      completed->markCompleted(std::move(result));
    } else {
      completed->setError(std::make_exception_ptr(
          std::runtime_error("arcreduce DDP communication hook: " + message)));
    }
  }

  c10::IValue value;              // the buffer as a Python object, until finish()
  std::vector<at::Tensor> views;  // kept alive until every op has completed (no Python objects)
  std::atomic<size_t> remaining;
  std::mutex mutex;
  std::string error;                               // the first op's error message
  c10::intrusive_ptr<c10::ivalue::Future> future;  // until finish()
};

// The runtime releases what it holds back for a fuller round (a step's compressed tensors, small
// dense ones: docs/configuration.md, ARCREDUCE_BATCH_COMPRESSED, ARCREDUCE_MIN_BUCKET_BYTES)
// when a user blocks on an op in synchronize(), as DistributedOptimizer's step() does. DDP waits
// on the Future instead, which the runtime cannot see; so after a backward's last bucket a thread
// of this module blocks in synchronize() on that bucket's ops, saying that DDP is about to wait
// (two DDP models trained in turn each expect the other's names as part of the step, and would
// otherwise wait for them until the hold's limit, which grows with every step). It completes
// nothing: the callbacks complete the Future.
class LastBucketWaiter {
 public:
  static LastBucketWaiter& instance() {
    static LastBucketWaiter* waiter = new LastBucketWaiter();  // never destroyed, like its thread
    return *waiter;
  }

  void wait_for(std::vector<arcreduce::Handle> handles) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(handles));
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::vector<arcreduce::Handle> handles;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return !pending_.empty(); });
        handles = std::move(pending_.front());
        pending_.pop_front();
      }
      for (arcreduce::Handle h : handles) (void)arcreduce::synchronize(h);
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::vector<arcreduce::Handle>> pending_;
  bool started_ = false;
};

// Submits one allreduce per parameter of a DDP bucket: `names[i]` reduces the view of `buffer`
// at `offsets[i]` (in elements) with shape `shapes[i]`, in place. Returns the torch.futures.Future
// DDP waits on; it holds `buffer` once every op has completed. Everything is checked before the
// first op is submitted, so a refusal leaves nothing in flight.
std::shared_ptr<torch::jit::PythonFutureWrapper> bucket_allreduce_async(
    const at::Tensor& buffer, const std::vector<std::string>& names,
    const std::vector<int64_t>& offsets, const std::vector<std::vector<int64_t>>& shapes, int op,
    std::optional<std::string> compressor, std::optional<double> ratio,
    std::optional<std::string> error_feedback, std::optional<std::string> granularity,
    int process_set, bool last) {
  if (names.size() != offsets.size() || names.size() != shapes.size())
    throw py::value_error("bucket_allreduce_async: names, offsets and shapes differ in length");
  const std::string who = names.empty() ? std::string("bucket") : names.front();
  if (!buffer.defined() || buffer.dim() != 1)
    throw py::value_error("the DDP bucket of '" + who + "' is not a flat (1-D) tensor");
  (void)view_of(buffer, who, Use::kAllreduce);  // dtype, layout, device, contiguity
  c10::IValue value = torch::jit::toIValue(py::cast(buffer), c10::PyObjectType::get());
  auto exchange = std::make_shared<BucketExchange>(std::move(value), names.size());
  std::vector<arcreduce::Tensor> tensors;
  tensors.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : shapes[i]) n *= d;
    if (offsets[i] < 0 || n < 0 || offsets[i] + n > buffer.numel())
      throw py::value_error("gradient '" + names[i] + "' lies outside its DDP bucket");
    at::Tensor view = buffer.narrow(0, offsets[i], n).view(shapes[i]);
    tensors.push_back(view_of(view, names[i], Use::kAllreduce));
    exchange->views.push_back(std::move(view));
  }
  auto wrapper = std::make_shared<torch::jit::PythonFutureWrapper>(exchange->future);
  if (names.empty()) {
    exchange->finish();
    return wrapper;
  }
  std::vector<arcreduce::Handle> handles;
  for (size_t i = 0; i < names.size(); ++i) {
    arcreduce::AllreduceOptions options;
    options.process_set = process_set;
    options.op = static_cast<arcreduce::ReduceOp>(op);  // checked by the runtime
    options.compression.compressor = compressor;
    options.compression.ratio = ratio;
    options.compression.error_feedback = error_feedback;
    options.compression.granularity = granularity;
    options.callback = [exchange](const arcreduce::Status& status) { exchange->done(status); };
    // Never throws; a refused op completes at once with its error (callback included).
    handles.push_back(arcreduce::allreduce_async(names[i], tensors[i], std::move(options)));
  }
  if (last) LastBucketWaiter::instance().wait_for(std::move(handles));
  return wrapper;
}

}  // namespace

void add_ddp_hook(py::module_& m) {
  m.def("bucket_allreduce_async", &bucket_allreduce_async, py::arg("buffer"), py::arg("names"),
        py::arg("offsets"), py::arg("shapes"), py::arg("op"), py::arg("compressor"),
        py::arg("ratio"), py::arg("error_feedback"), py::arg("granularity"),
        py::arg("process_set") = 0, py::arg("last") = false);
}

}  // namespace arcreduce_torch
