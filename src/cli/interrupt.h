// Ctrl-C for long runs (optimize, bench, adapt, and the Python API's
// optimize): the first SIGINT or SIGTERM stops the run gracefully (no new
// steps or tasks; the candidates being judged finish; the store and
// summary.json are written, so --resume continues); a second one ends the
// process at once.
#pragma once

#include <signal.h>

namespace ax::cli {

// Installs the handlers for its lifetime and restores the previous ones
// (Python's, in the bindings) when it ends. The interrupt count starts at 0.
class InterruptScope {
 public:
  InterruptScope();
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
