#include "broker/judge_service.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "broker/job_codec.h"
#include "broker/redis_client.h"
#include "common/util.h"

using nlohmann::json;

namespace ax::broker {

namespace {

// A job entry taken from a stream.
struct Entry {
  std::string stream, id;
  RedisValue fields;
  long long deliveries = 1;
};

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

class Service {
 public:
  Service(const ServiceConfig& cfg, Judge* pool, const std::atomic<bool>* stop)
      : cfg_(cfg), pool_(pool), stop_(stop), streams_{cfg.keys.JobStream(cfg.model), cfg.keys.JobStream(kAnyModel)} {}

  Status Run() {
    RedisClient c(cfg_.url);
    Status s = c.Connect();
    if (!s.ok()) return s;
    CreateGroups(&c);
    Heartbeat(&c);
    started_ = WallSeconds();
    Log("serving " + streams_[0] + " and " + streams_[1] + " at " + cfg_.url.Redacted() + " with " +
        std::to_string(cfg_.slots) + " job slot(s)");
    std::vector<std::thread> slots;
    for (int i = 0; i < cfg_.slots; ++i) slots.emplace_back([this] { SlotLoop(); });
    Maintain(&c);  // until stop and the slots are idle
    for (auto& t : slots) t.join();
    if (c.connected() || c.Connect().ok()) {
      c.Command({"DEL", cfg_.keys.Worker(cfg_.name)});
      c.Command({"SREM", cfg_.keys.Workers(), cfg_.name});
    }
    Log("stopped after " + std::to_string(done_.load()) + " job(s)");
    return Status::Ok();
  }

 private:
  void Log(const std::string& line) {
    if (cfg_.log) cfg_.log(line);
  }

  void CreateGroups(RedisClient* c) {
    // From the stream's start: jobs sent before any worker existed are served.
    for (const auto& s : streams_) c->Command({"XGROUP", "CREATE", s, kGroup, "0", "MKSTREAM"});
  }

  // Waits for the broker after a lost connection (quietly after the first line).
  bool Reconnect(RedisClient* c, Backoff* b) {
    while (!*stop_ || busy_ > 0) {
      Status s = c->Connect();
      if (s.ok()) {
        b->Reset();
        CreateGroups(c);
        return true;
      }
      {
        std::lock_guard<std::mutex> lock(log_mu_);
        if (!outage_logged_) {
          Log(s.message() + "; reconnecting");
          outage_logged_ = true;
        }
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(b->Next()));
    }
    return false;
  }

  void Connected() {
    std::lock_guard<std::mutex> lock(log_mu_);
    if (outage_logged_) Log("broker " + cfg_.url.Redacted() + " is back");
    outage_logged_ = false;
  }

  // Runs cmd until it succeeds (reconnecting) or the worker stops idle.
  bool Reliably(RedisClient* c, Backoff* b, const std::vector<std::string>& argv, RedisValue* out = nullptr) {
    while (true) {
      if (!c->connected() && !Reconnect(c, b)) return false;
      Status s = c->Command(argv, out);
      if (s.ok()) {
        Connected();
        return true;
      }
      if (s.code() != StatusCode::kUnavailable) {
        Log("broker refused " + argv[0] + ": " + FirstLine(s.message(), 200));
        return false;
      }
    }
  }

  void SlotLoop() {
    RedisClient c(cfg_.url, 5.0);
    Backoff b;
    while (!*stop_) {
      Entry e;
      bool have = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!reclaimed_.empty()) {
          e = std::move(reclaimed_.front());
          reclaimed_.pop_front();
          have = true;
        }
      }
      if (!have) {
        if (!c.connected() && !Reconnect(&c, &b)) return;
        RedisValue v;
        Status s = c.Command({"XREADGROUP", "GROUP", kGroup, cfg_.name, "COUNT", "1", "BLOCK", "1000", "STREAMS",
                              streams_[0], streams_[1], ">", ">"},
                             &v, 1.0);
        if (!s.ok()) {
          if (s.message().rfind("NOGROUP", 0) == 0) CreateGroups(&c);  // the broker lost its streams
          else if (s.code() != StatusCode::kUnavailable) std::this_thread::sleep_for(std::chrono::milliseconds(500));
          continue;
        }
        Connected();
        // [[stream, [[id, fields]]], ...]: COUNT applies per stream, so a
        // read can bring one job from each; the first is judged now, the
        // others wait in hand (their leases kept fresh) for the next free slot.
        std::vector<Entry> got;
        for (const auto& st : v.elements) {
          if (st.elements.size() < 2) continue;
          for (const auto& en : st.elements[1].elements) {
            if (en.elements.size() < 2) continue;
            Entry x;
            x.stream = st.elements[0].str;
            x.id = en.elements[0].str;
            x.fields = en.elements[1];
            got.push_back(std::move(x));
          }
        }
        if (got.empty()) continue;
        e = std::move(got[0]);
        have = true;
        if (got.size() > 1) {
          std::lock_guard<std::mutex> lock(mu_);
          for (size_t i = 1; i < got.size(); ++i) {
            in_hand_[got[i].id] = got[i].stream;
            reclaimed_.push_back(std::move(got[i]));
          }
        }
      }
      Handle(&c, &b, e);
    }
  }

