#include "cli/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace ax::cli {

namespace {

std::atomic<int> g_interrupts{0};
std::atomic<const char*> g_message{InterruptScope::kRunMessage};

extern "C" void OnInterrupt(int sig) {
  if (g_interrupts.fetch_add(1) >= 1) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  const char* msg = g_message.load();
  ssize_t w = write(STDERR_FILENO, msg, strlen(msg));
  (void)w;
}

}  // namespace

InterruptScope::InterruptScope(const char* message) {
  g_message.store(message);
  g_interrupts.store(0);
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

bool Interrupted() { return g_interrupts.load() > 0; }

void RequestInterrupt() {
  int none = 0;
  g_interrupts.compare_exchange_strong(none, 1);
}

}  // namespace ax::cli
