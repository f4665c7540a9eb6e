#include "broker/remote_judge.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "broker/job_codec.h"
#include "broker/redis_client.h"
#include "common/util.h"

using nlohmann::json;

namespace ax::broker {

namespace {

class RemoteJudge : public Judge {
 public:
  RemoteJudge(RemoteConfig cfg) : cfg_(std::move(cfg)), client_id_(RandomId()) {}

  Status Start() {
    RedisClient probe(cfg_.url);
    Status s = probe.Connect();
    if (!s.ok()) return s;
    // The group reads from the stream's start, so that jobs sent before any
    // worker existed are served too.
    probe.Command({"XGROUP", "CREATE", cfg_.keys.JobStream(cfg_.model), kGroup, "0", "MKSTREAM"});
    devices_ = CountServingDevices(&probe);
    sender_ = std::thread([this] { SendLoop(); });
    reader_ = std::thread([this] { ReadLoop(); });
    return Status::Ok();
  }

  ~RemoteJudge() override {
    stop_ = true;
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
    if (sender_.joinable()) sender_.join();
    if (reader_.joinable()) reader_.join();
    Fail(Status::Error(StatusCode::kError, "the remote judge was closed"));
    RedisClient c(cfg_.url);
    if (c.Connect().ok()) c.Command({"DEL", cfg_.keys.Results(client_id_)});
  }

  std::future<EvalResult> Submit(EvalRequest req) override {
    auto p = std::make_shared<std::promise<EvalResult>>();
    auto fut = p->get_future();
    Job job;
    job.kind = JobKind::kEval;
    job.req = std::move(req);
    const double t0 = NowSeconds();
    Enqueue(std::move(job), [p, t0](const JobResult& r) {
      EvalResult e;
      e.status = r.status;
      e.bad_input = r.bad_input;
      e.verdict = r.verdict;
      if (r.status.ok()) {
        e.verdict.worker = r.worker;
        // What the broker added: the round trip less the worker's own time.
        e.verdict.phases["broker"] = std::max(0.0, NowSeconds() - t0 - r.judge_s);
      }
      p->set_value(std::move(e));
    });
    return fut;
  }

  int Devices() const override { return devices_; }

  Status CheckTask(const TaskRef& task, const JudgeOptions& opts, TaskInfo* info) override {
    JobResult r = Sync(JobKind::kCheck, task, opts);
    *info = r.info;
    return r.status;
  }

  Status Trace(const TaskRef& task, const JudgeOptions& opts, json* graph) override {
    JobResult r = Sync(JobKind::kTrace, task, opts);
    if (r.status.ok()) *graph = r.graph;
    return r.status;
  }

 private:
  struct Pending {
    std::string payload;
    std::string entry;  // the job stream's entry id, once sent
    double sent_at = 0;
    std::function<void(const JobResult&)> deliver;
  };

  JobResult Sync(JobKind kind, const TaskRef& task, const JudgeOptions& opts) {
    auto p = std::make_shared<std::promise<JobResult>>();
    auto fut = p->get_future();
    Job job;
    job.kind = kind;
    job.req.task = task;
    job.req.options = opts;
    Enqueue(std::move(job), [p](const JobResult& r) { p->set_value(r); });
    return fut.get();
  }

  void Enqueue(Job job, std::function<void(const JobResult&)> deliver) {
    job.id = RandomId();
    Pending pe;
    pe.payload = EncodeJob(job);
    pe.deliver = std::move(deliver);
    std::unique_lock<std::mutex> lock(mu_);
    if (!broken_.ok()) {
      JobResult r;
      r.status = broken_;
      lock.unlock();
      pe.deliver(r);
      return;
    }
    if (pe.payload.size() > kMaxJobBytes) {
      JobResult r;
      r.status = Status::Error(StatusCode::kInvalidInput, "the job is " + std::to_string(pe.payload.size()) +
                                                              " bytes, over the broker's limit of " +
                                                              std::to_string(kMaxJobBytes));
      r.bad_input = true;
      lock.unlock();
      pe.deliver(r);
      return;
    }
    pending_[job.id] = std::move(pe);
    outbox_.push_back(job.id);
    cv_.notify_all();
  }

  // Fails every pending request (and, for a broken broker, every later one).
  void Fail(const Status& s) {
    std::map<std::string, Pending> failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.code() == StatusCode::kDeadlineExceeded && broken_.ok()) broken_ = s;
      failed.swap(pending_);
      outbox_.clear();
    }
    for (auto& [id, pe] : failed) {
      JobResult r;
      r.job_id = id;
      r.status = s;
      pe.deliver(r);
    }
  }

