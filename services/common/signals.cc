#include "services/common/signals.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace orca::services {
namespace {
sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal(std::chrono::milliseconds timeout) {
  sigset_t set = TerminationSet();
  timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>((timeout.count() % 1000) * 1000000)};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

int AwaitTerminationSignal() {
  int sig = 0;
  while ((sig = WaitForTerminationSignal(std::chrono::milliseconds(1000))) == 0) {
  }
  return sig;
}

}  // namespace orca::services
