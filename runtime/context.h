// Context: what every part of one runtime instance shares — the communicator the coordinator
// owns, the validated configuration and the logger. Passed explicitly; no globals.
#pragma once

#include <functional>
#include <memory>

#include "arcreduce/config.h"
#include "common/logging.h"
#include "ops/communicator.h"

namespace arcreduce {

class DeviceExecutor;

struct Context {
  Config config;
  std::unique_ptr<Communicator> comm;  // used only by the coordinator thread after start-up
  Logger log;
  int rank = 0;
  int size = 1;
  // Builds the executor of CUDA buckets; unset: make_device_executor() (none without CUDA).
  // Tests substitute a fake to drive the coordinator's deferred completion of device buckets.
  std::function<std::unique_ptr<DeviceExecutor>(Context&)> device_executor_factory;
};

}  // namespace arcreduce
