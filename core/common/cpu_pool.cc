#include "core/common/cpu_pool.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace orca {

int CpuPool::DefaultNumThreads() { return std::max(2, static_cast<int>(std::thread::hardware_concurrency())); }

absl::StatusOr<std::unique_ptr<CpuPool>> CpuPool::Create(Options options) {
  if (options.num_threads <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("CpuPool num_threads must be positive, got ", options.num_threads));
  }
  if (options.max_queued <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("CpuPool max_queued must be positive, got ", options.max_queued));
  }
  std::unique_ptr<CpuPool> pool(new CpuPool(options.max_queued));
  pool->threads_.reserve(static_cast<size_t>(options.num_threads));
  for (int i = 0; i < options.num_threads; ++i) {
    pool->threads_.emplace_back([p = pool.get()] { p->WorkerLoop(); });
    // Linux limits thread names to 15 characters.
    const std::string name = absl::StrCat(options.name, "-", i).substr(0, 15);
    pthread_setname_np(pool->threads_.back().native_handle(), name.c_str());
  }
  return pool;
}

CpuPool::~CpuPool() { Stop(); }

bool CpuPool::TrySubmit(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_ && static_cast<int64_t>(queue_.size()) < max_queued_) {
      queue_.push_back(std::move(task));
      return true;
    }
  }
  return false;  // `task` is destroyed on return, outside the lock (its destructor may do anything)
}

void CpuPool::WorkerLoop() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&has_work));
      if (stopping_) return;  // Stop() cancels what is still queued
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task(Mode::kRun);
    task = nullptr;  // what it owns is released before the pool counts it done
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

void CpuPool::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  std::deque<Task> cancelled;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cancelled.swap(queue_);
  }
  for (Task& task : cancelled) {
    task(Mode::kCancelled);
    task = nullptr;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool CpuPool::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && running_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

int64_t CpuPool::num_queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t CpuPool::num_running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

}  // namespace orca
