#include "llm/replay_client.h"

#include <chrono>

namespace ax::llm {

Status ReplayClient::Open(const std::string& path, std::shared_ptr<Accountant> accountant,
                          std::shared_ptr<CallSink> sink, std::unique_ptr<ReplayClient>* out) {
  std::vector<CallRecord> records;
  Status s = ReadRecords(path, &records);
  if (!s.ok()) return Status::Error("replay: " + s.message());
  std::unique_ptr<ReplayClient> c(new ReplayClient());
  c->path_ = path;
  c->accountant_ = std::move(accountant);
  c->sink_ = std::move(sink);
  for (auto& r : records) {
    // Refusals made before any request was sent say nothing about the model.
    ErrorKind k = r.result.error;
    if (k == ErrorKind::kBudget || k == ErrorKind::kShutdown || k == ErrorKind::kConfig) continue;
    std::string h = RequestHash(r.request);
    if (h != r.request_hash)
      return Status::Error("replay: " + path + ": a record's request_hash does not match its request (edited by hand?)");
    c->by_hash_[h].push_back(std::move(r));
  }
  *out = std::move(c);
  return Status::Ok();
}

size_t ReplayClient::remaining() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [h, q] : by_hash_) n += q.size();
  return n;
}

void ReplayClient::ChatAsync(ChatRequest req, ChatCallback done) {
  std::string h = RequestHash(req);
  ChatResult res;
  res.provider = "replay";
  CallRecord rec;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_hash_.find(h);
    int& served = served_[h];
    if (it != by_hash_.end() && !it->second.empty()) {
      rec = std::move(it->second.front());
      it->second.pop_front();
      served++;
      found = true;
    } else {
      res.error = ErrorKind::kReplayMiss;
      std::string why = served > 0 ? "this request was recorded " + std::to_string(served) +
                                         " times and all were served"
                                   : "no recorded reply for this request";
      res.status = Status::Error("replay " + path_ + ": " + why + " (hash " + h.substr(0, 12) +
                                 (req.task.empty() ? "" : ", task " + req.task) +
                                 "); the run asked something the recorded run did not");
    }
  }
  if (found) {
    res = rec.result;
    if (accountant_) {
      Status b = accountant_->CheckBudget();
      if (!b.ok()) {
        res = ChatResult{};
        res.error = ErrorKind::kBudget;
        res.status = Status::Error("replay: " + b.message());
      }
    }
  }
  if (found && res.error != ErrorKind::kBudget && accountant_)
    res.cost_usd = accountant_->Record(req.task, res.model, res.reply.model, res.usage, res.latency_s, res.ok());
  if (sink_) {
    CallRecord out;
    out.unix_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    out.provider = found ? rec.provider : "replay";
    out.model = found ? rec.model : "";
    out.task = req.task;
    out.purpose = req.purpose;
    out.request_hash = h;
    out.request = req;
    out.result = res;
    if (found) out.attempt_log = rec.attempt_log;
    sink_->Write(out);
  }
  done(std::move(res));
}

}  // namespace ax::llm
