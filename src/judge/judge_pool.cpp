// The local judge pool: the evaluation protocol (docs/judge.md) driven over
// worker processes.
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
#include "judge/judge.h"
#include "judge/judge_cache.h"
#include "judge/mem_gate.h"
#include "judge/timing_rules.h"
#include "judge/worker.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ax {

#ifndef ADAEXPLORE_SOURCE_DIR
#define ADAEXPLORE_SOURCE_DIR "."
#endif

PoolConfig DefaultPoolConfig() {
  PoolConfig c;
  auto env = [](const char* k, const std::string& dflt) {
    const char* v = getenv(k);
    return (v && *v) ? std::string(v) : dflt;
  };
  std::string src = ADAEXPLORE_SOURCE_DIR;
  std::string venv_python = src + "/.venv/bin/python";
  c.python = env("ADAEXPLORE_PYTHON", access(venv_python.c_str(), X_OK) == 0 ? venv_python : "python3");
  c.worker_dir = env("ADAEXPLORE_WORKER_DIR", src + "/python");
  std::string home = env("HOME", "/tmp");
  c.cache_dir = env("ADAEXPLORE_CACHE_DIR", env("XDG_CACHE_HOME", home + "/.cache") + "/adaexplore");
  std::string shm_ok = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : env("TMPDIR", "/tmp");
  c.scratch_root = env("ADAEXPLORE_SCRATCH", shm_ok) + "/adaexplore-" + std::to_string(getpid());
  return c;
}

namespace {

const char* kTrusted = "reference";
const char* kCandidate = "candidate";

struct WarmWorker {
  std::unique_ptr<Worker> worker;
  std::string scratch;
};

struct Baseline {
  double median_ms = 0;
  double wall_ms = 0;   // the parent's clock for the whole timing request
  double gap_ms = 0;    // median of (device-wide end - stream end)
  json ToJson() const { return {{"median_ms", median_ms}, {"wall_ms", wall_ms}, {"gap_ms", gap_ms}}; }
};

// A trusted worker (role "reference") and what it has loaded.
struct Trusted {
  const char* name = "reference";
  std::mutex mu;    // one request at a time
  std::unique_ptr<Worker> w;
  std::string scratch;
  std::map<std::string, TaskInfo> tasks;  // task hash + tolerance -> info (valid for this worker)
};

struct DeviceState {
  std::string device;
  // Timing and baselines hold the device exclusively; correctness trials share
  // it with each other (never with a timing run).
  std::shared_mutex exec_mu;
  // Trusted workers: `ref` compares candidates' outputs with the reference;
  // `bases` compile and time the baselines (a task always goes to the same
  // one), so that a torch.compile of one task never holds up the
  // comparisons, and several tasks compile at once.
  Trusted ref;
  std::vector<std::unique_ptr<Trusted>> bases;
  // Candidate outputs reach the reference device to device (exported CUDA
  // memory over the descriptor channel); a candidate whose hand-over fails
  // goes through files, and after three such candidates the whole device does.
  std::atomic<bool> vmm{true};
  std::atomic<int> vmm_failures{0};
  json env;             // versions and GPU name
  // Device memory admission: each candidate reserves an estimate from its
  // task's measured footprint for as long as it runs (budget: 80% of the
  // GPU's memory; off on CPU).
  MemGate mem;

  std::mutex warm_mu;
  std::condition_variable warm_cv;
  std::deque<WarmWorker> warm;
  std::string spawn_error;
  int target = 2;
  int spawned = 0;
  int starting = 0;  // workers being started now
  bool limit_reached = false;  // max_spawns workers were started

  std::mutex jobs_mu;
  std::condition_variable jobs_cv;
  std::deque<std::pair<EvalRequest, std::promise<EvalResult>>> jobs;
  std::vector<std::thread> threads;
  std::vector<std::thread> spawners;  // workers start in parallel: a start (imports) takes seconds
};

std::mt19937_64& Rng() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32));
  return rng;
}

std::string Tail(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(s.size() - n); }

// An error that says the GPU ran out of memory (PyTorch's allocator, the
// CUDA driver or runtime), as opposed to a kernel's own resource limits.
bool IsDeviceOutOfMemory(const std::string& error) {
  return error.find("CUDA out of memory") != std::string::npos ||
         error.find("OutOfMemoryError") != std::string::npos ||
         error.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos ||
         error.find("cudaErrorMemoryAllocation") != std::string::npos;
}

class JudgePool : public Judge {
 public:
  explicit JudgePool(PoolConfig cfg) : cfg_(std::move(cfg)), cache_(cfg_.cache_dir + "/judge.sqlite") {
    std::error_code ec;
    fs::create_directories(cfg_.scratch_root, ec);
    fs::create_directories(cfg_.cache_dir + "/triton", ec);
    fs::create_directories(cfg_.cache_dir + "/torch_extensions", ec);
    fs::create_directories(cfg_.cache_dir + "/inductor", ec);
    for (const auto& d : cfg_.devices) {
      auto st = std::make_unique<DeviceState>();
      st->device = d;
      st->target = std::max(1, cfg_.workers_per_device);
      const int nbases = std::clamp(st->target / 2, 1, 3);
      for (int i = 0; i < nbases; ++i) {
        st->bases.push_back(std::make_unique<Trusted>());
        st->bases.back()->name = "baseline";
      }
      devices_[d] = std::move(st);
    }
    for (auto& [name, st] : devices_) {
      DeviceState* s = st.get();
      for (int i = 0; i < s->target; ++i) s->spawners.emplace_back([this, s] { SpawnLoop(s); });
      for (int i = 0; i < s->target; ++i) s->threads.emplace_back([this, s] { JobLoop(s); });
    }
  }

