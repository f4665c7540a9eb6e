// JudgeService: the long-lived judge of `adaexplore worker`. It reads jobs
// from its GPU model's stream and from "any" through the consumer group
// "judges", judges them with a local pool (same sandbox, protocol and
// caches as a local run), answers on each job's result stream, and keeps
// its claim on the jobs in hand alive. Jobs whose worker died are claimed
// again once their lease expires (XAUTOCLAIM); a job that has now been
// delivered more than `max_deliveries` times is answered `crashed` instead
// of being judged again. Exactly one result per job: the first worker to
// set the job's done-marker publishes it.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "broker/broker_url.h"
#include "broker/keys.h"
#include "common/status.h"
#include "judge/judge.h"

namespace ax::broker {

struct ServiceConfig {
  BrokerUrl url;
  Keys keys;
  std::string name;                  // consumer name (unique per worker)
  std::string model;                 // the devices' GPU model slug ("cpu" on the CPU)
  std::string device_request;        // what jobs ask the local pool for ("cuda:0", "cuda", "cpu")
  std::vector<std::string> devices;  // for the heartbeat
  std::vector<std::string> device_names;
  int slots = 2;                     // jobs judged at once
  double lease_s = 30;               // a job whose worker went silent this long is claimed again
  int max_deliveries = 2;            // workers a job may take down before it is answered `crashed`
  size_t max_job_bytes = 16u << 20;
  double heartbeat_s = 2;
  std::function<void(const std::string&)> log;  // one line per event
};

// Runs until *stop (SIGTERM: the jobs in hand finish first). kUnauthenticated
// or kInvalidInput when the broker refuses the login or the setup; a broker
// that goes away is waited for (reconnects with back-off).
Status RunJudgeService(const ServiceConfig& cfg, Judge* pool, const std::atomic<bool>* stop);

}  // namespace ax::broker
