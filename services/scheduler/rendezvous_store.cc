#include "services/scheduler/rendezvous_store.h"

namespace orca::scheduler {

RendezvousStore::RendezvousStore() : timer_([this] { TimerLoop(); }) {}

RendezvousStore::~RendezvousStore() { Close(); }

void RendezvousStore::Close() {
  std::vector<Callback> pending;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (auto& [id, w] : waiters_) pending.push_back(std::move(w.done));
    waiters_.clear();
    waiting_.clear();
  }
  if (timer_.joinable()) timer_.join();
  for (auto& cb : pending) cb(std::nullopt);
}

void RendezvousStore::Set(const std::string& key, std::string value) {
  std::vector<Callback> ready;
  {
    absl::MutexLock lock(&mu_);
    values_[key] = value;
    auto range = waiting_.equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
      auto w = waiters_.find(it->second);
      if (w != waiters_.end()) {
        ready.push_back(std::move(w->second.done));
        waiters_.erase(w);
      }
    }
    waiting_.erase(range.first, range.second);
  }
  for (auto& cb : ready) cb(value);
}

void RendezvousStore::Get(const std::string& key, absl::Duration wait, Callback done) {
  std::optional<std::string> value;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = values_.find(key); it != values_.end()) {
      value = it->second;
    } else if (wait > absl::ZeroDuration() && !stop_) {
      const uint64_t id = next_waiter_++;
      waiters_[id] = Waiter{key, absl::Now() + wait, std::move(done)};
      waiting_.emplace(key, id);
      return;
    }
  }
  done(std::move(value));
}

size_t RendezvousStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

void RendezvousStore::TimerLoop() {
  while (true) {
    std::vector<Callback> expired;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(20));
      if (stop_) return;
      const absl::Time now = absl::Now();
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->second.deadline <= now) {
          auto range = waiting_.equal_range(it->second.key);
          for (auto w = range.first; w != range.second; ++w)
            if (w->second == it->first) {
              waiting_.erase(w);
              break;
            }
          expired.push_back(std::move(it->second.done));
          it = waiters_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& cb : expired) cb(std::nullopt);
  }
}

}  // namespace orca::scheduler
