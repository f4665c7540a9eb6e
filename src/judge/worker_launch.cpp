#include "judge/worker_launch.h"

#include "common/util.h"

namespace ax {

std::string TailOf(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(s.size() - n); }

WorkerConfig JudgeWorkerConfig(const PoolConfig& cfg, const std::string& device, const std::string& role) {
  WorkerConfig wc;
  wc.python = cfg.python;
  wc.worker_dir = cfg.worker_dir;
  wc.role = role;
  wc.device = device;
  wc.cache_dir = cfg.cache_dir;
  wc.limits = cfg.limits;
  return wc;
}

std::unique_ptr<Worker> StartJudgeWorker(const WorkerConfig& wc, double timeout_s, std::string* error,
                                         const std::atomic<bool>* cancel) {
  std::unique_ptr<Worker> w = Worker::Start(wc, error);
  if (!w) return nullptr;
  Reply r = w->WaitReady(timeout_s, cancel);
  if (r.kind == Reply::kOk) return w;
  *error = "judge worker (" + wc.python + ") did not start: " + r.detail + " " +
           FirstLine(TailOf(w->OutputTail(), 2000), 400);
  // The last line of a Python traceback says most.
  std::string tail = Trim(w->OutputTail());
  size_t nl = tail.rfind('\n');
  if (!tail.empty()) *error += " | " + (nl == std::string::npos ? tail : tail.substr(nl + 1));
  return nullptr;
}

}  // namespace ax
