#include "services/operator/work_queue.h"

namespace orca::k8s {

void WorkQueue::AddLocked(const std::string& key) {
  if (processing_.count(key)) {
    dirty_.insert(key);
    return;
  }
  if (queued_.insert(key).second) queue_.push_back(key);
}

void WorkQueue::Add(const std::string& key) {
  absl::MutexLock lock(&mu_);
  delayed_.erase(key);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, absl::Duration delay) {
  if (delay <= absl::ZeroDuration()) return Add(key);
  absl::MutexLock lock(&mu_);
  const absl::Time when = absl::Now() + delay;
  auto it = delayed_.find(key);
  if (it == delayed_.end() || when < it->second) delayed_[key] = when;
}

void WorkQueue::PromoteDueLocked(absl::Time now) {
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    if (it->second <= now) {
      AddLocked(it->first);
      it = delayed_.erase(it);
    } else {
      ++it;
    }
  }
}

bool WorkQueue::Get(const absl::Notification* stop, std::string* key) {
  while (!stop->HasBeenNotified()) {
    {
      absl::MutexLock lock(&mu_);
      PromoteDueLocked(absl::Now());
      if (!queue_.empty()) {
        *key = queue_.front();
        queue_.pop_front();
        queued_.erase(*key);
        processing_.insert(*key);
        return true;
      }
      // Wake when something is added (or shortly, to see delayed keys and `stop`).
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Milliseconds(100));
    }
  }
  return false;
}

void WorkQueue::Done(const std::string& key) {
  absl::MutexLock lock(&mu_);
  processing_.erase(key);
  if (dirty_.erase(key)) AddLocked(key);
}

size_t WorkQueue::Length() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace orca::k8s
