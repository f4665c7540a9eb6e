// Ctrl-C for long runs (optimize, bench, adapt, worker, and the Python API's
// optimize): the first SIGINT or SIGTERM stops the run gracefully (no new
// steps or tasks; the candidates being judged finish; the store and
// summary.json are written, so --resume continues); a second one ends the
// process at once.
#pragma once

#include <signal.h>

namespace ax::cli {

// Installs the handlers for its lifetime and restores the previous ones
// (Python's, in the bindings) when it ends. The interrupt count starts at 0;
// the first signal writes `message` (a string literal) to stderr.
class InterruptScope {
 public:
  explicit InterruptScope(const char* message = kRunMessage);
  static constexpr const char* kRunMessage =
      "adaexplore: interrupted: finishing the candidates being judged, then saving the run (interrupt again to stop "
      "now)\n";
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Whether an interrupt arrived since the current scope began.
bool Interrupted();

// Stops the run as a first Ctrl-C would (the Python API's callback failed).
void RequestInterrupt();

}  // namespace ax::cli
