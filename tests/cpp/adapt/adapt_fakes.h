// Test doubles for the adaptation tests: an LLM client answering through a
// function, recording every request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/util.h"
#include "llm/client.h"

namespace ax::adapt::testing {

class FuncLlm : public llm::LlmClient {
 public:
  // Returns the reply text; set *error to fail the call instead.
  using Fn = std::function<std::string(const llm::ChatRequest&, std::string* error)>;
  explicit FuncLlm(Fn fn) : fn_(std::move(fn)) {}

  void ChatAsync(llm::ChatRequest req, llm::ChatCallback done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(req);
    }
    ++calls_;
    std::string err;
    llm::ChatResult r;
    r.provider = "fake";
    r.model = "fake-1";
    r.reply.text = fn_(req, &err);
    if (!err.empty()) {
      r.status = Status::Error(err);
      r.error = llm::ErrorKind::kServer;
      r.reply.text.clear();
    }
    done(std::move(r));
  }
  std::string Describe() const override { return "fake:fake-1"; }

  int calls() const { return calls_; }
  std::vector<llm::ChatRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  Fn fn_;
  mutable std::mutex mu_;
  std::vector<llm::ChatRequest> requests_;
  std::atomic<int> calls_{0};
};

// The dedup prompt's parts: the new rule and the numbered candidates.
struct DedupPrompt {
  std::string rule;
  std::vector<std::string> candidates;
};

inline DedupPrompt ParseDedupPrompt(const std::string& prompt) {
  DedupPrompt p;
  std::istringstream in(prompt);
  std::string line;
  int section = 0;
  static const std::regex numbered(R"(^(\d+)\. (.*)$)");
  while (std::getline(in, line)) {
    if (line == "New rule:") {
      section = 1;
      continue;
    }
    if (line == "Existing rules:") {
      section = 2;
      continue;
    }
    std::smatch m;
    if (section == 1 && !Trim(line).empty() && p.rule.empty()) p.rule = Trim(line);
    if (section == 2 && std::regex_match(line, m, numbered)) p.candidates.push_back(m[2]);
    if (section == 2 && Trim(line).empty() && !p.candidates.empty()) section = 3;
  }
  return p;
}

// Runs f on another thread; false when it did not finish within ms (for
// instance because a lock it needs is held across the caller's LLM call).
inline bool FinishesWithin(std::function<void()> f, int ms) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto st = std::make_shared<State>();
  std::thread t([st, f = std::move(f)] {
    f();
    std::lock_guard<std::mutex> lock(st->mu);
    st->done = true;
    st->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(st->mu);
  bool ok = st->cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return st->done; });
  lock.unlock();
  if (ok) {
    t.join();
  } else {
    t.detach();
  }
  return ok;
}

}  // namespace ax::adapt::testing
