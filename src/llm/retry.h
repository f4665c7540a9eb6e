// Retry policy: which failures are worth another attempt, and how long to
// wait before it (exponential back-off with jitter, or what the server asked
// for in Retry-After).
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "llm/client.h"
#include "llm/http_loop.h"

namespace ax::llm {

struct RetryPolicy {
  int max_attempts = 6;          // attempts in all, the first included
  double initial_delay_s = 1.0;  // wait before the second attempt
  double multiplier = 2.0;
  double max_delay_s = 60.0;
  double jitter = 0.5;           // fraction of the delay drawn at random
  double max_retry_after_s = 300;  // a longer Retry-After gives up at once
};

struct Classification {
  ErrorKind kind = ErrorKind::kNone;
  bool retryable = false;
};

// What an HTTP outcome means, before the body is parsed. `body` is looked at
// only to tell a quota error from a plain 429.
Classification ClassifyHttp(const HttpResponse& r);

// Seconds to wait after `failed_attempts` failures (1 for the first). A
// non-negative retry_after_s is honoured as given.
double BackoffDelay(const RetryPolicy& p, int failed_attempts, double retry_after_s,
                    std::mt19937_64& rng);

}  // namespace ax::llm
