#include "judge/trusted_worker.h"

#include "common/util.h"
#include "judge/worker_launch.h"

using nlohmann::json;

namespace ax {

TrustedWorker::TrustedWorker(const PoolConfig& cfg, DeviceIdentity* dev, std::string name)
    : cfg_(cfg), dev_(dev), name_(std::move(name)) {}

TrustedWorker::~TrustedWorker() {
  if (w_) w_->Kill();
}

void TrustedWorker::Reset() {
  w_.reset();
  tasks_.clear();
}

Status TrustedWorker::Ensure() {
  if (w_ && w_->alive()) return Status::Ok();
  tasks_.clear();
  if (scratch_.empty()) scratch_ = MakeTempDir(cfg_.scratch_root, name_ + "-");
  WorkerConfig wc = JudgeWorkerConfig(cfg_, dev_->device(), kRoleTrusted);
  wc.scratch = scratch_;
  std::string error;
  w_ = StartJudgeWorker(wc, cfg_.worker_start_timeout_s, &error);
  if (!w_) return Status::Error(error);
  Reply r = w_->Request({{"op", "hello"}, {"device", dev_->device()}}, 120);
  if (r.kind != Reply::kOk) return Status::Error(name_ + " worker failed: " + r.detail);
  dev_->SetEnvOnce(r.body);
  if (!dev_->cpu() && !r.body.value("cuda_available", false)) {
    return Status::Error("no CUDA device visible to the judge for " + dev_->device());
  }
  const int64_t total = r.body.value("memory_total", int64_t{0});
  if (!dev_->cpu() && total > 0 && dev_->mem.budget() == 0) dev_->mem.SetBudget(total / 10 * 8);
  return Status::Ok();
}

Reply TrustedWorker::Request(const json& req, double timeout_s) {
  Reply r = w_->Request(req, timeout_s);
  if (r.kind != Reply::kOk) tasks_.clear();
  return r;
}

Status TrustedWorker::Facts(double timeout_s, DeviceFacts* out) {
  if (auto known = dev_->facts()) {
    *out = *known;
    return Status::Ok();
  }
  Status s = Ensure();
  if (!s.ok()) return s;
  Reply r = Request({{"op", "device_facts"}, {"device", dev_->local()}}, timeout_s);
  if (r.kind != Reply::kOk) return Status::Error("measuring the device: the reference worker " + r.detail);
  if (!r.body.value("ok", false)) return Status::Error(r.body.value("error", "measuring the device failed"));
  DeviceFacts f;
  if (!DeviceFacts::FromJson(r.body.value("facts", json()), &f)) return Status::Error("measuring the device: no facts");
  dev_->SetFacts(f);
  *out = f;
  return Status::Ok();
}

Status TrustedWorker::EnsureTask(const TaskRef& task, const JudgeOptions& opts, TaskInfo* info) {
  Status s = Ensure();
  if (!s.ok()) return s;
  const std::string key = WorkerTaskKey(task.hash, opts.precision) + ":" + opts.tolerance;
  auto it = tasks_.find(key);
  if (it != tasks_.end()) {
    *info = it->second;
    return Status::Ok();
  }
  Tolerance tol;
  s = LookupTolerance(opts.tolerance, &tol);
  if (!s.ok()) return s;
  const std::string path = scratch_ + "/task_" + task.hash.substr(0, 16) + ".py";
  if (!WriteFile(path, task.source)) return Status::Error("cannot write " + path);
  Reply r = Request({{"op", "load_task"}, {"key", WorkerTaskKey(task.hash, opts.precision)}, {"task", path},
                     {"device", dev_->local()}, {"precision", PrecisionName(opts.precision)},
                     {"init_seed", opts.init_seed}, {"probe_seeds", {101, 202}},
                     {"tolerance", tol.ToWorkerJson()}},
                    opts.compile_timeout_s);
  TaskInfo ti;
  if (r.kind != Reply::kOk) {
    ti.error = "the reference " + std::string(r.kind == Reply::kTimeout ? "timed out" : "worker died") + " (" +
               r.detail + ") " + FirstLine(TailOf(w_->OutputTail(), 500));
    w_.reset();
  } else if (!r.body.value("ok", false)) {
    ti.error = r.body.value("error", "task failed");
  } else {
    ti.ok = true;
    ti.degenerate = r.body.value("degenerate", std::vector<std::string>{});
    ti.outputs_json = r.body.value("outputs", json::array()).dump();
    ti.footprint_bytes = r.body.value("footprint_bytes", int64_t{0});
    ti.call_ms = r.body.value("call_ms", 0.0);
    if (r.body.contains("flops") && r.body["flops"].is_number()) ti.flops = r.body["flops"].get<double>();
    ti.min_bytes = r.body.value("min_bytes", int64_t{0});
    tasks_[key] = ti;
  }
  *info = ti;
  if (!ti.ok) return Status::Error(task.name + ": " + ti.error);
  return Status::Ok();
}

}  // namespace ax
