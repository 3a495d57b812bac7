#pragma once
/// The key-value store workers meet through to set up the data plane (Gloo
/// addresses, NCCL ids), served by the scheduler so that no shared
/// filesystem is needed across pods and hosts. Gets may wait for a key;
/// waiting never blocks a thread: the waiter is called back when the key is
/// set or its wait expires (on a single timer thread).

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace orca::scheduler {

class RendezvousStore {
 public:
  /// Called once: with the value, or nullopt when the wait expired.
  using Callback = std::function<void(std::optional<std::string>)>;

  RendezvousStore();
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  void Set(const std::string& key, std::string value);
  /// Calls `done` at once if the key exists, else when it is set, or with
  /// nullopt after `wait` (zero: at once).
  void Get(const std::string& key, absl::Duration wait, Callback done);
  size_t size() const;
  /// Answers every waiter with nullopt and stops waiting (before a server shutdown).
  void Close();

 private:
  struct Waiter {
    std::string key;
    absl::Time deadline;
    Callback done;
  };
  void TimerLoop();

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, uint64_t> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace orca::scheduler
