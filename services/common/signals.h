#pragma once
/// Termination signals for services: blocked in every thread (call before
/// starting any), then awaited by the main thread, which drains and exits.

#include <chrono>

namespace orca::services {

/// Prints the faulting thread's symbolized stack trace to stderr on SIGSEGV,
/// SIGBUS, SIGILL, SIGFPE and SIGABRT, then lets the signal kill the process as
/// before (so the exit status still says which signal it was). Call first in main().
void InstallCrashHandler(const char* argv0);
/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and the threads it starts later.
void BlockTerminationSignals();
/// Waits up to `timeout` for one of them; returns the signal number or 0.
int WaitForTerminationSignal(std::chrono::milliseconds timeout);
/// Waits for one of them however long it takes; returns the signal number.
int AwaitTerminationSignal();

}  // namespace orca::services
