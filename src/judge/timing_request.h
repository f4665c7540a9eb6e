// The timing loop's request and reply, shared by baselines and candidates so
// that both are timed the same way (docs/worker-protocol.md, ops `time` and
// `baseline`), and the judge's source of fresh seeds.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "judge/protocol.h"
#include "judge/timing_rules.h"
#include "judge/worker.h"

namespace ax {

// A fresh random seed below 2^40 (the parent's choice; never the candidate's).
unsigned long long FreshSeed();

// A timing request (op "time" or "baseline") whose input sets and refreshes
// derive from seed0.
nlohmann::json TimingRequestJson(const JudgeOptions& o, unsigned long long seed0, const std::string& op);

// A timing reply as the timing rules read it (the parent's clock included).
TimingReport ReportOfReply(const Reply& r);

}  // namespace ax