  void Handle(RedisClient* c, Backoff* b, const Entry& e) {
    ++busy_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_hand_[e.id] = e.stream;
    }
    const double t0 = NowSeconds();
    const std::string job_id = EntryField(e.fields, "id").value_or("");
    const std::string reply_to = EntryField(e.fields, "reply_to").value_or("");
    const bool can_reply = SafeName(job_id) && reply_to.rfind(cfg_.keys.ResultsPrefix(), 0) == 0 &&
                           SafeName(reply_to.substr(cfg_.keys.ResultsPrefix().size()));
    JobResult r;
    r.job_id = job_id;
    r.worker = cfg_.name;
    Job job;
    Status decoded = DecodeJob(EntryField(e.fields, "job").value_or(""), cfg_.max_job_bytes, &job);
    if (decoded.ok() && job.id != job_id) decoded = Status::Error(StatusCode::kInvalidInput, "malformed job: ids differ");
    RedisValue done;
    const bool answered = can_reply && Reliably(c, b, {"EXISTS", cfg_.keys.Done(job_id)}, &done) && done.integer > 0;
    if (!can_reply) {
      Log("dropped entry " + e.id + " of " + e.stream + ": no valid job id or result stream");
    } else if (answered) {
      // Another worker answered it (this one was slow to acknowledge).
    } else if (!decoded.ok()) {
      r.status = decoded;
      r.bad_input = true;
      Log("job " + job_id + ": " + decoded.message());
    } else if (e.deliveries > cfg_.max_deliveries) {
      Crashed(job, e, &r);
    } else {
      Judge1(job, &r);
    }
    r.judge_s = NowSeconds() - t0;
    if (can_reply && !answered) Publish(c, b, reply_to, r);
    // Acknowledged and removed only after the answer is out: a worker that
    // dies before this leaves the job to be claimed again.
    Reliably(c, b, {"XACK", e.stream, kGroup, e.id});
    Reliably(c, b, {"XDEL", e.stream, e.id});
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_hand_.erase(e.id);
      done_times_.push_back(NowSeconds());
    }
    ++done_;
    --busy_;
  }

  void Crashed(const Job& job, const Entry& e, JobResult* r) {
    const std::string why = "the job was in hand of " + std::to_string(e.deliveries - 1) +
                            " judge workers that died before answering; it is not judged again";
    Log("job " + job.id + ": " + why);
    if (job.kind != JobKind::kEval) {
      r->status = Status::Error(StatusCode::kError, why);
      return;
    }
    Verdict& v = r->verdict;
    v.status = kStatusCrashed;
    v.correct = false;
    v.error = why;
    v.AddFlag("judge_workers_lost");
    v.task = {{"path", job.req.task.path}, {"name", job.req.task.name}, {"hash", job.req.task.hash}};
    v.candidate = {{"path", job.req.candidate_path}, {"hash", Sha256Hex(job.req.candidate_source)}};
  }

  void Judge1(Job& job, JobResult* r) {
    job.req.options.device = cfg_.device_request;
    Log("job " + job.id + ": " + JobKindName(job.kind) + " " + job.req.task.name);
    switch (job.kind) {
      case JobKind::kEval: {
        EvalResult e = pool_->Submit(job.req).get();
        r->status = e.status;
        r->bad_input = e.bad_input;
        r->verdict = e.verdict;
        if (e.status.ok()) {
          Log("job " + job.id + ": " + e.verdict.status + (e.verdict.cached ? " (cached)" : ""));
        }
        break;
      }
      case JobKind::kCheck:
        r->status = pool_->CheckTask(job.req.task, job.req.options, &r->info);
        r->bad_input = !r->info.error.empty();
        break;
      case JobKind::kTrace:
        r->status = pool_->Trace(job.req.task, job.req.options, &r->graph);
        break;
    }
    if (!r->status.ok()) Log("job " + job.id + ": " + FirstLine(r->status.message(), 200));
  }

  void Publish(RedisClient* c, Backoff* b, const std::string& reply_to, const JobResult& r) {
    RedisValue set;
    if (!Reliably(c, b, {"SET", cfg_.keys.Done(r.job_id), cfg_.name, "NX", "EX", "86400"}, &set)) return;
    if (set.nil()) return;  // another worker published first
    Reliably(c, b, {"XADD", reply_to, "MAXLEN", "~", "100000", "*", "result", EncodeResult(r)});
    Reliably(c, b, {"EXPIRE", reply_to, "86400"});
  }

  void Heartbeat(RedisClient* c) {
    int in_flight = 0;
    int last_minute = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight = static_cast<int>(in_hand_.size());
      const double now = NowSeconds();
      while (!done_times_.empty() && done_times_.front() < now - 60) done_times_.pop_front();
      last_minute = static_cast<int>(done_times_.size());
    }
    std::string devices, names;
    for (const auto& d : cfg_.devices) devices += (devices.empty() ? "" : ",") + d;
    for (const auto& n : cfg_.device_names) names += (names.empty() ? "" : ",") + n;
    const std::string key = cfg_.keys.Worker(cfg_.name);
    c->Command({"HSET", key, "model", cfg_.model, "devices", devices, "device_names", names, "host", Hostname(),
                "pid", std::to_string(getpid()), "slots", std::to_string(cfg_.slots), "in_flight",
                std::to_string(in_flight), "done", std::to_string(done_.load()), "done_last_minute",
                std::to_string(last_minute), "started", std::to_string(started_), "heartbeat",
                std::to_string(WallSeconds()), "state", *stop_ ? "stopping" : "serving"});
    c->Command({"EXPIRE", key, std::to_string(static_cast<int>(cfg_.heartbeat_s * 5 + 1))});
    c->Command({"SADD", cfg_.keys.Workers(), cfg_.name});
  }

  static double WallSeconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  // Keeps the claims on the jobs in hand fresh (XCLAIM ... JUSTID resets
  // their idle time without counting a delivery) and claims the jobs of
  // workers that went silent.
  void RefreshLeases(RedisClient* c) {
    std::map<std::string, std::vector<std::string>> by_stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, stream] : in_hand_) by_stream[stream].push_back(id);
    }
    for (auto& [stream, ids] : by_stream) {
      std::vector<std::string> argv = {"XCLAIM", stream, kGroup, cfg_.name, "0"};
      argv.insert(argv.end(), ids.begin(), ids.end());
      argv.push_back("JUSTID");
      c->Command(argv);
    }
  }

  void ClaimStale(RedisClient* c) {
    if (*stop_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Claim no more than this worker has free slots for.
      if (static_cast<int>(in_hand_.size() + reclaimed_.size()) >= cfg_.slots) return;
    }
    const std::string idle_ms = std::to_string(static_cast<long long>(cfg_.lease_s * 1000));
    for (const auto& stream : streams_) {
      RedisValue v;
      if (!c->Command({"XAUTOCLAIM", stream, kGroup, cfg_.name, idle_ms, "0-0", "COUNT", "1"}, &v).ok()) continue;
      if (v.elements.size() < 2) continue;
      for (const auto& en : v.elements[1].elements) {
        if (en.type != RedisValue::kArray || en.elements.size() < 2 || en.elements[1].nil()) continue;
        Entry e;
        e.stream = stream;
        e.id = en.elements[0].str;
        e.fields = en.elements[1];
        RedisValue p;
        if (c->Command({"XPENDING", stream, kGroup, e.id, e.id, "1"}, &p).ok() && !p.elements.empty() &&
            p.elements[0].elements.size() >= 4) {
          e.deliveries = p.elements[0].elements[3].integer;
        }
        Log("claimed job entry " + e.id + " of " + stream + " from a silent worker (delivery " +
            std::to_string(e.deliveries) + ")");
        std::lock_guard<std::mutex> lock(mu_);
        reclaimed_.push_back(std::move(e));
      }
      // Entries deleted meanwhile are dropped from the group's pending list.
      if (v.elements.size() >= 3) {
        for (const auto& gone : v.elements[2].elements) c->Command({"XACK", stream, kGroup, gone.str});
      }
    }
  }

  void Maintain(RedisClient* c) {
    Backoff b;
    double last_beat = 0, last_lease = 0, last_claim = 0;
    while (!*stop_ || busy_ > 0) {
      if (!c->connected() && !Reconnect(c, &b)) break;
      const double now = NowSeconds();
      if (now - last_lease >= cfg_.lease_s / 3) {
        RefreshLeases(c);
        last_lease = now;
      }
      if (now - last_beat >= cfg_.heartbeat_s) {
        Heartbeat(c);
        last_beat = now;
      }
      if (now - last_claim >= std::max(0.5, cfg_.lease_s / 4)) {
        ClaimStale(c);
        last_claim = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  const ServiceConfig& cfg_;
  Judge* pool_;
  const std::atomic<bool>* stop_;
  const std::vector<std::string> streams_;
  std::mutex mu_;
  std::map<std::string, std::string> in_hand_;  // entry id -> stream
  std::deque<Entry> reclaimed_;
  std::deque<double> done_times_;
  std::atomic<int> busy_{0};
  std::atomic<long long> done_{0};
  double started_ = 0;
  std::mutex log_mu_;
  bool outage_logged_ = false;
};

}  // namespace

Status RunJudgeService(const ServiceConfig& cfg, Judge* pool, const std::atomic<bool>* stop) {
  if (!SafeName(cfg.name)) {
    return Status::Error(StatusCode::kInvalidInput, "bad worker name '" + cfg.name + "' (letters, digits, - _ .)");
  }
  return Service(cfg, pool, stop).Run();
}

}  // namespace ax::broker
