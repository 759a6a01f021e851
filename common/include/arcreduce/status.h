// One error vocabulary for the whole runtime (docs/errors.md).
// Status travels to callbacks and synchronize(); Error is thrown only on the caller's thread by
// calls that cannot return a Status (init, rank, size, bad arguments to synchronous helpers).
#pragma once

#include <exception>
#include <string>

namespace arcreduce {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad tensor, name, option or configuration value
  kMismatch,         // ranks submitted the same name with different shape/dtype/op/compression
  kDuplicateName,    // the name is already in flight on this rank
  kShutdown,         // the runtime was shut down (or never initialised) before the op ran
  kStalled,          // stall inspector gave up waiting for some ranks
  kInternal,         // MPI/system failure or a bug
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  std::string message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* status_code_name(StatusCode code);

class Error : public std::exception {
 public:
  explicit Error(std::string message, StatusCode code = StatusCode::kInvalidArgument)
      : message_(std::move(message)), code_(code) {}
  const char* what() const noexcept override { return message_.c_str(); }
  StatusCode code() const noexcept { return code_; }

 private:
  std::string message_;
  StatusCode code_;
};

}  // namespace arcreduce
