// Status: the result of an operation that can fail, carried across module
// lines instead of exceptions. An error holds a code that callers decide on
// (an exit code, a retry) and a one-line reason for a person.
#pragma once

#include <string>
#include <utility>

namespace ax {

enum class StatusCode {
  kOk = 0,
  kError,            // anything not classified below
  kInvalidInput,     // the request or its input is at fault
  kUnavailable,      // a service (the broker) cannot be reached now; retrying may help
  kUnauthenticated,  // a service refused the credentials
  kDeadlineExceeded, // a service stayed unreachable past its deadline
};

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string msg) { return Status(StatusCode::kError, std::move(msg)); }
  static Status Error(StatusCode code, std::string msg) { return Status(code, std::move(msg)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }

 private:
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};

}  // namespace ax
