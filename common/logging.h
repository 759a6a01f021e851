// Per-runtime spdlog logger writing to stderr with a rank prefix. Loggers are not registered
// globally, so several runtimes (loopback tests) can live in one process.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace arcreduce {

using Logger = std::shared_ptr<spdlog::logger>;

// `level` is one of trace, debug, info, warning, error (validated by Config).
Logger make_logger(int rank, const std::string& level);

}  // namespace arcreduce
