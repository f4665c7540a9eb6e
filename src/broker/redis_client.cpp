#include "broker/redis_client.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <random>

namespace ax::broker {

std::string RedisValue::text() const {
  if (type == kString || type == kStatus) return str;
  if (type == kInteger) return std::to_string(integer);
  return "";
}

double Backoff::Next() {
  static thread_local std::mt19937 rng(std::random_device{}());
  const double base = std::min(cap_s_, 0.1 * static_cast<double>(1 << std::min(attempt_, 10)));
  ++attempt_;
  return base * std::uniform_real_distribution<double>(0.5, 1.0)(rng);
}

namespace {
timeval ToTimeval(double s) {
  timeval tv;
  tv.tv_sec = static_cast<long>(s);
  tv.tv_usec = static_cast<long>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

RedisValue Convert(const redisReply* r) {
  RedisValue v;
  if (!r) return v;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      v.type = RedisValue::kString;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      v.type = RedisValue::kStatus;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      v.type = RedisValue::kError;
      v.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      v.type = RedisValue::kInteger;
      v.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      v.type = RedisValue::kArray;
      for (size_t i = 0; i < r->elements; ++i) v.elements.push_back(Convert(r->element[i]));
      break;
    default:
      v.type = RedisValue::kNil;
  }
  return v;
}

bool IsAuthError(const std::string& msg) {
  return msg.rfind("WRONGPASS", 0) == 0 || msg.rfind("NOAUTH", 0) == 0 ||
         msg.find("invalid password") != std::string::npos || msg.find("invalid username-password") != std::string::npos;
}
}  // namespace

RedisClient::~RedisClient() { Close(); }

void RedisClient::Close() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

Status RedisClient::Fail(StatusCode code, const std::string& what) {
  Close();
  return Status::Error(code, "broker " + url_.Redacted() + " " + what);
}

Status RedisClient::Connect() {
  Close();
  if (url_.tls) {
    return Status::Error(StatusCode::kInvalidInput,
                         "broker " + url_.Redacted() +
                             ": this build's Redis client (hiredis " + std::to_string(HIREDIS_MAJOR) + "." +
                             std::to_string(HIREDIS_MINOR) +
                             ") has no TLS; use redis:// through a TLS tunnel (stunnel, ssh -L) instead");
  }
  ctx_ = redisConnectWithTimeout(url_.host.c_str(), url_.port, ToTimeval(timeout_s_));
  if (!ctx_) return Fail(StatusCode::kUnavailable, "is unreachable: cannot allocate a connection");
  if (ctx_->err) {
    std::string why = ctx_->errstr;
    return Fail(StatusCode::kUnavailable, "is unreachable: " + why);
  }
  redisSetTimeout(ctx_, ToTimeval(timeout_s_));
  if (!url_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!url_.user.empty()) auth.push_back(url_.user);
    auth.push_back(url_.password);
    RedisValue v;
    Status s = Command(auth, &v);
    if (!s.ok()) {
      if (s.code() == StatusCode::kUnavailable) return s;
      Close();
      return Status::Error(StatusCode::kUnauthenticated,
                           "broker " + url_.Redacted() + " refused the authentication (" + s.message() + ")");
    }
  }
  // PING checks that the server needs no login we lack.
  Status s = Command({"PING"});
  if (!s.ok()) {
    if (s.code() == StatusCode::kUnavailable) return s;
    const bool auth = IsAuthError(s.message());
    Close();
    return Status::Error(auth ? StatusCode::kUnauthenticated : StatusCode::kError,
                         "broker " + url_.Redacted() +
                             (auth ? " refused the authentication (" : " answered PING with an error (") +
                             s.message() + ")");
  }
  if (url_.db != 0) {
    s = Command({"SELECT", std::to_string(url_.db)});
    if (!s.ok()) {
      if (s.code() == StatusCode::kUnavailable) return s;
      Close();
      return Status::Error(StatusCode::kInvalidInput,
                           "broker " + url_.Redacted() + " refused database " + std::to_string(url_.db) + " (" +
                               s.message() + ")");
    }
  }
  return Status::Ok();
}

Status RedisClient::Command(const std::vector<std::string>& argv, RedisValue* out, double block_s) {
  if (!ctx_) return Status::Error(StatusCode::kUnavailable, "broker " + url_.Redacted() + " is not connected");
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  if (block_s > 0) redisSetTimeout(ctx_, ToTimeval(timeout_s_ + block_s));
  auto* reply = static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(args.size()), args.data(), lens.data()));
  if (block_s > 0 && ctx_ && !ctx_->err) redisSetTimeout(ctx_, ToTimeval(timeout_s_));
  if (!reply) {
    std::string why = ctx_->err ? ctx_->errstr : "no reply";
    return Fail(StatusCode::kUnavailable, "connection lost: " + why);
  }
  RedisValue v = Convert(reply);
  freeReplyObject(reply);
  if (v.type == RedisValue::kError) {
    const bool auth = IsAuthError(v.str);
    return Status::Error(auth ? StatusCode::kUnauthenticated : StatusCode::kError, v.str);
  }
  if (out) *out = std::move(v);
  return Status::Ok();
}

std::optional<std::string> EntryField(const RedisValue& fields, const std::string& name) {
  for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return fields.elements[i + 1].str;
  }
  return std::nullopt;
}

}  // namespace ax::broker
