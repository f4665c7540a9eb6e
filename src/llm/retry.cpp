#include "llm/retry.h"

#include <algorithm>
#include <cmath>

namespace ax::llm {

Classification ClassifyHttp(const HttpResponse& r) {
  if (r.shut_down) return {ErrorKind::kShutdown, false};
  if (!r.transport_error.empty() || r.status == 0)
    return {r.timed_out ? ErrorKind::kTimeout : ErrorKind::kConnection, true};
  long s = r.status;
  if (s >= 200 && s < 300) return {ErrorKind::kNone, false};
  if (s == 429) {
    // OpenAI answers 429 both for "slow down" and for "no credit left";
    // only the first gets better by waiting.
    if (r.body.find("insufficient_quota") != std::string::npos) return {ErrorKind::kQuota, false};
    return {ErrorKind::kRateLimited, true};
  }
  if (s == 408) return {ErrorKind::kTimeout, true};
  if (s == 409) return {ErrorKind::kServer, true};  // providers ask to retry conflicts
  if (s >= 500) return {ErrorKind::kServer, true};  // includes Anthropic's 529 overloaded
  if (s == 401 || s == 403) return {ErrorKind::kAuth, false};
  if (s == 404) return {ErrorKind::kNotFound, false};
  return {ErrorKind::kBadRequest, false};
}

double BackoffDelay(const RetryPolicy& p, int failed_attempts, double retry_after_s,
                    std::mt19937_64& rng) {
  if (retry_after_s >= 0) return retry_after_s;
  double base = p.initial_delay_s * std::pow(p.multiplier, std::max(0, failed_attempts - 1));
  base = std::min(base, p.max_delay_s);
  double j = std::clamp(p.jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // Spread the retries of many callers that failed together.
  return base * (1.0 - j * u(rng));
}

}  // namespace ax::llm
