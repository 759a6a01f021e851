// Context: what every part of one runtime instance shares — the communicator the coordinator
// owns, the validated configuration and the logger. Passed explicitly; no globals.
#pragma once

#include <memory>

#include "arcreduce/config.h"
#include "ops/communicator.h"
#include "runtime/logging.h"

namespace arcreduce {

struct Context {
  Config config;
  std::unique_ptr<Communicator> comm;  // used only by the coordinator thread after start-up
  Logger log;
  int rank = 0;
  int size = 1;
};

}  // namespace arcreduce
