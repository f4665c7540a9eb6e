#include "broker/redis_cache.h"

#include "common/util.h"

namespace ax::broker {

bool RedisCache::Ready() {
  if (client_.connected()) return true;
  if (NowSeconds() < retry_after_) return false;
  if (client_.Connect().ok()) return true;
  retry_after_ = NowSeconds() + 5;
  return false;
}

std::optional<std::string> RedisCache::Get(const std::string& table, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Ready()) return std::nullopt;
  RedisValue v;
  if (!client_.Command({"HGET", keys_.Cache(table), key}, &v).ok() || v.type != RedisValue::kString) {
    return std::nullopt;
  }
  return v.str;
}

void RedisCache::Put(const std::string& table, const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Ready()) return;
  client_.Command({"HSET", keys_.Cache(table), key, value});
}

}  // namespace ax::broker
