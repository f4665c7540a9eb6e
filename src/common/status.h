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
  kNotFound,         // a service does not know what was asked for (an LLM model: HTTP 404)
  kResourceExhausted,// a service's account is out of quota
  kCancelled,        // stopped by the caller's own limit: a budget spent, an interrupt
  kUnsupported,      // a valid input this component cannot handle (a model that cannot be traced)
};

// The code's name, as summaries write it: "ok", "error", "invalid_input",
// "unavailable", "unauthenticated", "deadline_exceeded", "not_found",
// "resource_exhausted", "cancelled", "unsupported".
inline const char* StatusCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kError: return "error";
    case StatusCode::kInvalidInput: return "invalid_input";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kUnsupported: return "unsupported";
  }
  return "error";
}

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
