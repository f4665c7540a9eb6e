#include "judge/timing_request.h"

#include <unistd.h>

#include <random>

using nlohmann::json;

namespace ax {

unsigned long long FreshSeed() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32));
  return rng() % (1ULL << 40);
}

json TimingRequestJson(const JudgeOptions& o, unsigned long long seed0, const std::string& op) {
  json sets = json::array();
  for (int i = 0; i < o.input_sets; ++i) sets.push_back(seed0 + 1000 + i);
  json req = {{"op", op},
              {"set_seeds", sets},
              {"refresh_seed0", seed0 + 5000},
              {"warmup", o.warmup},
              {"iters", o.iters},
              {"flush_bytes", o.flush_bytes}};
  if (o.timing != TimingMode::kHost) req["timing"] = TimingModeName(o.timing);
  return req;
}

TimingReport ReportOfReply(const Reply& r) {
  TimingReport rep;
  auto fill = [&](const char* key, std::vector<double>* out) {
    for (auto& x : r.body.value(key, json::array())) out->push_back(x.is_number() ? x.get<double>() : 0.0);
  };
  fill("stream_ms", &rep.stream_ms);
  fill("device_ms", &rep.device_ms);
  fill("host_ms", &rep.host_ms);
  fill("spin_ms", &rep.spin_ms);
  rep.request_ms = r.seconds * 1000.0;
  return rep;
}

}  // namespace ax
