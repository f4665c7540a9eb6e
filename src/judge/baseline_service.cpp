#include "judge/baseline_service.h"

#include <functional>

#include "common/util.h"
#include "judge/timing_request.h"

using nlohmann::json;

namespace ax {

json Baseline::ToJson() const { return {{"median_ms", median_ms}, {"wall_ms", wall_ms}, {"gap_ms", gap_ms}}; }

BaselineService::BaselineService(const PoolConfig& cfg, DeviceIdentity* dev, JudgeCache* cache,
                                 DeviceLock* exec_mu, int workers)
    : cfg_(cfg), dev_(dev), cache_(cache), exec_mu_(exec_mu) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    workers_.push_back(std::make_unique<TrustedWorker>(cfg_, dev_, "baseline"));
  }
}

Status BaselineService::Ensure(const TaskRef& task, const JudgeOptions& o, const std::string& mode, Baseline* out) {
  const std::string torch_version = dev_->env().value("torch", "");
  json keyj = {{"task", task.hash}, {"mode", mode}, {"device", dev_->name()}, {"torch", torch_version},
               {"warmup", o.warmup}, {"iters", o.iters}, {"sets", o.input_sets}, {"flush", o.flush_bytes},
               {"init_seed", o.init_seed}, {"judge", kJudgeRevision}};
  if (o.precision != Precision::kFp32) keyj["precision"] = PrecisionName(o.precision);
  if (o.timing != TimingMode::kHost) keyj["timing"] = TimingModeName(o.timing);
  const std::string key = Sha256Hex(keyj.dump());
  auto cached = [&]() {
    if (!o.use_cache) return false;
    auto hit = cache_->Get("baselines", key);
    if (!hit) return false;
    try {
      json j = json::parse(*hit);
      out->median_ms = j.at("median_ms");
      out->wall_ms = j.at("wall_ms");
      out->gap_ms = j.at("gap_ms");
      return true;
    } catch (...) {
      return false;
    }
  };
  // A cached baseline needs no worker: looked up before waiting for the
  // baseline worker, which another task's torch.compile may hold for long.
  if (cached()) return Status::Ok();
  TrustedWorker* t = workers_[std::hash<std::string>{}(task.hash) % workers_.size()].get();
  std::lock_guard<std::mutex> base(t->mu());
  if (cached()) return Status::Ok();  // measured while this waited
  auto failed = [&](const Reply& r, const char* what) {
    std::string why = r.kind == Reply::kOk ? r.body.value("error", "") : r.detail;
    if (r.kind != Reply::kOk) t->Reset();
    return Status::Error(mode + " baseline failed" + what + ": " + FirstLine(why, 400));
  };
  {
    // torch.compile and its first call share the device; only the timed
    // loop holds it alone.
    std::shared_lock<DeviceLock> shared(*exec_mu_);
    TaskInfo info;
    Status s = t->EnsureTask(task, o, &info);
    if (!s.ok()) return s;
    if (mode != "eager") {
      Reply r = t->Request({{"op", "baseline_prepare"}, {"key", WorkerTaskKey(task.hash, o.precision)}, {"mode", mode}, {"seed", o.init_seed + 17}},
                           o.compile_timeout_s + o.run_timeout_s);
      if (r.kind != Reply::kOk || !r.body.value("ok", false)) return failed(r, " to compile");
    }
  }
  const unsigned long long seed0 = (o.seed ? *o.seed : FreshSeed()) % (1ULL << 40);
  json req = TimingRequestJson(o, seed0, "baseline");
  req["key"] = WorkerTaskKey(task.hash, o.precision);
  req["mode"] = mode;
  Reply r;
  {
    std::lock_guard<DeviceLock> exclusive(*exec_mu_);
    r = t->Request(req, o.compile_timeout_s + o.run_timeout_s);
  }
  if (r.kind != Reply::kOk || !r.body.value("ok", false)) return failed(r, "");
  const TimingReport rep = ReportOfReply(r);
  out->median_ms = ComputeStats(rep.stream_ms).median;
  out->gap_ms = MedianGap(rep);
  out->wall_ms = r.seconds * 1000.0 - r.body.value("compile_s", 0.0) * 1000.0;
  cache_->Put("baselines", key, out->ToJson().dump());
  return Status::Ok();
}

std::map<std::string, Baseline> BaselineService::ForVerdict(const TaskRef& task, const JudgeOptions& o, Verdict* v) {
  std::map<std::string, Baseline> out;
  const double t0 = NowSeconds();
  for (const auto& mode : o.baselines) {
    Baseline b;
    Status s = Ensure(task, o, mode, &b);
    if (s.ok()) {
      out[mode] = b;
      v->baseline_ms[mode] = b.median_ms;
    } else {
      v->AddFlag("baseline_failed:" + mode);
      v->error = s.message();
    }
  }
  v->phases["baselines"] = NowSeconds() - t0;
  return out;
}

}  // namespace ax
