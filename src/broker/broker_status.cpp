#include "broker/broker_status.h"

#include <chrono>
#include <cstdio>

#include "broker/redis_client.h"

using nlohmann::json;

namespace ax::broker {

namespace {
double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

Status GatherStatus(const BrokerUrl& url, const Keys& keys, json* out) {
  RedisClient c(url);
  Status s = c.Connect();
  if (!s.ok()) return s;
  json st = {{"broker", url.Redacted()}, {"workers", json::array()}, {"queues", json::array()}};
  RedisValue info;
  if (c.Command({"INFO", "server"}, &info).ok()) {
    const std::string& t = info.str;
    size_t p = t.find("redis_version:");
    if (p != std::string::npos) st["redis_version"] = t.substr(p + 14, t.find('\r', p) - p - 14);
  }
  RedisValue names;
  if (!(s = c.Command({"SMEMBERS", keys.Workers()}, &names)).ok()) return s;
  const double now = WallNow();
  long long done_minute = 0, in_flight = 0;
  for (const auto& n : names.elements) {
    RedisValue h;
    if (!c.Command({"HGETALL", keys.Worker(n.str)}, &h).ok()) continue;
    if (h.elements.empty()) {
      // Its heartbeat expired: the worker is gone.
      c.Command({"SREM", keys.Workers(), n.str});
      continue;
    }
    json w = {{"name", n.str}};
    for (size_t i = 0; i + 1 < h.elements.size(); i += 2) w[h.elements[i].str] = h.elements[i + 1].str;
    auto num = [&](const char* k) { return w.contains(k) ? std::atof(w[k].get<std::string>().c_str()) : 0.0; };
    w["heartbeat_age_s"] = now - num("heartbeat");
    done_minute += static_cast<long long>(num("done_last_minute"));
    in_flight += static_cast<long long>(num("in_flight"));
    st["workers"].push_back(w);
  }
  // Every job stream: entries still in the stream are waiting or in flight
  // (workers delete what they answered).
  std::string cursor = "0";
  do {
    RedisValue v;
    if (!c.Command({"SCAN", cursor, "MATCH", keys.JobStreamPattern(), "COUNT", "100", "TYPE", "stream"}, &v).ok() ||
        v.elements.size() < 2) {
      break;
    }
    cursor = v.elements[0].str;
    for (const auto& k : v.elements[1].elements) {
      RedisValue len, pending;
      c.Command({"XLEN", k.str}, &len);
      long long pend = 0;
      if (c.Command({"XPENDING", k.str, kGroup}, &pending).ok() && !pending.elements.empty()) {
        pend = pending.elements[0].integer;
      }
      const std::string model = k.str.substr(keys.JobStream("").size());
      st["queues"].push_back({{"model", model}, {"waiting", std::max(0LL, len.integer - pend)}, {"in_flight", pend}});
    }
  } while (cursor != "0");
  st["jobs_in_flight"] = in_flight;
  st["done_last_minute"] = done_minute;
  *out = st;
  return Status::Ok();
}

std::string RenderStatus(const json& st) {
  std::string out = "broker " + st.value("broker", "") +
                    (st.contains("redis_version") ? " (redis " + st["redis_version"].get<std::string>() + ")" : "") + "\n";
  out += "workers: " + std::to_string(st["workers"].size()) + "\n";
  for (const auto& w : st["workers"]) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "  %-24s %-8s model %s, devices %s (%s), host %s, %s/%s slots busy, %s done (%s in the last "
                  "minute), heartbeat %.1f s ago\n",
                  w.value("name", "").c_str(), w.value("state", "").c_str(), w.value("model", "").c_str(),
                  w.value("devices", "").c_str(), w.value("device_names", "").c_str(), w.value("host", "").c_str(),
                  w.value("in_flight", "0").c_str(), w.value("slots", "0").c_str(), w.value("done", "0").c_str(),
                  w.value("done_last_minute", "0").c_str(), w.value("heartbeat_age_s", 0.0));
    out += buf;
  }
  out += "queues:\n";
  if (st["queues"].empty()) out += "  (none)\n";
  for (const auto& q : st["queues"]) {
    out += "  " + q.value("model", "") + ": " + std::to_string(q.value("waiting", 0LL)) + " waiting, " +
           std::to_string(q.value("in_flight", 0LL)) + " in flight\n";
  }
  out += "throughput: " + std::to_string(st.value("done_last_minute", 0LL)) + " jobs in the last minute, " +
         std::to_string(st.value("jobs_in_flight", 0LL)) + " being judged\n";
  return out;
}

}  // namespace ax::broker
