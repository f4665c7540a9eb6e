// RedisClient: one connection to the broker (hiredis, synchronous), with
// login, database selection and replies converted to plain values. A lost
// connection is reported as StatusCode::kUnavailable and re-made by the next
// Reconnect(); a refused login is kUnauthenticated. Not thread-safe: each
// thread that talks to the broker holds its own client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker_url.h"
#include "common/status.h"

struct redisContext;

namespace ax::broker {

// A reply, as plain data.
struct RedisValue {
  enum Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = kNil;
  std::string str;        // kString, kStatus, kError
  long long integer = 0;  // kInteger
  std::vector<RedisValue> elements;  // kArray

  bool nil() const { return type == kNil; }
  // The string of a kString/kStatus, or of a kInteger as text; "" otherwise.
  std::string text() const;
};

// Exponential back-off with jitter for reconnects: 0.1 s doubling to `cap_s`.
class Backoff {
 public:
  explicit Backoff(double cap_s = 5.0) : cap_s_(cap_s) {}
  double Next();  // the next pause, seconds
  void Reset() { attempt_ = 0; }

 private:
  double cap_s_;
  int attempt_ = 0;
};

class RedisClient {
 public:
  explicit RedisClient(BrokerUrl url, double timeout_s = 5.0) : url_(std::move(url)), timeout_s_(timeout_s) {}
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Connects (again) and logs in. kUnavailable: cannot reach it;
  // kUnauthenticated: the password (or user) was refused; kInvalidInput:
  // TLS asked of a build without it.
  Status Connect();
  bool connected() const { return ctx_ != nullptr; }
  void Close();

  // One command. A server error reply is a Status error (code kError) with
  // the server's message; a broken connection closes the client (kUnavailable).
  // `block_s`: how long the command may block on the server (XREAD BLOCK).
  Status Command(const std::vector<std::string>& argv, RedisValue* out = nullptr, double block_s = 0);

  const BrokerUrl& url() const { return url_; }

 private:
  Status Fail(StatusCode code, const std::string& what);

  BrokerUrl url_;
  double timeout_s_;
  redisContext* ctx_ = nullptr;
};

// Field-value pairs of a stream entry ([f1, v1, f2, v2, ...]) by field.
std::optional<std::string> EntryField(const RedisValue& fields, const std::string& name);

}  // namespace ax::broker
