#include "cli/cli_support.h"

#include <cstdio>
#include <ctime>
#include <mutex>
#include <vector>

namespace ax::cli {

namespace {
std::mutex g_sink_mu;
FailSink g_sink;
}  // namespace

void SetFailSink(FailSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  g_sink = std::move(sink);
}

void Fail(const std::string& msg) {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  if (g_sink) {
    g_sink(msg);
    return;
  }
  std::fprintf(stderr, "adaexplore: %s\n", msg.c_str());
}

bool CheckOptions(CommonFlags* c, const JudgeFlags& f, JudgeOptions* o) {
  Status s = ToOptions(c, f, o);
  if (!s.ok()) Fail(s.message());
  return s.ok();
}

std::unique_ptr<Judge> MakeJudgeOrFail(const CommonFlags& c, int workers, int max_spawns) {
  std::unique_ptr<Judge> j;
  Status s = MakeJudge(c, workers, max_spawns, &j);
  if (!s.ok()) Fail(s.message());
  return j;
}

bool OneTask(const std::string& spec, TaskRef* out) {
  std::vector<TaskRef> found;
  if (Status s = ResolveTasks(spec, &found); !s.ok()) {
    Fail(s.message());
    return false;
  }
  if (found.size() != 1) {
    Fail("expected one task; " + spec + " names " + std::to_string(found.size()));
    return false;
  }
  *out = found[0];
  return true;
}

std::string Timestamp() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

}  // namespace ax::cli
