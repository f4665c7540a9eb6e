// RedisCache: the judge's SharedCache in the broker (one hash per table), so
// that workers on different hosts reuse each other's verdicts and baselines
// (keys already name the GPU model and versions). A broker that does not
// answer makes every lookup a miss for a few seconds; it never fails a judge.
#pragma once

#include <memory>
#include <mutex>

#include "broker/keys.h"
#include "broker/redis_client.h"
#include "judge/judge_cache.h"

namespace ax::broker {

class RedisCache : public SharedCache {
 public:
  RedisCache(BrokerUrl url, Keys keys) : client_(std::move(url), 2.0), keys_(std::move(keys)) {}
  std::optional<std::string> Get(const std::string& table, const std::string& key) override;
  void Put(const std::string& table, const std::string& key, const std::string& value) override;

 private:
  bool Ready();  // requires mu_

  std::mutex mu_;
  RedisClient client_;
  Keys keys_;
  double retry_after_ = 0;
};

}  // namespace ax::broker