  // Tracks outages: true once the broker has been unreachable past the
  // deadline (everything pending has then failed).
  bool Outage(const Status& s) {
    std::lock_guard<std::mutex> lock(outage_mu_);
    const double now = NowSeconds();
    if (down_since_ == 0) {
      down_since_ = now;
      std::fprintf(stderr, "judge: %s; reconnecting (the run stops if it stays unreachable for %.0f s)\n",
                   s.message().c_str(), cfg_.deadline_s);
    }
    return now - down_since_ >= cfg_.deadline_s;
  }

  void Recovered() {
    std::lock_guard<std::mutex> lock(outage_mu_);
    if (down_since_ != 0) std::fprintf(stderr, "judge: broker %s is back\n", cfg_.url.Redacted().c_str());
    down_since_ = 0;
  }

  Status DeadlineStatus(const Status& s) {
    return Status::Error(StatusCode::kDeadlineExceeded,
                         "broker " + cfg_.url.Redacted() + " unreachable for " +
                             std::to_string(static_cast<int>(cfg_.deadline_s)) + " s (" + FirstLine(s.message(), 200) +
                             "); the run stops here and --resume continues it");
  }

  // Connects c if needed; false once the deadline has passed (all failed).
  bool EnsureConnected(RedisClient* c, Backoff* backoff) {
    while (!stop_ && !c->connected()) {
      Status s = c->Connect();
      if (s.ok()) {
        backoff->Reset();
        return true;
      }
      if (s.code() == StatusCode::kUnauthenticated || Outage(s)) {
        Fail(s.code() == StatusCode::kUnauthenticated ? s : DeadlineStatus(s));
        return false;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff->Next()));
    }
    return c->connected();
  }

  void SendLoop() {
    RedisClient c(cfg_.url);
    Backoff backoff;
    const std::string stream = cfg_.keys.JobStream(cfg_.model);
    const std::string results = cfg_.keys.Results(client_id_);
    while (!stop_) {
      std::string id, payload;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return stop_ || !outbox_.empty(); });
        if (stop_) return;
        if (outbox_.empty()) continue;
        id = outbox_.front();
        auto it = pending_.find(id);
        if (it == pending_.end()) {
          outbox_.pop_front();
          continue;
        }
        payload = it->second.payload;
      }
      if (!EnsureConnected(&c, &backoff)) continue;
      RedisValue v;
      Status s = c.Command({"XADD", stream, "*", "id", id, "reply_to", results, "job", payload}, &v);
      if (!s.ok()) {
        if (s.code() == StatusCode::kUnavailable) {
          if (Outage(s)) Fail(DeadlineStatus(s));
          continue;  // the job stays first in the outbox
        }
        // The broker refused the job itself (out of memory, say): that job fails.
        Deliver(id, [&] {
          JobResult r;
          r.status = Status::Error(StatusCode::kError, "broker " + cfg_.url.Redacted() + " refused the job: " + s.message());
          return r;
        }());
        std::lock_guard<std::mutex> lock(mu_);
        if (!outbox_.empty() && outbox_.front() == id) outbox_.pop_front();
        continue;
      }
      Recovered();
      std::lock_guard<std::mutex> lock(mu_);
      if (!outbox_.empty() && outbox_.front() == id) outbox_.pop_front();
      auto it = pending_.find(id);
      if (it != pending_.end()) {
        it->second.entry = v.str;
        it->second.sent_at = NowSeconds();
      }
    }
  }

  void Deliver(const std::string& id, const JobResult& r) {
    Pending pe;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;  // answered already: exactly one result per job
      pe = std::move(it->second);
      pending_.erase(it);
    }
    pe.deliver(r);
  }

  // After a reconnect: jobs that were sent but that the broker no longer
  // holds (it restarted without them) and that no worker answered go again.
  void ResendLost(RedisClient* c) {
    std::vector<std::pair<std::string, std::string>> sent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, pe] : pending_) {
        if (!pe.entry.empty()) sent.emplace_back(id, pe.entry);
      }
    }
    const std::string stream = cfg_.keys.JobStream(cfg_.model);
    int again = 0;
    for (auto& [id, entry] : sent) {
      RedisValue range, done;
      if (!c->Command({"XRANGE", stream, entry, entry}, &range).ok()) return;
      if (!range.elements.empty()) continue;
      if (!c->Command({"EXISTS", cfg_.keys.Done(id)}, &done).ok()) return;
      if (done.integer > 0) continue;  // answered: the result is on our stream
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) continue;
      it->second.entry.clear();
      outbox_.push_back(id);
      ++again;
    }
    if (again) {
      std::fprintf(stderr, "judge: the broker lost %d job(s) while it was away; sent again\n", again);
      cv_.notify_all();
    }
  }

  // The devices of the live workers that serve this client's stream (at
  // least 1), so that a bench keeps them all busy.
  int CountServingDevices(RedisClient* c) {
    RedisValue names;
    if (!c->Command({"SMEMBERS", cfg_.keys.Workers()}, &names).ok()) return 1;
    int n = 0;
    for (const auto& name : names.elements) {
      RedisValue h;
      if (!c->Command({"HMGET", cfg_.keys.Worker(name.str), "model", "devices"}, &h).ok() || h.elements.size() < 2 ||
          h.elements[0].nil()) {
        continue;
      }
      if (cfg_.model != kAnyModel && h.elements[0].str != cfg_.model) continue;
      n += 1 + static_cast<int>(std::count(h.elements[1].str.begin(), h.elements[1].str.end(), ','));
    }
    return std::max(1, n);
  }

  void WarnIfUnserved(RedisClient* c) {
    double oldest = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, pe] : pending_) {
        if (pe.sent_at > 0 && (oldest == 0 || pe.sent_at < oldest)) oldest = pe.sent_at;
      }
    }
    const double now = NowSeconds();
    if (oldest == 0 || now - oldest < cfg_.warn_idle_s || now - last_warn_ < 60) return;
    RedisValue names;
    if (!c->Command({"SMEMBERS", cfg_.keys.Workers()}, &names).ok()) return;
    int serving = 0;
    for (const auto& n : names.elements) {
      RedisValue model;
      if (!c->Command({"HGET", cfg_.keys.Worker(n.str), "model"}, &model).ok() || model.nil()) continue;
      if (cfg_.model == kAnyModel || model.str == cfg_.model) ++serving;
    }
    if (serving == 0) {
      std::fprintf(stderr,
                   "judge: jobs have waited %.0f s at %s and no worker serves model '%s' (start one: adaexplore worker "
                   "--broker URL)\n",
                   now - oldest, cfg_.url.Redacted().c_str(), cfg_.model.c_str());
      last_warn_ = now;
    }
  }

  void ReadLoop() {
    RedisClient c(cfg_.url, 5.0);
    Backoff backoff;
    const std::string results = cfg_.keys.Results(client_id_);
    std::string last = "0-0";
    bool reconnected = false;
    double last_check = NowSeconds();
    while (!stop_) {
      if (!c.connected()) {
        if (!EnsureConnected(&c, &backoff)) continue;
        reconnected = true;
      }
      if (reconnected) {
        ResendLost(&c);
        reconnected = false;
      }
      RedisValue v;
      Status s = c.Command({"XREAD", "COUNT", "100", "BLOCK", "1000", "STREAMS", results, last}, &v, 1.0);
      if (!s.ok()) {
        if (s.code() == StatusCode::kUnavailable) {
          if (Outage(s)) Fail(DeadlineStatus(s));
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        continue;
      }
      Recovered();
      // [[stream, [[id, [f, v, ...]], ...]]]
      for (const auto& stream : v.elements) {
        if (stream.elements.size() < 2) continue;
        for (const auto& entry : stream.elements[1].elements) {
          if (entry.elements.size() < 2) continue;
          last = entry.elements[0].str;
          auto payload = EntryField(entry.elements[1], "result");
          JobResult r;
          if (payload && DecodeResult(*payload, &r).ok()) Deliver(r.job_id, r);
          c.Command({"XDEL", results, last});
        }
      }
      if (NowSeconds() - last_check > 5) {
        // Results of a client that died do not stay for ever.
        c.Command({"EXPIRE", results, "86400"});
        WarnIfUnserved(&c);
        last_check = NowSeconds();
      }
    }
  }

  RemoteConfig cfg_;
  const std::string client_id_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Pending> pending_;
  std::deque<std::string> outbox_;
  Status broken_;
  std::mutex outage_mu_;
  double down_since_ = 0;
  double last_warn_ = 0;
  std::thread sender_, reader_;
  int devices_ = 1;
};

}  // namespace

Status MakeRemoteJudge(const RemoteConfig& cfg, std::unique_ptr<Judge>* out) {
  if (!SafeName(cfg.model)) return Status::Error(StatusCode::kInvalidInput, "bad judge model '" + cfg.model + "'");
  auto j = std::make_unique<RemoteJudge>(cfg);
  Status s = j->Start();
  if (!s.ok()) return s;
  *out = std::move(j);
  return Status::Ok();
}

}  // namespace ax::broker
