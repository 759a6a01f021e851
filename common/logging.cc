#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace arcreduce {
namespace {
spdlog::level::level_enum parse_level(const std::string& level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "error") return spdlog::level::err;
  return spdlog::level::warn;
}
}  // namespace

Logger make_logger(int rank, const std::string& level) {
  // One sink per logger: a sink carries its logger's pattern (the rank prefix).
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("arcreduce", sink);
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [arcreduce rank " + std::to_string(rank) +
                      "] [%l] %v");
  logger->set_level(parse_level(level));
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace arcreduce
