// BrokerUrl: where the Redis broker is and how to log in to it, parsed from
// redis://[user:password@]HOST:PORT[/DB] (rediss:// asks for TLS). A password
// may also come from ADAEXPLORE_BROKER_PASSWORD (and a user from
// ADAEXPLORE_BROKER_USER) so that it stays out of process listings. Only the
// redacted form is ever printed or stored.
#pragma once

#include <string>

#include "common/status.h"

namespace ax::broker {

struct BrokerUrl {
  bool tls = false;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  std::string host;
  int port = 6379;
  int db = 0;
  // redis://HOST:PORT[/DB], with "user:***@" where there are credentials.
  std::string Redacted() const;
};

// `env_password`/`env_user`: the environment's values (empty when unset);
// the URL's own take precedence.
Status ParseBrokerUrl(const std::string& url, const std::string& env_user, const std::string& env_password,
                      BrokerUrl* out);
// The same, reading ADAEXPLORE_BROKER_USER / ADAEXPLORE_BROKER_PASSWORD.
Status ParseBrokerUrlFromEnv(const std::string& url, BrokerUrl* out);

}  // namespace ax::broker
