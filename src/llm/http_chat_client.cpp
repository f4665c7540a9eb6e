#include "llm/http_chat_client.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <random>

#include "common/util.h"

namespace ax::llm {

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

struct HttpChatClient::Core {
  std::unique_ptr<Wire> wire;
  ClientConfig cfg;
  HttpLoop* loop = nullptr;  // kept alive by the client that owns this core
  std::shared_ptr<RateLimiter> limiter;
  std::shared_ptr<Accountant> accountant;
  std::shared_ptr<CallSink> sink;
  std::atomic<bool> closed{false};
  std::mutex rng_mu;
  std::mt19937_64 rng;

  double Jittered(int failed, double retry_after) {
    std::lock_guard<std::mutex> lock(rng_mu);
    return BackoffDelay(cfg.retry, failed, retry_after, rng);
  }
};

struct HttpChatClient::Call {
  std::shared_ptr<Core> core;
  ChatRequest req;
  ChatCallback done;
  HttpRequest http;
  int max_tokens = 0;
  int64_t est_tokens = 0;
  double start = 0;
  double unix_start = 0;
  int attempts = 0;
  std::vector<AttemptLog> log;
};

namespace {

std::string Prefix(const WireInfo& w) { return w.provider + " " + w.model + ": "; }

std::string Num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

// The one line a person reads when a call fails for good.
std::string FailureText(const WireInfo& w, ErrorKind kind, const HttpResponse& r,
                        const std::string& detail, int attempts, double timeout_s) {
  std::string p = Prefix(w);
  std::string http = "HTTP " + std::to_string(r.status);
  std::string tries = " after " + std::to_string(attempts) + (attempts == 1 ? " attempt" : " attempts");
  std::string key = w.key_var.empty() ? "the server's API key" : w.key_var;
  switch (kind) {
    case ErrorKind::kAuth:
      return p + http + (r.status == 403 ? " permission denied" : " authentication failed") + " (" +
             detail + "); check " + key + (r.status == 403 ? " and its access to this " + w.noun : "");
    case ErrorKind::kQuota:
      return p + http + " quota exhausted (" + detail + "); add credit or raise the quota for " + key;
    case ErrorKind::kNotFound:
      return p + http + " not found (" + detail + "); check the " + w.noun + " name '" + w.model +
             "' and the endpoint " + w.endpoint;
    case ErrorKind::kBadRequest:
      return p + http + " request rejected (" + detail +
             "); check the request parameters (max_tokens, temperature, reasoning_effort) for this " + w.noun;
    case ErrorKind::kRateLimited:
      return p + "still rate limited (HTTP 429)" + tries + " (" + detail +
             "); lower the run's concurrency or requests/tokens-per-minute limits";
    case ErrorKind::kServer:
      return p + "server error " + http + tries + " (" + detail + ")";
    case ErrorKind::kTimeout:
      return p + "no reply within " + Num(timeout_s) + " s" + tries +
             "; raise the per-call timeout or check the server";
    case ErrorKind::kConnection:
      return p + "connection failed" + tries + " (" + detail + "); check that " + w.endpoint +
             " is reachable";
    case ErrorKind::kMalformed:
      return p + "malformed reply" + tries + " (" + detail + ")";
    case ErrorKind::kShutdown:
      return p + "call abandoned: the client shut down";
    default:
      return p + detail;
  }
}

}  // namespace

HttpChatClient::HttpChatClient(std::unique_ptr<Wire> wire, ClientConfig cfg, RunServices s)
    : core_(std::make_shared<Core>()) {
  if (!s.loop) s.loop = std::make_shared<HttpLoop>();
  loop_ = s.loop;
  core_->wire = std::move(wire);
  core_->loop = s.loop.get();
  core_->limiter = std::move(s.limiter);
  core_->accountant = std::move(s.accountant);
  core_->sink = std::move(s.sink);
  uint64_t seed = cfg.seed ? cfg.seed
                           : uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  core_->rng.seed(seed);
  core_->cfg = std::move(cfg);
}

HttpChatClient::~HttpChatClient() {
  core_->closed = true;
  // If the loop was ours alone this stops it here, completing calls in flight.
  loop_.reset();
}

std::string HttpChatClient::Describe() const {
  return core_->wire->info().provider + ":" + core_->wire->info().model;
}

namespace {

using CallPtr = std::shared_ptr<HttpChatClient::Call>;

}  // namespace

// The steps of one call, as free functions over the shared call state.
struct HttpChatClient::Steps {
  static void Finish(const CallPtr& c, ChatResult res) {
    Core& k = *c->core;
    const WireInfo& w = k.wire->info();
    res.provider = w.provider;
    res.model = w.model;
    res.attempts = c->attempts;
    res.latency_s = NowSeconds() - c->start;
    if (!res.ok()) res.status = Status::Error(k.wire->Scrub(res.status.message()));
    if (k.accountant)
      res.cost_usd = k.accountant->Record(c->req.task, w.model, res.reply.model, res.usage,
                                          res.latency_s, res.ok());
    if (k.sink) {
      CallRecord rec;
      rec.unix_time = c->unix_start;
      rec.provider = w.provider;
      rec.model = w.model;
      rec.task = c->req.task;
      rec.purpose = c->req.purpose;
      rec.request_hash = RequestHash(c->req);
      rec.request = c->req;
      rec.result = res;
      rec.attempt_log = c->log;
      k.sink->Write(rec);
    }
    ChatCallback done = std::move(c->done);
    done(std::move(res));
  }

  static void Fail(const CallPtr& c, ErrorKind kind, std::string msg) {
    ChatResult res;
    res.error = kind;
    res.status = Status::Error(std::move(msg));
    Finish(c, std::move(res));
  }

