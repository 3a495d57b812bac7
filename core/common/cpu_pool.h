#pragma once
/// A fixed set of threads running CPU-bound tasks from a bounded FIFO queue.
///
/// Event-loop threads (the gateway's HTTP I/O threads, gRPC callback threads)
/// must never run work whose cost a client controls (parsing a 4 MB body,
/// tokenizing it, rendering a chat template, compiling a schema): while they
/// do, everything else multiplexed on them (health probes, other streams)
/// waits. They hand such work to a CpuPool instead and return at once.
///
/// The queue is bounded: when every thread is busy and `max_queued` tasks
/// wait, TrySubmit refuses at once, so the caller answers "busy, retry
/// later" (HTTP 503 + Retry-After) instead of queueing without bound.
///
/// Lifecycle of a task:
///
///   TrySubmit ──accepted──▶ queued ──a thread takes it──▶ task(kRun)
///       │                     └── Stop() before it ran ──▶ task(kCancelled)
///       └── refused (queue full or stopped): the task is destroyed unrun
///
/// Every accepted task is invoked exactly once, then destroyed on the thread
/// that ran it; what it owns (a request, an admission ticket) is released
/// there.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace orca {

class CpuPool {
 public:
  /// How a task is invoked.
  enum class Mode {
    kRun,        ///< do the work
    kCancelled,  ///< the pool stopped before the task started: release what it holds, answer quickly
  };
  using Task = absl::AnyInvocable<void(Mode)>;

  struct Options {
    /// Worker threads; must be positive.
    int num_threads = 2;
    /// Tasks that may wait for a thread; beyond, TrySubmit refuses. Must be positive.
    int64_t max_queued = 1024;
    /// Thread name prefix (shows in `top -H`, gdb): "<name>-<i>", at most 15 characters in all.
    std::string name = "orca-cpu";
  };

  /// Starts the threads. InvalidArgument naming the option when one is out of range.
  static absl::StatusOr<std::unique_ptr<CpuPool>> Create(Options options);
  /// Stop().
  ~CpuPool();
  CpuPool(const CpuPool&) = delete;
  CpuPool& operator=(const CpuPool&) = delete;

  /// Queues `task`. False when the queue is full or the pool has stopped; the
  /// task is then destroyed without being invoked. Never blocks. Any thread.
  [[nodiscard]] bool TrySubmit(Task task);

  /// Stops taking tasks, invokes each queued one with kCancelled, and waits
  /// for running ones to return. Idempotent; must not be called from a task.
  void Stop();

  /// Waits until no task is queued or running; false on timeout.
  bool WaitIdle(absl::Duration timeout);

  int num_threads() const { return static_cast<int>(threads_.size()); }
  int64_t max_queued() const { return max_queued_; }
  /// Tasks waiting for a thread.
  int64_t num_queued() const;
  /// Tasks being run now.
  int64_t num_running() const;

  /// The default thread count: the hardware threads, at least 2.
  static int DefaultNumThreads();

 private:
  explicit CpuPool(int64_t max_queued) : max_queued_(max_queued) {}
  void WorkerLoop();

  const int64_t max_queued_;
  std::vector<std::thread> threads_;
  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex stop_mu_;  // serializes Stop() calls
};

}  // namespace orca
