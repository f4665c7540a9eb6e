// ReplayClient (`replay:FILE`): answers from a recording instead of the
// network, so a run can be reproduced exactly. Calls are matched by the hash
// of their request content; when the same request was made several times the
// recorded replies are served in their recorded order. A request the file
// does not hold fails with a clear reason rather than inventing a reply.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "llm/accounting.h"
#include "llm/client.h"
#include "llm/recorder.h"

namespace ax::llm {

class ReplayClient : public LlmClient {
 public:
  static Status Open(const std::string& path, std::shared_ptr<Accountant> accountant,
                     std::shared_ptr<CallSink> sink, std::unique_ptr<ReplayClient>* out);
  // Replies run inline, on the calling thread.
  void ChatAsync(ChatRequest req, ChatCallback done) override;
  std::string Describe() const override { return "replay:" + path_; }
  size_t remaining() const;

 private:
  ReplayClient() = default;
  std::string path_;
  std::shared_ptr<Accountant> accountant_;
  std::shared_ptr<CallSink> sink_;
  mutable std::mutex mu_;
  std::map<std::string, std::deque<CallRecord>> by_hash_;
  std::map<std::string, int> served_;
};

}  // namespace ax::llm
