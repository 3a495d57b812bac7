#pragma once
/// A deduplicating work queue of object keys, like client-go's workqueue:
/// a key is queued at most once; a key being processed is not handed out
/// again until Done(), and if it was re-added meanwhile it is queued again
/// then. AddAfter() delays a key (retries with backoff, periodic resync).

#include <deque>
#include <map>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace orca::k8s {

class WorkQueue {
 public:
  void Add(const std::string& key);
  /// Queues `key` once `delay` has passed (an earlier pending time wins).
  void AddAfter(const std::string& key, absl::Duration delay);
  /// Blocks until a key is ready (true) or `stop` is notified (false).
  bool Get(const absl::Notification* stop, std::string* key);
  /// Marks `key` processed.
  void Done(const std::string& key);
  /// Keys queued now (not counting delayed ones).
  size_t Length() const;

 private:
  void PromoteDueLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> queued_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> processing_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> dirty_ ABSL_GUARDED_BY(mu_);  // re-added while processing
  std::map<std::string, absl::Time> delayed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace orca::k8s
