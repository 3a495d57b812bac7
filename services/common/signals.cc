#include "services/common/signals.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "absl/debugging/symbolize.h"

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

namespace {
// Async-signal-safe writes only: no allocation, no locks, no stdio.
void WriteRaw(const char* text) { (void)!write(STDERR_FILENO, text, strlen(text)); }

void WriteHex(uintptr_t v) {
  char buf[2 + 16 + 1];
  int i = sizeof(buf) - 1;
  buf[i] = 0;
  do {
    buf[--i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0 && i > 2);
  buf[--i] = 'x';
  buf[--i] = '0';
  WriteRaw(buf + i);
}

void OnFatalSignal(int sig, siginfo_t* info, void*) {
  WriteRaw("*** fatal signal ");
  WriteRaw(sigabbrev_np(sig) != nullptr ? sigabbrev_np(sig) : "?");
  WriteRaw(" (fault address ");
  WriteHex(reinterpret_cast<uintptr_t>(info->si_addr));
  WriteRaw("); stack of the thread that got it:\n");
  // glibc's backtrace unwinds with the .eh_frame tables, so frames without a frame
  // pointer are followed too; absl::Symbolize reads the ELF symbol tables.
  void* frames[64];
  const int n = backtrace(frames, 64);
  for (int i = 0; i < n; ++i) {
    char name[512];
    WriteRaw("    @ ");
    WriteHex(reinterpret_cast<uintptr_t>(frames[i]));
    WriteRaw("  ");
    WriteRaw(absl::Symbolize(frames[i], name, sizeof(name)) ? name : "(unknown)");
    WriteRaw("\n");
  }
  // The default action: the process dies of the signal it got, so its exit status says which.
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

void InstallCrashHandler(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  void* prime[1];
  backtrace(prime, 1);  // loads the unwinder now: inside the handler it must not allocate
  struct sigaction sa {};
  sa.sa_sigaction = &OnFatalSignal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &sa, nullptr);
}

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
