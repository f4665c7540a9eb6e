// The local judge pool: one DeviceContext per device, each with its own queue
// and job threads; candidates that name no device go to the least-loaded
// device with room (placement.h). The protocol itself is candidate_run.cpp.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <random>
#include <thread>

#include "common/util.h"
#include "judge/candidate_run.h"
#include "judge/device_context.h"
#include "judge/judge.h"
#include "judge/judge_cache.h"
#include "judge/placement.h"
#include "common/install_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ax {

PoolConfig DefaultPoolConfig() {
  PoolConfig c;
  auto env = [](const char* k, const std::string& dflt) {
    const char* v = getenv(k);
    return (v && *v) ? std::string(v) : dflt;
  };
  std::string venv_python = SourceDir() + "/.venv/bin/python";
  c.python = env("ADAEXPLORE_PYTHON", access(venv_python.c_str(), X_OK) == 0 ? venv_python : "python3");
  c.worker_dir = WorkerDir();
  std::string home = env("HOME", "/tmp");
  c.cache_dir = env("ADAEXPLORE_CACHE_DIR", env("XDG_CACHE_HOME", home + "/.cache") + "/adaexplore");
  std::string shm_ok = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : env("TMPDIR", "/tmp");
  c.scratch_root = env("ADAEXPLORE_SCRATCH", shm_ok) + "/adaexplore-" + std::to_string(getpid());
  return c;
}

namespace {

// One device of the pool: what runs there, and its queue of candidates.
struct DeviceSlot {
  DeviceSlot(const PoolConfig& cfg, const std::string& device, int workers, JudgeCache* cache,
             const std::atomic<bool>* stop)
      : ctx(cfg, device, workers, cache, stop), workers(workers) {}
  DeviceContext ctx;
  const int workers;
  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<std::pair<EvalRequest, std::promise<EvalResult>>> jobs;
  std::atomic<int> in_flight{0};  // queued or being judged
  std::vector<std::thread> threads;
};

class JudgePool : public Judge {
 public:
  explicit JudgePool(PoolConfig cfg) : cfg_(std::move(cfg)), cache_(cfg_.cache_dir + "/judge.sqlite") {
    std::error_code ec;
    fs::create_directories(cfg_.scratch_root, ec);
    fs::create_directories(cfg_.cache_dir + "/triton", ec);
    fs::create_directories(cfg_.cache_dir + "/torch_extensions", ec);
    fs::create_directories(cfg_.cache_dir + "/inductor", ec);
    if (cfg_.shared_cache) cache_.SetShared(cfg_.shared_cache);
    const int workers = std::max(1, cfg_.workers_per_device);
    for (const auto& d : cfg_.devices) {
      devices_.push_back(std::make_unique<DeviceSlot>(cfg_, d, workers, &cache_, &stop_));
    }
    for (auto& s : devices_) {
      DeviceSlot* slot = s.get();
      slot->ctx.warm.Start();
      for (int i = 0; i < slot->workers; ++i) slot->threads.emplace_back([this, slot] { JobLoop(slot); });
    }
  }

  ~JudgePool() override {
    stop_ = true;
    for (auto& s : devices_) {
      // Taking the mutex once after setting stop_ closes the gap between a
      // waiter's check of its predicate and its wait: without it a thread
      // that had just found stop_ false misses this notify and waits forever.
      { std::lock_guard<std::mutex> lock(s->jobs_mu); }
      s->jobs_cv.notify_all();
    }
    for (auto& s : devices_) {
      for (auto& t : s->threads) t.join();
      s->ctx.warm.Stop();
    }
    devices_.clear();  // kills the trusted workers before their scratch goes
    RemoveTree(cfg_.scratch_root);
  }

  std::future<EvalResult> Submit(EvalRequest req) override {
    std::promise<EvalResult> p;
    auto fut = p.get_future();
    DeviceSlot* slot = Place(req.options.device, req.task.hash, req.options);
    if (!slot) {
      EvalResult r;
      r.status = Status::Error("device " + req.options.device + " is not in this judge pool");
      p.set_value(std::move(r));
      return fut;
    }
    ++slot->in_flight;
    {
      std::lock_guard<std::mutex> lock(slot->jobs_mu);
      slot->jobs.emplace_back(std::move(req), std::move(p));
    }
    slot->jobs_cv.notify_one();
    return fut;
  }

  Status CheckTask(const TaskRef& task, const JudgeOptions& opts, TaskInfo* info) override {
    DeviceSlot* slot = Place(opts.device, task.hash, opts);
    if (!slot) return Status::Error("device " + opts.device + " is not in this judge pool");
    DeviceContext& d = slot->ctx;
    std::shared_lock<DeviceLock> exec(d.exec_mu);
    std::lock_guard<std::mutex> ref(d.ref.mu());
    Status s = d.ref.EnsureTask(task, opts, info);
    if (s.ok()) NoteFootprint(task.hash, info->footprint_bytes);
    return s;
  }

