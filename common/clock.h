// The runtime's one clock: monotonic, for deadlines, stall checks and step timing.
#pragma once

#include <chrono>

namespace arcreduce {

using Clock = std::chrono::steady_clock;

}  // namespace arcreduce