  static void Attempt(const CallPtr& c) {
    Core& k = *c->core;
    if (k.closed) return Fail(c, ErrorKind::kShutdown, Prefix(k.wire->info()) + "call abandoned: the client shut down");
    if (!k.limiter) return Send(c);
    HttpLoop* loop = k.loop;
    k.limiter->Acquire(
        c->est_tokens, [c] { Send(c); },
        [loop](double d, std::function<void()> fn) { loop->After(d, std::move(fn)); });
  }

  static void Send(const CallPtr& c) {
    Core& k = *c->core;
    if (k.closed) {
      if (k.limiter) k.limiter->Release(c->est_tokens, 0);
      return Fail(c, ErrorKind::kShutdown, Prefix(k.wire->info()) + "call abandoned: the client shut down");
    }
    c->attempts++;
    k.loop->Submit(c->http, [c](HttpResponse r) { OnResponse(c, std::move(r)); });
  }

  static void OnResponse(const CallPtr& c, HttpResponse r) {
    Core& k = *c->core;
    const WireInfo& w = k.wire->info();
    Classification cls = ClassifyHttp(r);
    WireReply wr;
    std::string detail;
    if (cls.kind == ErrorKind::kNone) {
      Status s = k.wire->Parse(r.body, &wr);
      if (!s.ok()) {
        cls = {ErrorKind::kMalformed, true};
        detail = s.message();
      }
    } else if (!r.transport_error.empty()) {
      detail = r.transport_error;
    } else {
      detail = ProviderErrorMessage(r.body);
      if (detail.empty()) detail = "empty body";
    }
    if (k.limiter)
      k.limiter->Release(c->est_tokens, cls.kind == ErrorKind::kNone ? wr.usage.total() : 0);

    AttemptLog entry;
    entry.http_status = r.status;
    entry.elapsed_s = r.elapsed_s;
    if (cls.kind != ErrorKind::kNone)
      entry.error = k.wire->Scrub(std::string(ErrorKindName(cls.kind)) + ": " + detail);
    c->log.push_back(entry);

    if (cls.kind == ErrorKind::kNone) return Done(c, std::move(wr), r.request_id);

    if (cls.retryable && c->attempts < k.cfg.retry.max_attempts && !k.closed) {
      if (r.retry_after_s > k.cfg.retry.max_retry_after_s) {
        return Fail(c, cls.kind,
                    Prefix(w) + "server asked to wait " + Num(r.retry_after_s) +
                        " s (Retry-After), above the " + Num(k.cfg.retry.max_retry_after_s) +
                        " s limit; gave up after " + std::to_string(c->attempts) + " attempts (" +
                        detail + ")");
      }
      double delay = k.Jittered(c->attempts, r.retry_after_s);
      c->log.back().wait_after_s = delay;
      k.loop->After(delay, [c] { Attempt(c); });
      return;
    }
    Fail(c, cls.kind, FailureText(w, cls.kind, r, detail, c->attempts, k.cfg.timeout_s));
  }

  static void Done(const CallPtr& c, WireReply wr, const std::string& request_id) {
    Core& k = *c->core;
    const WireInfo& w = k.wire->info();
    ChatResult res;
    res.usage = wr.usage;
    res.reply.text = std::move(wr.text);
    res.reply.finish = wr.finish;
    res.reply.raw_finish = wr.raw_finish;
    res.reply.model = wr.model;
    res.reply.request_id = request_id;
    if (wr.finish == FinishReason::kLength) {
      res.error = ErrorKind::kTruncated;
      std::string why = Prefix(w) + "reply truncated at the output limit (max_tokens=" +
                        std::to_string(c->max_tokens) + ", finish_reason '" + wr.raw_finish + "'";
      if (res.usage.reasoning_tokens > 0)
        why += ", " + std::to_string(res.usage.reasoning_tokens) + " tokens spent on reasoning";
      res.status = Status::Error(why + "); raise max_tokens");
    } else if (Trim(res.reply.text).empty()) {
      res.error = ErrorKind::kEmpty;
      res.status = Status::Error(Prefix(w) + "empty reply (finish_reason '" + wr.raw_finish + "')");
    }
    Finish(c, std::move(res));
  }
};

void HttpChatClient::ChatAsync(ChatRequest req, ChatCallback done) {
  auto c = std::make_shared<Call>();
  c->core = core_;
  c->start = NowSeconds();
  c->unix_start = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  c->done = std::move(done);
  c->req = std::move(req);
  const WireInfo& w = core_->wire->info();
  if (c->req.messages.empty())
    return Steps::Fail(c, ErrorKind::kConfig, Prefix(w) + "request has no messages");
  for (const auto& m : c->req.messages)
    if (m.role != "user" && m.role != "assistant")
      return Steps::Fail(c, ErrorKind::kConfig,
                         Prefix(w) + "message role '" + m.role + "' is not 'user' or 'assistant'");
  if (core_->accountant) {
    Status b = core_->accountant->CheckBudget();
    if (!b.ok()) return Steps::Fail(c, ErrorKind::kBudget, Prefix(w) + b.message());
  }
  c->max_tokens = c->req.max_tokens > 0 ? c->req.max_tokens : core_->cfg.default_max_tokens;
  c->est_tokens = EstimatePromptTokens(c->req) + c->max_tokens;
  c->http = core_->wire->Build(c->req, c->max_tokens);
  c->http.timeout_s = core_->cfg.timeout_s;
  c->http.connect_timeout_s = core_->cfg.connect_timeout_s;
  Steps::Attempt(c);
}

}  // namespace ax::llm
