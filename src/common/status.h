// Status: the result of an operation that can fail, carried across module
// lines instead of exceptions. An error holds a one-line reason for a person.
#pragma once

#include <string>
#include <utility>

namespace ax {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string msg) { return Status(std::move(msg)); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return msg_; }

 private:
  explicit Status(std::string msg) : failed_(true), msg_(std::move(msg)) {}
  bool failed_ = false;
  std::string msg_;
};

}  // namespace ax
