// RemoteJudge: the Judge interface over a Redis Streams broker. Each request
// becomes a job on the stream of the GPU model it asks for ("any" by
// default); `adaexplore worker` processes judge it and answer on this
// client's own result stream. Exactly one result per job reaches the caller.
//
// A broker that goes away is reconnected with back-off; jobs that the broker
// lost meanwhile are sent again. One that stays unreachable past the deadline
// fails every pending and later request with StatusCode::kDeadlineExceeded,
// so that a run stops cleanly (and --resume continues it).
#pragma once

#include <memory>
#include <string>

#include "broker/broker_url.h"
#include "broker/keys.h"
#include "common/status.h"
#include "judge/judge.h"

namespace ax::broker {

struct RemoteConfig {
  BrokerUrl url;
  Keys keys;
  std::string model = kAnyModel;  // the job stream: a GPU model's slug ("nvidia-h200", "cpu") or "any"
  double deadline_s = 120;        // how long the broker may stay unreachable
  double warn_idle_s = 30;        // a warning when jobs wait this long and no worker serves the model
};

// Connects and logs in first: an unreachable broker or a refused password is
// an error here (kUnavailable, kUnauthenticated), before any job is sent.
Status MakeRemoteJudge(const RemoteConfig& cfg, std::unique_ptr<Judge>* out);

}  // namespace ax::broker