  Status Trace(const TaskRef& task, const JudgeOptions& opts, json* graph) override {
    DeviceSlot* slot = Place(opts.device, task.hash, opts);
    if (!slot) return Status::Error("device " + opts.device + " is not in this judge pool");
    DeviceContext& d = slot->ctx;
    JudgeOptions o = opts.Resolved();
    std::shared_lock<DeviceLock> exec(d.exec_mu);
    std::lock_guard<std::mutex> ref(d.ref.mu());
    TaskInfo info;
    Status s = d.ref.EnsureTask(task, o, &info);
    if (!s.ok()) return s;
    Reply r = d.ref.Request({{"op", "trace"}, {"key", WorkerTaskKey(task.hash, o.precision)}, {"seed", o.init_seed}}, o.compile_timeout_s);
    if (r.kind != Reply::kOk) {
      std::string why = "the reference " + std::string(r.kind == Reply::kTimeout ? "timed out" : "worker died") +
                        " while tracing (" + r.detail + ")";
      d.ref.Reset();
      return Status::Error(why);
    }
    if (!r.body.value("ok", false)) {
      // The model ran but cannot be traced: a property of the task, not a failure of the judge.
      const StatusCode code = r.body.value("untraceable", false) ? StatusCode::kUnsupported : StatusCode::kError;
      return Status::Error(code, r.body.value("error", "cannot trace: unknown reason"));
    }
    *graph = r.body.value("graph", json::object());
    return Status::Ok();
  }

  int Devices() const override { return static_cast<int>(devices_.size()); }

  Status Facts(const JudgeOptions& opts, DeviceFacts* out) override {
    DeviceSlot* slot = nullptr;
    for (auto& s : devices_) {
      if (s->ctx.id.device() == opts.device) slot = s.get();
    }
    if (!slot && (opts.device == "cuda" || opts.device == "any") && !devices_.empty()) slot = devices_.front().get();
    if (!slot) return Status::Error("device " + opts.device + " is not in this judge pool");
    DeviceContext& d = slot->ctx;
    if (auto known = d.id.facts()) {
      *out = *known;
      return Status::Ok();
    }
    // Measured with the device held alone, as timing is.
    std::lock_guard<DeviceLock> exec(d.exec_mu);
    std::lock_guard<std::mutex> ref(d.ref.mu());
    return d.ref.Facts(opts.Resolved().run_timeout_s, out);
  }

  Status DeviceNames(std::vector<std::string>* names) override {
    names->clear();
    for (auto& s : devices_) {
      std::lock_guard<std::mutex> ref(s->ctx.ref.mu());
      Status st = s->ctx.ref.Ensure();
      if (!st.ok()) return st;
      names->push_back(s->ctx.id.name());
    }
    return Status::Ok();
  }

 private:
  // The device a request names, or for "cuda" (any GPU of the pool) and
  // "any" the least-loaded device with room for the task's footprint.
  DeviceSlot* Place(const std::string& want, const std::string& task_hash, const JudgeOptions& o) {
    std::vector<DeviceSlot*> eligible;
    for (auto& s : devices_) {
      const std::string& d = s->ctx.id.device();
      if (d == want) return s.get();
      if (want == "any" || want.empty() || (want == "cuda" && d.rfind("cuda", 0) == 0)) eligible.push_back(s.get());
    }
    if (eligible.empty()) return nullptr;
    if (eligible.size() == 1) return eligible[0];
    int64_t estimate = 0;
    {
      std::lock_guard<std::mutex> lock(footprint_mu_);
      auto it = footprints_.find(task_hash);
      const int sets = o.input_sets > 0 ? o.input_sets : 3;
      if (it != footprints_.end()) estimate = it->second * (sets + 4) + (int64_t{1} << 30);
    }
    std::vector<DeviceLoad> loads;
    for (DeviceSlot* s : eligible) {
      const MemGate& g = s->ctx.id.mem;
      loads.push_back({s->in_flight.load(), g.budget(), g.reserved(), g.holders()});
    }
    return eligible[PickDevice(loads, estimate)];
  }

  void NoteFootprint(const std::string& task_hash, int64_t bytes) {
    if (bytes <= 0) return;
    std::lock_guard<std::mutex> lock(footprint_mu_);
    footprints_[task_hash] = bytes;
  }

  void JobLoop(DeviceSlot* slot) {
    while (true) {
      std::pair<EvalRequest, std::promise<EvalResult>> job;
      {
        std::unique_lock<std::mutex> lock(slot->jobs_mu);
        slot->jobs_cv.wait(lock, [&] { return stop_ || !slot->jobs.empty(); });
        if (slot->jobs.empty()) return;
        job = std::move(slot->jobs.front());
        slot->jobs.pop_front();
      }
      EvalResult r;
      int64_t footprint = 0;
      try {
        r = JudgeCandidate(cfg_, &slot->ctx, &cache_, job.first, &footprint);
      } catch (const std::exception& e) {
        r.status = Status::Error(std::string("judge internal error: ") + e.what());
      }
      NoteFootprint(job.first.task.hash, footprint);
      --slot->in_flight;
      job.second.set_value(std::move(r));
    }
  }

  PoolConfig cfg_;
  JudgeCache cache_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<DeviceSlot>> devices_;
  std::mutex footprint_mu_;
  std::map<std::string, int64_t> footprints_;
};

}  // namespace

std::unique_ptr<Judge> MakeJudgePool(const PoolConfig& cfg) { return std::make_unique<JudgePool>(cfg); }

}  // namespace ax