  ~JudgePool() override {
    stop_ = true;
    for (auto& [name, st] : devices_) {
      // Taking each mutex once after setting stop_ closes the gap between a
      // waiter's check of its predicate and its wait: without it a thread
      // that had just found stop_ false misses this notify and waits forever.
      { std::lock_guard<std::mutex> lock(st->jobs_mu); }
      { std::lock_guard<std::mutex> lock(st->warm_mu); }
      st->jobs_cv.notify_all();
      st->warm_cv.notify_all();
    }
    for (auto& [name, st] : devices_) {
      for (auto& t : st->threads) t.join();
      for (auto& t : st->spawners) t.join();
      st->warm.clear();
      if (st->ref.w) st->ref.w->Kill();
      for (auto& b : st->bases) {
        if (b->w) b->w->Kill();
      }
    }
    RemoveTree(cfg_.scratch_root);
  }

  std::future<EvalResult> Submit(EvalRequest req) override {
    std::promise<EvalResult> p;
    auto fut = p.get_future();
    DeviceState* st = Device(req.options.device);
    if (!st) {
      EvalResult r;
      r.status = Status::Error("device " + req.options.device + " is not in this judge pool");
      p.set_value(std::move(r));
      return fut;
    }
    {
      std::lock_guard<std::mutex> lock(st->jobs_mu);
      st->jobs.emplace_back(std::move(req), std::move(p));
    }
    st->jobs_cv.notify_one();
    return fut;
  }

  Status CheckTask(const TaskRef& task, const JudgeOptions& opts, TaskInfo* info) override {
    DeviceState* st = Device(opts.device);
    if (!st) return Status::Error("device " + opts.device + " is not in this judge pool");
    std::shared_lock<std::shared_mutex> exec(st->exec_mu);
    std::lock_guard<std::mutex> ref(st->ref.mu);
    return EnsureTask(st, &st->ref, task, opts, info);
  }

  Status Trace(const TaskRef& task, const JudgeOptions& opts, json* graph) override {
    DeviceState* st = Device(opts.device);
    if (!st) return Status::Error("device " + opts.device + " is not in this judge pool");
    JudgeOptions o = opts.Resolved();
    std::shared_lock<std::shared_mutex> exec(st->exec_mu);
    std::lock_guard<std::mutex> ref(st->ref.mu);
    TaskInfo info;
    Status s = EnsureTask(st, &st->ref, task, o, &info);
    if (!s.ok()) return s;
    Reply r = RefRequest(&st->ref, {{"op", "trace"}, {"key", task.hash}, {"seed", o.init_seed}}, o.compile_timeout_s);
    if (r.kind != Reply::kOk) {
      std::string why = "the reference " + std::string(r.kind == Reply::kTimeout ? "timed out" : "worker died") +
                        " while tracing (" + r.detail + ")";
      st->ref.w.reset();
      return Status::Error(why);
    }
    if (!r.body.value("ok", false)) return Status::Error(r.body.value("error", "cannot trace: unknown reason"));
    *graph = r.body.value("graph", json::object());
    return Status::Ok();
  }

 private:
  DeviceState* Device(const std::string& d) {
    auto it = devices_.find(d);
    return it == devices_.end() ? nullptr : it->second.get();
  }

  WorkerConfig BaseWorkerConfig(const std::string& device, const std::string& role) {
    WorkerConfig wc;
    wc.python = cfg_.python;
    wc.worker_dir = cfg_.worker_dir;
    wc.role = role;
    wc.device = device;
    wc.cache_dir = cfg_.cache_dir;
    wc.limits = cfg_.limits;
    return wc;
  }

  // Starts a worker and waits for it to say ready (or for *cancel).
  std::unique_ptr<Worker> StartWorker(WorkerConfig wc, std::string* error, const std::atomic<bool>* cancel = nullptr) {
    std::unique_ptr<Worker> w = Worker::Start(wc, error);
    if (!w) return nullptr;
    Reply r = w->WaitReady(cfg_.worker_start_timeout_s, cancel);
    if (r.kind != Reply::kOk) {
      *error = "judge worker (" + wc.python + ") did not start: " + r.detail + " " +
               FirstLine(Tail(w->OutputTail(), 2000), 400);
      // The last line of a Python traceback says most.
      std::string tail = Trim(w->OutputTail());
      size_t nl = tail.rfind('\n');
      if (!tail.empty()) *error += " | " + (nl == std::string::npos ? tail : tail.substr(nl + 1));
      return nullptr;
    }
    return w;
  }

