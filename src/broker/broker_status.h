// What `adaexplore judge-status` shows: the broker's workers (devices, state,
// last heartbeat, jobs in hand and done), each job stream's depth (waiting
// and in flight), and the throughput of the last minute. Gathered into plain
// JSON; the text form is rendered from it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "broker/broker_url.h"
#include "broker/keys.h"
#include "common/status.h"

namespace ax::broker {

Status GatherStatus(const BrokerUrl& url, const Keys& keys, nlohmann::json* out);
std::string RenderStatus(const nlohmann::json& status);

}  // namespace ax::broker
