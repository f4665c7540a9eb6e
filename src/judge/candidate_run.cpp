// The evaluation protocol for one candidate on one device (docs/judge.md).
#include "judge/candidate_run.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include "common/util.h"
#include "judge/timing_request.h"
#include "judge/timing_rules.h"
#include "judge/worker_launch.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ax {

bool IsDeviceOutOfMemory(const std::string& error) {
  return error.find("CUDA out of memory") != std::string::npos ||
         error.find("OutOfMemoryError") != std::string::npos ||
         error.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos ||
         error.find("cudaErrorMemoryAllocation") != std::string::npos;
}

namespace {

class CandidateRun {
 public:
  CandidateRun(const PoolConfig& cfg, DeviceContext* st, JudgeCache* cache) : cfg_(cfg), st(st), cache_(cache) {}

  EvalResult Run(const EvalRequest& req);
  // The task's measured device footprint (0 until the task was loaded).
  int64_t footprint() const { return footprint_; }

 private:
  // ---- one candidate ----------------------------------------------------
  // Applies a failed or broken reply to the verdict; returns false then.
  bool Usable(const Reply& r, const std::string& phase, double limit, Worker* w, Verdict* v) {
    switch (r.kind) {
      case Reply::kOk:
        break;
      case Reply::kTimeout:
        v->status = kStatusTimeout;
        v->error = limit > 0 ? phase + " did not finish within " + std::to_string(static_cast<int>(limit)) +
                                   " s; the candidate was killed"
                             : phase + ": " + r.detail + "; the candidate was killed";
        return false;
      case Reply::kFlood:
        v->status = kStatusCrashed;
        v->AddFlag("output_flood");
        v->error = "the candidate " + r.detail + " during " + phase + "; it was killed";
        return false;
      case Reply::kDied: {
        v->status = kStatusCrashed;
        std::string tail = Trim(TailOf(w->OutputTail(), 3000));
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

  // Compares one set of candidate outputs with the reference on `seed`.
  // Outputs handed over device to device come with their descriptors (fds,
  // taken from the candidate's channel), which are relayed to the reference
  // first. Returns false (and fills the verdict) on mismatch or failure;
  // *transport_failed says the reference could not import the outputs.
  // Requires ref.mu.
  bool Compare(const TaskRef& task, const JudgeOptions& o, const Tolerance& tol,
               const Tolerance& strict, unsigned long long seed, const json& outputs, std::vector<int>* fds,
               Verdict* v, bool* strict_ok, bool* transport_failed) {
    *transport_failed = false;
    if (!st->transfer.Relay(st->ref.worker(), fds)) {
      *transport_failed = true;
      return false;
    }
    Reply r = st->ref.Request({{"op", "compare"}, {"key", WorkerTaskKey(task.hash, o.precision)}, {"seed", seed}, {"outputs", outputs},
                              {"tolerance", tol.ToWorkerJson()}, {"strict", strict.ToWorkerJson()}},
                         o.run_timeout_s);
    if (r.kind == Reply::kOk && !r.body.value("ok", false) && r.body.value("transport_failed", false)) {
      *transport_failed = true;
      st->transfer.NoteFailure(r.body.value("error", ""));
      return false;
    }
    if (r.kind != Reply::kOk || !r.body.value("ok", false)) {
      v->status = kStatusRuntimeError;
      v->AddFlag("reference_failed");
      v->error = "the reference failed while comparing: " +
                 (r.kind == Reply::kOk ? FirstLine(r.body.value("error", ""), 500) : r.detail);
      if (r.kind != Reply::kOk) st->ref.Reset();
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

  // The judge's clock around the timing request `treq` run by the reference
  // worker with a null model (the loop alone); none when that fails (the
  // eager baseline's loop stands in). Requires the device held exclusively.
  std::optional<double> NullLoopMs(const TaskRef& task, const JudgeOptions& o, const json& treq) {
    std::lock_guard<std::mutex> ref(st->ref.mu());
    TaskInfo info;
    if (!st->ref.EnsureTask(task, o, &info).ok()) return std::nullopt;
    json nreq = treq;
    nreq["op"] = "baseline";
    nreq["key"] = task.hash;
    nreq["mode"] = "null";
    Reply r = st->ref.Request(nreq, o.run_timeout_s);
    if (r.kind != Reply::kOk) st->ref.Reset();
    if (r.kind != Reply::kOk || !r.body.value("ok", false)) return std::nullopt;
    return r.seconds * 1000.0;
  }

  EvalResult RunImpl(const EvalRequest& req) {
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
    v.precision = PrecisionName(o.precision);
    v.timing_mode = TimingModeName(o.timing);

    // The task: valid, and what its outputs look like (trusted worker).
    TaskInfo info;
    {
      std::shared_lock<DeviceLock> exec(st->exec_mu);
      std::lock_guard<std::mutex> ref(st->ref.mu());
      res.status = st->ref.EnsureTask(req.task, o, &info);
      if (!res.status.ok()) {
        res.bad_input = !info.error.empty();
        return res;
      }
    }
    footprint_ = info.footprint_bytes;
    v.device = st->id.name();
    v.device_index = st->id.index();
    const json env = st->id.env();
    v.env = {{"torch", env.value("torch", "")}, {"triton", env.contains("triton") ? env["triton"] : json(nullptr)},
             {"python", env.value("python", "")}};
    v.task["degenerate"] = info.degenerate;
    v.task["outputs"] = json::parse(info.outputs_json);
    v.timing_source = o.cuda() ? "cuda_events" : "cpu_clock";

    std::string cache_key;
    if (o.use_cache) {
      json k = {{"task", req.task.hash}, {"cand", cand_hash}, {"protocol", v.protocol}, {"device", v.device},
                {"torch", v.env["torch"]}, {"triton", v.env["triton"]}};
      cache_key = Sha256Hex(k.dump());
      if (auto hit = cache_->Get("verdicts", cache_key)) {
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
      MemReservation reservation(&st->id.mem, estimate, alone);
      if (reservation.waited() > 0.01) v.phases["memory_wait"] = reservation.waited();

      // A warm candidate worker of its own.
      WarmWorker ww;
      std::string err;
      const double t_warm = NowSeconds();
      if (!st->warm.Take(&ww, &err)) {
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
      const unsigned long long seed0 = (o.seed ? *o.seed : FreshSeed()) % (1ULL << 40);

      RunCandidate(req, o, tol, strict, info, w, cand_file, task_file, out_dir, seed0, &v);

      v.output_tail = TailOf(w->OutputTail(), 4000);
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
      cache_->Put("verdicts", cache_key, v.ToJson().dump());
    }
    return res;
  }

  void RunCandidate(const EvalRequest& req, const JudgeOptions& o, const Tolerance& tol,
                    const Tolerance& strict, const TaskInfo& info, Worker* w, const std::string& cand_file, const std::string& task_file, const std::string& out_dir,
                    unsigned long long seed0, Verdict* v) {
    (void)info;
    const std::string cand_hash = Sha256Hex(req.candidate_source);
    // 1. Compile: import, build, instantiate (overlapping other candidates'
    //    trials and timing: host work), then one warm call, which runs on the
    //    device and so shares it as trials do, never with a timing run. The
    //    warm call's builds (Triton's JIT, lazy extensions) share the compile
    //    deadline; the call itself gets max(call_timeout_s, 100 x the
    //    reference's call).
    double t_phase = NowSeconds();
    auto phase = [&](const char* name) {
      double now = NowSeconds();
      v->phases[name] = now - t_phase;
      t_phase = now;
    };
    Reply load = w->Request({{"op", "load"},
                             {"task", task_file},
                             {"candidate", cand_file},
                             {"device", st->id.local()},
                             {"precision", PrecisionName(o.precision)},
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
    const double call_s = std::max(o.call_timeout_s, 100.0 * info.call_ms / 1e3);
    const double build_left = std::max(1.0, o.compile_timeout_s - load.seconds);
    // Held from here through the trials (shared holds do not nest).
    std::shared_lock<DeviceLock> shared(st->exec_mu);
    phase("wait");
    Reply warm = w->Request({{"op", "warm"}}, Deadlines{call_s, build_left});
    phase("warm");
    if (warm.build_seconds > 0) v->phases["warm_build"] = warm.build_seconds;
    if (!Usable(warm, "the first call", 0, w, v)) return;
    if (Rejected(*v)) {
      v->status = kStatusRejected;
      return;
    }
    std::vector<std::string> own = load.body.value("own_kernels", std::vector<std::string>{});

    // 2. Correctness trials share the device with other candidates' trials
    //    (not with timing runs); the reference serves one comparison at a time.
    auto ensure = [&]() -> bool {
      TaskInfo again;
      Status s = st->ref.EnsureTask(req.task, o, &again);
      if (!s.ok()) {
        v->status = kStatusRuntimeError;
        v->AddFlag("reference_failed");
        v->error = s.message();
        return false;
      }
      return true;
    };
    {
      std::lock_guard<std::mutex> ref(st->ref.mu());
      if (!ensure()) return;
    }
    bool strict_ok = true;
    json gpu_kernels = json::array(), gpu_kernel_times;
    std::optional<double> gpu_span, gpu_busy;
    json launched = json::array();
    bool use_vmm = o.cuda() && load.body.value("vmm", false);
    // Sends one request that produces outputs (a trial, or `final` for the
    // last timed call), checks its reply with `check`, and has the reference
    // compare the outputs. Outputs go device to device where both sides can;
    // if that fails, this candidate's outputs go through files from then on
    // and the request is repeated. Returns false with the verdict filled.
    auto deliver = [&](json wreq, const std::string& phase, bool is_final, std::shared_lock<DeviceLock>* held,
                       const std::function<bool(const Reply&)>& check) -> bool {
      for (int attempt = 0;; ++attempt) {
        const bool vmm = use_vmm && st->transfer.device_to_device();
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
            std::lock_guard<DeviceLock> alone(st->exec_mu);
            r = w->Request(wreq, o.run_timeout_s);
          }
          held->lock();
        }
        if (vmm && attempt == 0 && r.kind == Reply::kOk && !r.body.value("ok", true) &&
            r.body.value("transport_failed", false)) {
          w->DrainFds();
          use_vmm = false;
          st->transfer.NoteFailure(r.body.value("error", ""));
          continue;
        }
        if (!Usable(r, phase, o.run_timeout_s, w, v) || !check(r)) {
          w->DrainFds();
          return false;
        }
        const json& body = is_final ? r.body["final"] : r.body;
        const json outputs = body.value("outputs", json::array());
        // The judge's own seed, for a trial and a kept timed output alike: never one read from the reply.
        const unsigned long long seed = wreq.value("seed", 0ULL);
        std::vector<int> fds;
        std::string err;
        if (!OutputTransfer::TakeFds(w, outputs, &fds, &err)) {
          v->status = kStatusCrashed;
          v->AddFlag("protocol_violation");
          v->error = err + " during " + phase;
          return false;
        }
        w->DrainFds();  // anything beyond what the reply announced is dropped
        bool same, transport_failed = false;
        {
          std::lock_guard<std::mutex> ref(st->ref.mu());
          if (!ensure()) {
            OutputTransfer::CloseAll(&fds);
            return false;
          }
          same = Compare(req.task, o, tol, strict, seed, outputs, &fds, v, &strict_ok, &transport_failed);
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
    auto trials = [&](int count, unsigned long long base, int index0, std::shared_lock<DeviceLock>* held,
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
          gpu_kernel_times = r.body.value("gpu_kernel_times", json());
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
    const std::map<std::string, Baseline> baselines = st->baselines.ForVerdict(req.task, o, v);
    t_phase += NowSeconds() - t_base;

    // 4. Timing, then checks that the timed calls computed the right thing.
    //    The timed loop holds the device exclusively, and the parent's clock
    //    covers that request alone. Just before it, the reference worker
    //    times the same request with a null model: the loop's own cost under
    //    the machine's load of the moment. The reported times must agree with
    //    the judge's clock once that is taken off (timing_rules.h); a
    //    disagreement of the clock alone is measured again (a scheduling
    //    stall) before it rejects. The outputs the worker kept (the checked
    //    call's, one sampled call's) are written and compared afterwards, on
    //    the seeds the judge derives for those calls.
    std::optional<EagerTiming> eager;
    if (baselines.count("eager")) {
      const Baseline& e = baselines.at("eager");
      eager = EagerTiming{e.median_ms, e.wall_ms, e.gap_ms};
    }
    json treq = TimingRequestJson(o, seed0, "time");
    const int checked = CheckedCall(o.warmup, o.iters, o.input_sets);
    treq["check_index"] = checked;
    Reply tr;
    TimingDecision d;
    for (int attempt = 0; attempt < kClockAttempts; ++attempt) {
      std::optional<double> loop_ms;
      {
        std::lock_guard<DeviceLock> exclusive(st->exec_mu);
        phase(attempt == 0 ? "wait_timing" : "wait_timing_again");
        loop_ms = NullLoopMs(req.task, o, treq);
        tr = w->Request(treq, o.run_timeout_s);
        phase(attempt == 0 ? "timing" : "timing_again");  // the phases of the last attempt
      }
      if (!Usable(tr, "timing", o.run_timeout_s, w, v)) return;
      if (Rejected(*v)) {
        v->status = kStatusRejected;
        return;
      }
      d = DecideTiming(ReportOfReply(tr), o.cuda(), o.warmup, o.iters, eager, loop_ms);
      if (!d.clock_disagrees) break;
    }
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
    // The sampled call: any timed call but the checked one, drawn by the
    // worker after the calls ran; the judge derives its seed from its index.
    std::optional<int> sample;
    if (o.iters > 1) {
      const json s = tr.body.value("sample_index", json());
      if (!s.is_number_integer() || s.get<long long>() < 0 || s.get<long long>() >= o.iters || s.get<int>() == checked) {
        v->status = kStatusRejected;
        v->AddFlag("protocol_violation");
        v->error = "the timing reply names no valid sampled call (sample_index " + s.dump() + ")";
        return;
      }
      sample = s.get<int>();
    }
    const unsigned long long refresh0 = treq.value("refresh_seed0", 0ULL);
    bool final_same;
    int wrong_call = checked;
    {
      std::shared_lock<DeviceLock> again(st->exec_mu);
      auto check = [&](const Reply&) -> bool {
        if (Rejected(*v)) {
          v->status = kStatusRejected;
          return false;
        }
        return true;
      };
      // Timed call i ran on the inputs of seed refresh_seed0 + i.
      auto check_kept = [&](const char* pick, int index) {
        wrong_call = index;
        return deliver({{"op", "final"}, {"out_dir", out_dir}, {"pick", pick}, {"seed", refresh0 + index}},
                       std::string("writing the timed output (") + pick + ")", true, nullptr, check);
      };
      final_same = check_kept("checked", checked) && (!sample || check_kept("sample", *sample));
    }
    if (final_same && o.cuda()) {
      // The profiled trial holds the device alone, as the timing does: its
      // GPU span is the candidate's own kernels, not its neighbours'.
      std::lock_guard<DeviceLock> exclusive(st->exec_mu);
      if (!trials(1, seed0 + 11, o.trials, nullptr, true) || !launched_own()) return;
      if (!strict_ok && o.tolerance != "strict") v->AddFlag("precision_downgrade");
      v->gpu_span_ms = gpu_span;
      v->gpu_busy_ms = gpu_busy;
      if (gpu_busy && gpu_kernel_times.is_array()) {
        // The device's peaks, measured once with the device held alone (as now).
        DeviceFacts facts;
        bool have_facts = false;
        {
          std::lock_guard<std::mutex> ref(st->ref.mu());
          have_facts = st->ref.Facts(o.run_timeout_s, &facts).ok();
        }
        v->profile = MakeProfile(gpu_kernel_times, info, have_facts ? &facts : nullptr);
      }
    }
    if (!final_same) {
      if (v->status == kStatusMismatch) {
        v->AddFlag("timed_output_mismatch");
        v->error = "the output of timed call " + std::to_string(wrong_call + 1) + " of " + std::to_string(o.iters) +
                   " was wrong (work left unfinished when the forward returned, or results cached across calls?): " +
                   v->error;
      }
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
      std::shared_lock<DeviceLock> again(st->exec_mu);
      if (!trials(o.recheck_trials, seed0 + 20011, o.trials + 1, &again, false)) {
        v->AddFlag("failed_recheck");
        return;
      }
      v->AddFlag("speedup_over_10x_rechecked");
    }
  }

  const PoolConfig& cfg_;
  DeviceContext* st;
  JudgeCache* cache_;
  int64_t footprint_ = 0;
};

EvalResult CandidateRun::Run(const EvalRequest& req) { return RunImpl(req); }

}  // namespace

EvalResult JudgeCandidate(const PoolConfig& cfg, DeviceContext* dev, JudgeCache* cache, const EvalRequest& req,
                          int64_t* footprint) {
  CandidateRun run(cfg, dev, cache);
  EvalResult r = run.Run(req);
  if (footprint) *footprint = run.footprint();
  return r;
}

}  // namespace ax
