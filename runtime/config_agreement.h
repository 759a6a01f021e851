// Start-up agreement on the configuration (collective over `comm`).
#pragma once

#include <string>

#include "arcreduce/config.h"
#include "ops/communicator.h"

namespace arcreduce {

// Every rank passes its parsed Config, or nullptr and the Error message it got. Throws the same
// Error on every rank if any rank failed or if a must-match setting differs across ranks; the
// message names the first failing rank, the variable and the values.
void agree_on_config(Communicator& comm, const Config* config, const std::string& local_error);

}  // namespace arcreduce