  void SpawnLoop(DeviceState* st) {
    while (!stop_) {
      {
        std::unique_lock<std::mutex> lock(st->warm_mu);
        st->warm_cv.wait(lock, [&] {
          return stop_ || static_cast<int>(st->warm.size()) + st->starting < st->target;
        });
        if (stop_) return;
        if (cfg_.max_spawns >= 0 && st->spawned >= cfg_.max_spawns) {
          st->limit_reached = true;
          st->warm_cv.notify_all();
          st->warm_cv.wait(lock, [&] { return stop_.load(); });
          return;
        }
        ++st->spawned;
        ++st->starting;
      }
      WorkerConfig wc = BaseWorkerConfig(st->device, kCandidate);
      wc.scratch = MakeTempDir(cfg_.scratch_root, "cand-");
      std::string error;
      std::unique_ptr<Worker> w;
      if (wc.scratch.empty()) {
        error = "cannot create a scratch folder under " + cfg_.scratch_root;
      } else {
        // A pool that is being destroyed does not wait for warm-ups.
        w = StartWorker(wc, &error, &stop_);
      }
      bool failed = !w;
      {
        std::lock_guard<std::mutex> lock(st->warm_mu);
        --st->starting;
        if (w) {
          st->warm.push_back({std::move(w), wc.scratch});
          st->spawn_error.clear();
        } else {
          RemoveTree(wc.scratch);
          st->spawn_error = error;
        }
      }
      st->warm_cv.notify_all();
      // Back off after a failed start; takers see the error meanwhile.
      if (failed && !stop_) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  bool TakeWarm(DeviceState* st, WarmWorker* out, std::string* error) {
    std::unique_lock<std::mutex> lock(st->warm_mu);
    double deadline = NowSeconds() + cfg_.worker_start_timeout_s;
    while (st->warm.empty()) {
      // An error counts once nothing is still starting that could become ready.
      if (st->starting == 0 && st->limit_reached) {
        *error = "this judge pool starts at most " + std::to_string(cfg_.max_spawns) + " candidate workers";
        return false;
      }
      if (!st->spawn_error.empty() && st->starting == 0) {
        *error = st->spawn_error;
        return false;
      }
      if (stop_ || NowSeconds() > deadline) {
        *error = "no judge worker became ready";
        return false;
      }
      st->warm_cv.wait_for(lock, std::chrono::milliseconds(200));
    }
    *out = std::move(st->warm.front());
    st->warm.pop_front();
    st->warm_cv.notify_all();
    return true;
  }

  void JobLoop(DeviceState* st) {
    while (true) {
      std::pair<EvalRequest, std::promise<EvalResult>> job;
      {
        std::unique_lock<std::mutex> lock(st->jobs_mu);
        st->jobs_cv.wait(lock, [&] { return stop_ || !st->jobs.empty(); });
        if (st->jobs.empty()) return;
        job = std::move(st->jobs.front());
        st->jobs.pop_front();
      }
      EvalResult r;
      try {
        r = Run(st, job.first);
      } catch (const std::exception& e) {
        r.status = Status::Error(std::string("judge internal error: ") + e.what());
      }
      job.second.set_value(std::move(r));
    }
  }

  // ---- the reference worker -------------------------------------------
  Status EnsureTrusted(DeviceState* st, Trusted* t) {
    if (t->w && t->w->alive()) return Status::Ok();
    t->tasks.clear();
    if (t->scratch.empty()) t->scratch = MakeTempDir(cfg_.scratch_root, std::string(t->name) + "-");
    WorkerConfig wc = BaseWorkerConfig(st->device, kTrusted);
    wc.scratch = t->scratch;
    std::string error;
    t->w = StartWorker(wc, &error);
    if (!t->w) return Status::Error(error);
    Reply r = t->w->Request({{"op", "hello"}, {"device", st->device}}, 120);
    if (r.kind != Reply::kOk) return Status::Error(std::string(t->name) + " worker failed: " + r.detail);
    {
      // Written once, by the first trusted worker to start (before any
      // verdict reads it); later workers report the same versions.
      std::lock_guard<std::mutex> lock(env_mu_);
      if (st->env.is_null() || st->env.empty()) st->env = r.body;
    }
    if (st->device != "cpu" && !r.body.value("cuda_available", false)) {
      return Status::Error("no CUDA device visible to the judge for " + st->device);
    }
    const int64_t total = r.body.value("memory_total", int64_t{0});
    if (st->device != "cpu" && total > 0 && st->mem.budget() == 0) st->mem.SetBudget(total / 10 * 8);
    return Status::Ok();
  }

  Reply RefRequest(Trusted* t, const json& req, double timeout) {
    Reply r = t->w->Request(req, timeout);
    if (r.kind != Reply::kOk) t->tasks.clear();
    return r;
  }

  std::string DeviceName(DeviceState* st) {
    if (st->device == "cpu") return "cpu";
    return st->env.value("gpu", st->device);
  }

  // Requires t->mu (and a shared hold of exec_mu: the reference runs).
  Status EnsureTask(DeviceState* st, Trusted* t, const TaskRef& task, const JudgeOptions& opts, TaskInfo* info) {
    Status s = EnsureTrusted(st, t);
    if (!s.ok()) return s;
    std::string key = task.hash + ":" + opts.tolerance;
    auto it = t->tasks.find(key);
    if (it != t->tasks.end()) {
      *info = it->second;
      return Status::Ok();
    }
    Tolerance tol;
    s = LookupTolerance(opts.tolerance, &tol);
    if (!s.ok()) return s;
    std::string path = t->scratch + "/task_" + task.hash.substr(0, 16) + ".py";
    if (!WriteFile(path, task.source)) return Status::Error("cannot write " + path);
    Reply r = RefRequest(t, {{"op", "load_task"}, {"key", task.hash}, {"task", path}, {"device", LocalDevice(st)},
                              {"init_seed", opts.init_seed}, {"probe_seeds", {101, 202}},
                              {"tolerance", tol.ToWorkerJson()}},
                         opts.compile_timeout_s);
    TaskInfo ti;
    if (r.kind != Reply::kOk) {
      ti.error = "the reference " + std::string(r.kind == Reply::kTimeout ? "timed out" : "worker died") + " (" +
                 r.detail + ") " + FirstLine(Tail(t->w->OutputTail(), 500));
      t->w.reset();
    } else if (!r.body.value("ok", false)) {
      ti.error = r.body.value("error", "task failed");
    } else {
      ti.ok = true;
      ti.degenerate = r.body.value("degenerate", std::vector<std::string>{});
      ti.outputs_json = r.body.value("outputs", json::array()).dump();
      ti.footprint_bytes = r.body.value("footprint_bytes", int64_t{0});
      t->tasks[key] = ti;
    }
    *info = ti;
    if (!ti.ok) return Status::Error(task.name + ": " + ti.error);
    return Status::Ok();
  }

  // Inside a worker the device is always cuda:0 (CUDA_VISIBLE_DEVICES picks it).
  static std::string LocalDevice(DeviceState* st) { return st->device == "cpu" ? "cpu" : "cuda:0"; }

  json TimingRequest(const JudgeOptions& o, unsigned long long seed0, const std::string& op) {
    json sets = json::array();
    for (int i = 0; i < o.input_sets; ++i) sets.push_back(seed0 + 1000 + i);
    return {{"op", op},
            {"set_seeds", sets},
            {"refresh_seed0", seed0 + 5000},
            {"warmup", o.warmup},
            {"iters", o.iters},
            {"flush_bytes", o.flush_bytes}};
  }

  // A timing reply as the timing rules read it.
  static TimingReport ReportOf(const Reply& r) {
    TimingReport rep;
    auto fill = [&](const char* key, std::vector<double>* out) {
      for (auto& x : r.body.value(key, json::array())) out->push_back(x.is_number() ? x.get<double>() : 0.0);
    };
    fill("stream_ms", &rep.stream_ms);
    fill("device_ms", &rep.device_ms);
    fill("host_ms", &rep.host_ms);
    rep.request_ms = r.seconds * 1000.0;
    return rep;
  }

  // Baselines are timed with the same loop as candidates, in the baseline
  // worker, cached per task, device, torch version and timing protocol.
  // torch.compile and its first call share the device; only the timed loop
  // holds it alone. Requires nothing held (takes the task's baseline worker, then exec_mu).
  Status EnsureBaseline(DeviceState* st, const TaskRef& task, const JudgeOptions& o, const std::string& mode,
                        Baseline* out) {
    std::string torch_version;
    {
      std::lock_guard<std::mutex> lock(env_mu_);
      torch_version = st->env.value("torch", "");
    }
    json keyj = {{"task", task.hash}, {"mode", mode}, {"device", DeviceName(st)}, {"torch", torch_version},
                 {"warmup", o.warmup}, {"iters", o.iters}, {"sets", o.input_sets}, {"flush", o.flush_bytes},
                 {"init_seed", o.init_seed}};
    const std::string key = Sha256Hex(keyj.dump());
    auto cached = [&]() {
      if (!o.use_cache) return false;
      auto hit = cache_.Get("baselines", key);
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
    Trusted* t = st->bases[std::hash<std::string>{}(task.hash) % st->bases.size()].get();
    std::lock_guard<std::mutex> base(t->mu);
    if (cached()) return Status::Ok();  // measured while this waited
    auto failed = [&](const Reply& r, const char* what) {
      std::string why = r.kind == Reply::kOk ? r.body.value("error", "") : r.detail;
      if (r.kind != Reply::kOk) t->w.reset();
      return Status::Error(mode + " baseline failed" + what + ": " + FirstLine(why, 400));
    };
    {
      std::shared_lock<std::shared_mutex> shared(st->exec_mu);
      TaskInfo info;
      Status s = EnsureTask(st, t, task, o, &info);
      if (!s.ok()) return s;
      if (mode != "eager") {
        Reply r = RefRequest(t, {{"op", "baseline_prepare"}, {"key", task.hash}, {"mode", mode},
                                 {"seed", o.init_seed + 17}},
                             o.compile_timeout_s + o.run_timeout_s);
        if (r.kind != Reply::kOk || !r.body.value("ok", false)) return failed(r, " to compile");
      }
    }
    unsigned long long seed0 = o.seed ? *o.seed : Rng()();
    seed0 %= (1ULL << 40);
    json req = TimingRequest(o, seed0, "baseline");
    req["key"] = task.hash;
    req["mode"] = mode;
    Reply r;
    {
      std::lock_guard<std::shared_mutex> exclusive(st->exec_mu);
      r = RefRequest(t, req, o.compile_timeout_s + o.run_timeout_s);
    }
    if (r.kind != Reply::kOk || !r.body.value("ok", false)) return failed(r, "");
    const TimingReport rep = ReportOf(r);
    out->median_ms = ComputeStats(rep.stream_ms).median;
    out->gap_ms = MedianGap(rep);
    out->wall_ms = r.seconds * 1000.0 - r.body.value("compile_s", 0.0) * 1000.0;
    cache_.Put("baselines", key, out->ToJson().dump());
    return Status::Ok();
  }

  // The task's baselines for a verdict; a baseline that fails (torch.compile
  // cannot handle the model, say) is flagged on the verdict.
  std::map<std::string, Baseline> Baselines(DeviceState* st, const TaskRef& task, const JudgeOptions& o,
                                            Verdict* v) {
    std::map<std::string, Baseline> out;
    const double t0 = NowSeconds();
    for (const auto& mode : o.baselines) {
      Baseline b;
      Status s = EnsureBaseline(st, task, o, mode, &b);
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

  // ---- one candidate ----------------------------------------------------
  // Applies a failed or broken reply to the verdict; returns false then.
  bool Usable(const Reply& r, const std::string& phase, double limit, Worker* w, Verdict* v) {
    switch (r.kind) {
      case Reply::kOk:
        break;
      case Reply::kTimeout:
        v->status = kStatusTimeout;
        v->error = phase + " did not finish within " + std::to_string(static_cast<int>(limit)) +
                   " s; the candidate was killed";
        return false;
      case Reply::kFlood:
        v->status = kStatusCrashed;
        v->AddFlag("output_flood");
        v->error = "the candidate " + r.detail + " during " + phase + "; it was killed";
        return false;
      case Reply::kDied: {
        v->status = kStatusCrashed;
        std::string tail = Trim(Tail(w->OutputTail(), 3000));
        v->error = "the candidate's process " + r.detail + " during " + phase + (tail.empty() ? "" : ":\n" + tail);
        return false;
      }
      case Reply::kProtocol:
        v->status = kStatusCrashed;
        v->AddFlag("protocol_violation");
        v->error = r.detail + " during " + phase;
        return false;
    }
    ApplyIntegrity(r.body, v);
    if (r.body.value("ok", false)) return true;
    std::string status = r.body.value("status", "runtime_error");
    if (status == "internal") status = kStatusRuntimeError;
    v->status = status;
    v->error = r.body.value("error", "");
    return false;
  }

  static void ApplyIntegrity(const json& body, Verdict* v) {
    if (body.contains("tampered")) {
      v->AddFlag("harness_tampering");
      std::string names;
      for (auto& n : body["tampered"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
      v->error = "the candidate replaced parts of the judge's harness: " + names;
    }
    if (body.contains("threads")) {
      v->AddFlag("background_threads");
      std::string names;
      for (auto& n : body["threads"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
      v->error = "the candidate left Python threads running after its forward: " + names;
    }
    if (body.value("tf32", false)) v->AddFlag("tf32_enabled");
  }

  static bool Rejected(const Verdict& v) {
    return v.HasFlag("harness_tampering") || v.HasFlag("background_threads");
  }

  // A failed device-to-device hand-over sends that candidate's outputs
  // through files; after three candidates failed, the whole device does
  // (one candidate cannot switch it off for everyone).
  void NoteVmmFailure(DeviceState* st, const std::string& why) {
    if (++st->vmm_failures >= 3) DisableVmm(st, why);
  }

  void DisableVmm(DeviceState* st, const std::string& why) {
    if (st->vmm.exchange(false)) {
      std::fprintf(stderr, "judge: device-to-device output transfer on %s failed (%s); outputs go through files\n",
                   st->device.c_str(), FirstLine(why, 300).c_str());
    }
  }

  static void CloseAll(std::vector<int>* fds) {
    for (int fd : *fds) close(fd);
    fds->clear();
  }

  // Compares one set of candidate outputs with the reference on `seed`.
  // Outputs handed over device to device come with their descriptors (fds,
  // taken from the candidate's channel), which are relayed to the reference
  // first. Returns false (and fills the verdict) on mismatch or failure;
  // *transport_failed says the reference could not import the outputs.
  // Requires ref.mu.
  bool Compare(DeviceState* st, const TaskRef& task, const JudgeOptions& o, const Tolerance& tol,
               const Tolerance& strict, unsigned long long seed, const json& outputs, std::vector<int>* fds,
               Verdict* v, bool* strict_ok, bool* transport_failed) {
    *transport_failed = false;
    for (int fd : *fds) {
      std::string err;
      if (!st->ref.w->SendFd(fd, &err)) {
        CloseAll(fds);
        st->ref.w->DrainFds();
        *transport_failed = true;
        NoteVmmFailure(st, err);
        return false;
      }
    }
    CloseAll(fds);
    Reply r = RefRequest(&st->ref, {{"op", "compare"}, {"key", task.hash}, {"seed", seed}, {"outputs", outputs},
                              {"tolerance", tol.ToWorkerJson()}, {"strict", strict.ToWorkerJson()}},
                         o.run_timeout_s);
    if (r.kind == Reply::kOk && !r.body.value("ok", false) && r.body.value("transport_failed", false)) {
      *transport_failed = true;
      NoteVmmFailure(st, r.body.value("error", ""));
      return false;
    }
    if (r.kind != Reply::kOk || !r.body.value("ok", false)) {
      v->status = kStatusRuntimeError;
      v->AddFlag("reference_failed");
      v->error = "the reference failed while comparing: " +
                 (r.kind == Reply::kOk ? FirstLine(r.body.value("error", ""), 500) : r.detail);
      if (r.kind != Reply::kOk) st->ref.w.reset();
      return false;
    }
    if (r.body.contains("max_abs_error") && r.body["max_abs_error"].is_number()) {
      double e = r.body["max_abs_error"];
      v->max_abs_error = std::max(v->max_abs_error.value_or(0.0), e);
    }
    if (!r.body.value("strict_match", true)) *strict_ok = false;
    if (!r.body.value("match", false)) {
      v->status = kStatusMismatch;
      v->error = r.body.value("error", "outputs differ");
      return false;
    }
    return true;
  }

  // Takes the descriptors of the outputs a reply announced as device to
  // device from the candidate's channel, in order.
  static bool TakeFds(Worker* w, const json& outputs, std::vector<int>* fds, std::string* error) {
    if (!outputs.is_array()) return true;
    for (const auto& out : outputs) {
      if (!out.is_object() || !out.value("vmm", false)) continue;
      int fd = w->RecvFd(10.0, error);
      if (fd < 0) {
        CloseAll(fds);
        return false;
      }
      fds->push_back(fd);
    }
    return true;
  }

  EvalResult Run(DeviceState* st, const EvalRequest& req) {
    const double t_start = NowSeconds();
    EvalResult res;
    Verdict& v = res.verdict;
    JudgeOptions o = req.options.Resolved();
    Tolerance tol, strict;
    res.status = LookupTolerance(o.tolerance, &tol);
    if (!res.status.ok()) {
      res.bad_input = true;
      return res;
    }
    LookupTolerance("strict", &strict);
    const std::string cand_hash = Sha256Hex(req.candidate_source);
    v.candidate = {{"path", req.candidate_path}, {"hash", cand_hash}};
    v.task = {{"path", req.task.path}, {"name", req.task.name}, {"hash", req.task.hash}};
    v.protocol = o.ProtocolJson();

    // The task: valid, and what its outputs look like (trusted worker).
    TaskInfo info;
    {
      std::shared_lock<std::shared_mutex> exec(st->exec_mu);
      std::lock_guard<std::mutex> ref(st->ref.mu);
      res.status = EnsureTask(st, &st->ref, req.task, o, &info);
      if (!res.status.ok()) {
        res.bad_input = !info.error.empty();
        return res;
      }
    }
    v.device = DeviceName(st);
    v.env = {{"torch", st->env.value("torch", "")}, {"triton", st->env.contains("triton") ? st->env["triton"] : json(nullptr)},
             {"python", st->env.value("python", "")}};
    v.task["degenerate"] = info.degenerate;
    v.task["outputs"] = json::parse(info.outputs_json);
    v.timing_source = o.cuda() ? "cuda_events" : "cpu_clock";

    std::string cache_key;
    if (o.use_cache) {
      json k = {{"task", req.task.hash}, {"cand", cand_hash}, {"protocol", v.protocol}, {"device", v.device},
                {"torch", v.env["torch"]}, {"triton", v.env["triton"]}};
      cache_key = Sha256Hex(k.dump());
      if (auto hit = cache_.Get("verdicts", cache_key)) {
        try {
          Verdict c = Verdict::FromJson(json::parse(*hit));
          c.cached = true;
          c.candidate["path"] = req.candidate_path;
          c.task["path"] = req.task.path;
          res.verdict = c;
          return res;
        } catch (...) {
        }
      }
    }

    // Device memory for this candidate: its inputs, intermediates and outputs
    // for a trial and for each timing input set, its share of the reference's
    // comparison and of the baselines (measured during its run), and the
    // process's CUDA context.
    const int64_t estimate = o.cuda() ? info.footprint_bytes * (o.input_sets + 4) + (int64_t{1} << 30) : 0;
    const Verdict before = v;
    for (int attempt = 0;; ++attempt) {
      // A candidate that ran out of device memory next to others is judged
      // again with the device to itself; out of memory alone is its own.
      const bool alone = attempt > 0;
      MemReservation reservation(&st->mem, estimate, alone);
      if (reservation.waited() > 0.01) v.phases["memory_wait"] = reservation.waited();

      // A warm candidate worker of its own.
      WarmWorker ww;
      std::string err;
      const double t_warm = NowSeconds();
      if (!TakeWarm(st, &ww, &err)) {
        res.status = Status::Error(err);
        return res;
      }
      v.phases["warm_wait"] = NowSeconds() - t_warm;
      Worker* w = ww.worker.get();
      v.isolation = w->isolation();
      std::string cand_file = ww.scratch + "/candidate.py";
      std::string task_file = ww.scratch + "/task.py";
      std::string out_dir = ww.scratch + "/out";
      fs::create_directories(out_dir);
      WriteFile(cand_file, req.candidate_source);
      WriteFile(task_file, req.task.source);
      const unsigned long long seed0 = (o.seed ? *o.seed : Rng()()) % (1ULL << 40);

      RunCandidate(st, req, o, tol, strict, info, w, cand_file, task_file, out_dir, seed0, &v);

      v.output_tail = Tail(w->OutputTail(), 4000);
      ww.worker->Kill();
      ww.worker.reset();
      RemoveTree(ww.scratch);
      const bool shared = reservation.shared_with_others();
      if (alone || !shared || !o.cuda() || v.status == kStatusOk || !IsDeviceOutOfMemory(v.error)) {
        if (alone) v.AddFlag("judged_alone_after_oom");
        break;
      }
      const double t_first = NowSeconds() - t_start;
      reservation.Reset();
      v = before;
      v.phases["oom_first_attempt"] = t_first;
    }
    v.correct = v.status == kStatusOk;
    v.judge_seconds = NowSeconds() - t_start;
    if (!info.degenerate.empty()) {
      v.AddFlag("degenerate_task");
      for (auto& d : info.degenerate) v.AddFlag("degenerate:" + d);
    }
    // Timeouts depend on load, and a failure of the judge's own reference
    // worker (killed, out of memory) says nothing about the candidate: neither
    // is cached. Everything else is a property of the candidate.
    const bool infrastructure = std::find(v.flags.begin(), v.flags.end(), "reference_failed") != v.flags.end();
    if (o.use_cache && v.status != kStatusTimeout && !infrastructure) {
      cache_.Put("verdicts", cache_key, v.ToJson().dump());
    }
    return res;
  }

  void RunCandidate(DeviceState* st, const EvalRequest& req, const JudgeOptions& o, const Tolerance& tol,
                    const Tolerance& strict, const TaskInfo& info, Worker* w, const std::string& cand_file, const std::string& task_file, const std::string& out_dir,
                    unsigned long long seed0, Verdict* v) {
    (void)info;
    const std::string cand_hash = Sha256Hex(req.candidate_source);
    // 1. Compile: import, build, instantiate, one warm call. Overlaps other
    //    candidates' trials and timing.
    double t_phase = NowSeconds();
    auto phase = [&](const char* name) {
      double now = NowSeconds();
      v->phases[name] = now - t_phase;
      t_phase = now;
    };
    Reply load = w->Request({{"op", "load"},
                             {"task", task_file},
                             {"candidate", cand_file},
                             {"device", LocalDevice(st)},
                             {"init_seed", o.init_seed},
                             {"warm_seed", seed0 + 7},
                             {"extensions_dir", cfg_.cache_dir + "/torch_extensions/" + cand_hash.substr(0, 16)}},
                            o.compile_timeout_s);
    phase("load");
    if (!Usable(load, "compilation", o.compile_timeout_s, w, v)) return;
    if (Rejected(*v)) {
      v->status = kStatusRejected;
      return;
    }
    std::vector<std::string> own = load.body.value("own_kernels", std::vector<std::string>{});

    // 2. Correctness trials share the device with other candidates' trials
    //    (not with timing runs); the reference serves one comparison at a time.
    std::shared_lock<std::shared_mutex> shared(st->exec_mu);
    phase("wait");
    auto ensure = [&]() -> bool {
      TaskInfo again;
      Status s = EnsureTask(st, &st->ref, req.task, o, &again);
      if (!s.ok()) {
        v->status = kStatusRuntimeError;
        v->AddFlag("reference_failed");
        v->error = s.message();
        return false;
      }
      return true;
    };
    {
      std::lock_guard<std::mutex> ref(st->ref.mu);
      if (!ensure()) return;
    }
    bool strict_ok = true;
    json gpu_kernels = json::array();
    std::optional<double> gpu_span, gpu_busy;
    json launched = json::array();
    bool use_vmm = o.cuda() && load.body.value("vmm", false);
    // Sends one request that produces outputs (a trial, or `final` for the
    // last timed call), checks its reply with `check`, and has the reference
    // compare the outputs. Outputs go device to device where both sides can;
    // if that fails, this candidate's outputs go through files from then on
    // and the request is repeated. Returns false with the verdict filled.
    auto deliver = [&](json wreq, const std::string& phase, bool is_final, std::shared_lock<std::shared_mutex>* held,
                       const std::function<bool(const Reply&)>& check) -> bool {
      for (int attempt = 0;; ++attempt) {
        const bool vmm = use_vmm && st->vmm.load();
        wreq["transport"] = vmm ? "vmm" : "file";
        w->DrainFds();  // nothing sent before the request belongs to it
        Reply r = w->Request(wreq, o.run_timeout_s);
        // Trials share the device: a candidate that ran out of device memory
        // next to others gets the same trial again with the device to itself.
        if (!is_final && held && o.cuda() && r.kind == Reply::kOk && !r.body.value("ok", true) &&
            r.body.value("error", "").find("out of memory") != std::string::npos) {
          w->DrainFds();
          held->unlock();
          {
            std::lock_guard<std::shared_mutex> alone(st->exec_mu);
            r = w->Request(wreq, o.run_timeout_s);
          }
          held->lock();
        }
        if (vmm && attempt == 0 && r.kind == Reply::kOk && !r.body.value("ok", true) &&
            r.body.value("transport_failed", false)) {
          w->DrainFds();
          use_vmm = false;
          NoteVmmFailure(st, r.body.value("error", ""));
          continue;
        }
        if (!Usable(r, phase, o.run_timeout_s, w, v) || !check(r)) {
          w->DrainFds();
          return false;
        }
        const json& body = is_final ? r.body["final"] : r.body;
        const json outputs = body.value("outputs", json::array());
        const unsigned long long seed = is_final ? body.value("seed", 0ULL) : wreq.value("seed", 0ULL);
        std::vector<int> fds;
        std::string err;
        if (!TakeFds(w, outputs, &fds, &err)) {
          v->status = kStatusCrashed;
          v->AddFlag("protocol_violation");
          v->error = err + " during " + phase;
          return false;
        }
        w->DrainFds();  // anything beyond what the reply announced is dropped
        bool same, transport_failed = false;
        {
          std::lock_guard<std::mutex> ref(st->ref.mu);
          if (!ensure()) {
            CloseAll(&fds);
            return false;
          }
          same = Compare(st, req.task, o, tol, strict, seed, outputs, &fds, v, &strict_ok, &transport_failed);
        }
        if (transport_failed) {
          use_vmm = false;
          if (attempt == 0) continue;
          v->status = kStatusRuntimeError;
          v->AddFlag("reference_failed");
          v->error = "the outputs could not be handed to the reference during " + phase;
          return false;
        }
        std::error_code ec;
        bool any_file = false;
        for (auto& f : outputs) {
          if (f.is_object() && f.contains("path")) {
            any_file = true;
            fs::remove(f.value("path", ""), ec);
          }
        }
        // "file" once any output of the candidate went through a file.
        if (any_file || v->output_transfer.empty()) v->output_transfer = any_file ? "file" : "device";
        return same;
      }
    };
    // `profile`: they run under the profiler, whose kernel list is the GPU's
    // evidence of what the candidate launched.
    auto trials = [&](int count, unsigned long long base, int index0, std::shared_lock<std::shared_mutex>* held,
                      bool profile) -> bool {
      for (int k = 0; k < count; ++k) {
        unsigned long long seed = base + static_cast<unsigned long long>(k);
        json treq = {{"op", "trial"}, {"seed", seed}, {"index", index0 + k}, {"out_dir", out_dir}, {"profile", profile}};
        if (profile) {
          // Timed: the profiled trial also gives the kernels' GPU times (the medians of three calls).
          treq["flush_bytes"] = o.flush_bytes;
          treq["profile_calls"] = o.time ? 3 : 1;
        }
        auto check = [&](const Reply& r) -> bool {
          if (Rejected(*v)) {
            v->status = kStatusRejected;
            return false;
          }
          if (r.body.contains("gpu_kernels")) gpu_kernels = r.body["gpu_kernels"];
          auto per_call = [&](const char* key) -> std::optional<double> {
            const json& a = r.body.contains(key) ? r.body[key] : json();
            std::vector<double> xs;
            if (!a.is_array()) return std::nullopt;
            for (const auto& x : a) {
              if (!x.is_number()) return std::nullopt;
              xs.push_back(x.get<double>());
            }
            return GpuTimeMedian(xs);
          };
          gpu_span = per_call("gpu_span_ms");
          gpu_busy = per_call("gpu_busy_ms");
          launched = r.body.value("launched", json::array());
          auto mutated = r.body.value("inputs_mutated", std::vector<int>{});
          if (!mutated.empty()) {
            v->status = kStatusRejected;
            v->AddFlag("inputs_mutated");
            v->error = "the candidate modified its input tensor(s) in place (input " + std::to_string(mutated[0]) + ")";
            return false;
          }
          return true;
        };
        if (!deliver(treq, "correctness trial " + std::to_string(index0 + k + 1), false, held, check)) {
          if (v->status == kStatusMismatch) v->error = "trial " + std::to_string(index0 + k + 1) + ": " + v->error;
          return false;
        }
      }
      return true;
    };
    bool trials_ok = trials(o.trials, seed0 + 11, 0, &shared, false);
    phase("trials");
    if (!trials_ok) return;

    // 3. The candidate must launch a kernel of its own. On a GPU the evidence
    //    is the kernel list of one more trial run under the profiler. When the
    //    candidate is timed, that trial comes after the timing: once a profiler
    //    session has ended, Kineto leaves CUPTI subscribed in the process
    //    (unless TEARDOWN_CUPTI=1), which adds host time to every later CUDA
    //    call, and the baselines are timed in workers that never profile.
    if (own.empty()) {
      v->status = kStatusRejected;
      v->AddFlag("no_custom_kernel");
      v->error = "the candidate defines no Triton (@triton.jit) or CUDA (__global__) kernel of its own";
      return;
    }
    auto launched_own = [&]() -> bool {
      bool found = false;
      auto mentions_own = [&](const std::string& name) {
        for (auto& k : own) {
          if (name.find(k) != std::string::npos) return true;
        }
        return false;
      };
      if (o.cuda() && !gpu_kernels.empty()) {
        for (auto& k : gpu_kernels) found = found || mentions_own(k.get<std::string>());
      } else {
        for (auto& k : launched) {
          std::string name = k.get<std::string>();
          found = found || mentions_own(name) || name.rfind("ext:", 0) == 0;
        }
      }
      if (!found) {
        v->status = kStatusRejected;
        v->AddFlag("custom_kernel_not_launched");
        std::string names;
        for (auto& k : own) names += (names.empty() ? "" : ", ") + k;
        v->error = "the candidate defines " + names + " but its forward never launched any of them";
      }
      return found;
    };
    if (o.cuda() && !o.time && !trials(1, seed0 + 11, o.trials, &shared, true)) return;
    if ((!o.cuda() || !o.time) && !launched_own()) return;
    if (!strict_ok && o.tolerance != "strict") v->AddFlag("precision_downgrade");

    v->status = kStatusOk;
    if (!o.time) return;

    // Baselines (cached per task): measured here, after the trials, so that
    // compiling them overlaps this candidate's own compilation and trials.
    shared.unlock();
    const double t_base = NowSeconds();
    const std::map<std::string, Baseline> baselines = Baselines(st, req.task, o, v);
    t_phase += NowSeconds() - t_base;

    // 4. Timing, then a check that the timed calls computed the right thing.
    //    The timed loop holds the device exclusively, and the parent's clock
    //    covers that request alone; the last timed output is written (and
    //    compared) afterwards.
    Reply tr;
    {
      std::lock_guard<std::shared_mutex> exclusive(st->exec_mu);
      phase("wait_timing");
      json treq = TimingRequest(o, seed0, "time");
      tr = w->Request(treq, o.run_timeout_s);
      phase("timing");
    }
    if (!Usable(tr, "timing", o.run_timeout_s, w, v)) return;
    if (Rejected(*v)) {
      v->status = kStatusRejected;
      return;
    }
    bool final_same;
    {
      std::shared_lock<std::shared_mutex> again(st->exec_mu);
      auto check = [&](const Reply&) -> bool {
        if (Rejected(*v)) {
          v->status = kStatusRejected;
          return false;
        }
        return true;
      };
      final_same = deliver({{"op", "final"}, {"out_dir", out_dir}}, "writing the timed output", true, nullptr, check);
    }
    if (final_same && o.cuda()) {
      // The profiled trial holds the device alone, as the timing does: its
      // GPU span is the candidate's own kernels, not its neighbours'.
      std::lock_guard<std::shared_mutex> exclusive(st->exec_mu);
      if (!trials(1, seed0 + 11, o.trials, nullptr, true) || !launched_own()) return;
      if (!strict_ok && o.tolerance != "strict") v->AddFlag("precision_downgrade");
      v->gpu_span_ms = gpu_span;
      v->gpu_busy_ms = gpu_busy;
    }
    if (!final_same) {
      if (v->status == kStatusMismatch) {
        v->AddFlag("timed_output_mismatch");
        v->error = "the output of a timed call was wrong (results cached across calls?): " + v->error;
      }
      return;
    }
    const TimingReport rep = ReportOf(tr);
    std::optional<EagerTiming> eager;
    if (baselines.count("eager")) {
      const Baseline& e = baselines.at("eager");
      eager = EagerTiming{e.median_ms, e.wall_ms, e.gap_ms};
    }
    const TimingDecision d = DecideTiming(rep, o.cuda(), o.warmup + o.iters, eager);
    for (const auto& f : d.flags) v->AddFlag(f);
    v->timing.median_ms = d.used.median;
    v->timing.p10_ms = d.used.p10;
    v->timing.p90_ms = d.used.p90;
    v->timing.min_ms = d.used.min;
    v->timing.max_ms = d.used.max;
    v->timing.mean_ms = d.used.mean;
    v->timing.stdev_ms = d.used.stdev;
    v->timing.n = static_cast<int>(d.used.n);
    if (d.host_ms) v->host_ms = *d.host_ms;
    if (d.rejected) {
      v->status = kStatusRejected;
      v->error = d.error;
      return;
    }
    const double runtime = d.runtime_ms;
    v->runtime_ms = runtime;
    for (const auto& [mode, b] : baselines) {
      if (runtime > 0) v->speedup[mode] = b.median_ms / runtime;
    }
    // 5. A speedup too good to be true gets more trials on fresh inputs.
    bool suspicious = false;
    for (const auto& [mode, sp] : v->speedup) suspicious = suspicious || sp > o.speedup_recheck;
    if (suspicious) {
      std::shared_lock<std::shared_mutex> again(st->exec_mu);
      if (!trials(o.recheck_trials, seed0 + 20011, o.trials + 1, &again, false)) {
        v->AddFlag("failed_recheck");
        return;
      }
      v->AddFlag("speedup_over_10x_rechecked");
    }
  }

  PoolConfig cfg_;
  JudgeCache cache_;
  std::map<std::string, std::unique_ptr<DeviceState>> devices_;
  std::atomic<bool> stop_{false};
  std::mutex env_mu_;
};

}  // namespace

std::unique_ptr<Judge> MakeJudgePool(const PoolConfig& cfg) { return std::make_unique<JudgePool>(cfg); }

}  // namespace ax
