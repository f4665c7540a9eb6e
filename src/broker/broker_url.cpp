#include "broker/broker_url.h"

#include <cctype>
#include <cstdlib>

namespace ax::broker {

namespace {
// %XX escapes in the user and password (RFC 3986).
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::strtol(s.substr(i + 1, 2).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool Digits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}
}  // namespace

std::string BrokerUrl::Redacted() const {
  std::string s = tls ? "rediss://" : "redis://";
  if (!password.empty() || !user.empty()) s += (user.empty() ? "" : user) + ":***@";
  s += host + ":" + std::to_string(port);
  if (db != 0) s += "/" + std::to_string(db);
  return s;
}

Status ParseBrokerUrl(const std::string& url, const std::string& env_user, const std::string& env_password,
                      BrokerUrl* out) {
  BrokerUrl u;
  // Never echo the URL itself: it may hold a password.
  auto bad = [](const std::string& why) {
    return Status::Error(StatusCode::kInvalidInput, "bad broker URL: " + why +
                                                        " (expected redis://[user:password@]HOST:PORT[/DB])");
  };
  std::string rest;
  if (url.rfind("redis://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("rediss://", 0) == 0) {
    u.tls = true;
    rest = url.substr(9);
  } else {
    return bad("it must start with redis:// or rediss://");
  }
  const size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    const std::string cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string::npos) {
      u.password = Unescape(cred);  // redis://password@host, as redis-cli reads it
    } else {
      u.user = Unescape(cred.substr(0, colon));
      u.password = Unescape(cred.substr(colon + 1));
    }
  }
  std::string hostport = rest;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    const std::string db = rest.substr(slash + 1);
    if (!db.empty()) {
      if (!Digits(db)) return bad("the database must be a number");
      u.db = std::atoi(db.c_str());
    }
  }
  // HOST:PORT, or [IPV6]:PORT.
  const size_t close = hostport.rfind(']');
  const size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && (close == std::string::npos || colon > close) &&
      (hostport.front() == '[' || hostport.find(':') == colon)) {
    const std::string port = hostport.substr(colon + 1);
    if (!Digits(port) || std::atoi(port.c_str()) < 1 || std::atoi(port.c_str()) > 65535) {
      return bad("the port must be a number from 1 to 65535");
    }
    u.port = std::atoi(port.c_str());
    hostport = hostport.substr(0, colon);
  }
  if (hostport.size() > 2 && hostport.front() == '[' && hostport.back() == ']') {
    hostport = hostport.substr(1, hostport.size() - 2);
  }
  if (hostport.empty()) return bad("no host");
  u.host = hostport;
  if (u.user.empty()) u.user = env_user;
  if (u.password.empty()) u.password = env_password;
  *out = u;
  return Status::Ok();
}

Status ParseBrokerUrlFromEnv(const std::string& url, BrokerUrl* out) {
  auto env = [](const char* k) {
    const char* v = getenv(k);
    return std::string(v ? v : "");
  };
  return ParseBrokerUrl(url, env("ADAEXPLORE_BROKER_USER"), env("ADAEXPLORE_BROKER_PASSWORD"), out);
}

}  // namespace ax::broker
