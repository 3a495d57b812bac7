// CpuPool: a bounded queue in front of fixed threads. Blocking tasks hold the
// threads (absl::Notification gates), so every assertion is about order and
// counts, never about time.

#include "core/common/cpu_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace orca {
namespace {

using Mode = CpuPool::Mode;

std::unique_ptr<CpuPool> MakePool(int threads, int64_t max_queued) {
  auto pool = CpuPool::Create({.num_threads = threads, .max_queued = max_queued, .name = "test-cpu"});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return std::move(pool).value();
}

// Counts the invocations of tasks built by Make(), by mode, and the tasks destroyed.
struct TaskLog {
  std::atomic<int> run{0};
  std::atomic<int> cancelled{0};
  std::atomic<int> destroyed{0};

  // A task that waits for `gate` (when given) and records how it was invoked.
  CpuPool::Task Make(absl::Notification* gate = nullptr, std::atomic<int>* started = nullptr) {
    struct OnDestroy {
      TaskLog* log;
      ~OnDestroy() { log->destroyed++; }
    };
    return [this, gate, started, guard = std::unique_ptr<OnDestroy>(new OnDestroy{this})](Mode mode) {
      if (mode == Mode::kCancelled) {
        cancelled++;
        return;
      }
      if (started != nullptr) (*started)++;
      if (gate != nullptr) gate->WaitForNotification();
      run++;
    };
  }
};

bool WaitFor(const std::atomic<int>& value, int want) {
  for (int i = 0; i < 10000 && value.load() != want; ++i) absl::SleepFor(absl::Milliseconds(1));
  return value.load() == want;
}

TEST(CpuPoolTest, RejectsNonPositiveOptionsNamingThem) {
  auto no_threads = CpuPool::Create({.num_threads = 0, .max_queued = 1});
  ASSERT_FALSE(no_threads.ok());
  EXPECT_NE(no_threads.status().message().find("num_threads"), std::string::npos);
  auto no_queue = CpuPool::Create({.num_threads = 1, .max_queued = 0});
  ASSERT_FALSE(no_queue.ok());
  EXPECT_NE(no_queue.status().message().find("max_queued"), std::string::npos);
  EXPECT_GE(CpuPool::DefaultNumThreads(), 2);
}

TEST(CpuPoolTest, RunsEveryAcceptedTaskOnceAndDestroysIt) {
  auto pool = MakePool(3, 1000);
  TaskLog log;
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(pool->TrySubmit(log.Make()));
  ASSERT_TRUE(pool->WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(log.run, 500);
  EXPECT_EQ(log.cancelled, 0);
  // WaitIdle returns only once what the tasks owned is released.
  EXPECT_EQ(log.destroyed, 500);
}

TEST(CpuPoolTest, AFullQueueRefusesAtOnceWithoutInvokingTheTask) {
  auto pool = MakePool(2, 3);
  TaskLog log;
  absl::Notification gate;
  std::atomic<int> started{0};
  // Two tasks hold both threads, three wait: the pool is saturated.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(pool->TrySubmit(log.Make(&gate, &started)));
  ASSERT_TRUE(WaitFor(started, 2));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool->TrySubmit(log.Make(&gate)));
  EXPECT_EQ(pool->num_running(), 2);
  EXPECT_EQ(pool->num_queued(), 3);

  EXPECT_FALSE(pool->TrySubmit(log.Make()));
  EXPECT_EQ(log.destroyed, 1);  // the refused task, never invoked
  EXPECT_EQ(log.run + log.cancelled, 0);

  gate.Notify();
  ASSERT_TRUE(pool->WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(log.run, 5);
  EXPECT_EQ(log.destroyed, 6);
  // Room again.
  EXPECT_TRUE(pool->TrySubmit(log.Make()));
  // The pool's destructor would cancel the task if still queued, invoking it on `log`, which is destroyed
  // first (ASan: stack-use-after-scope, seen in the fresh-machine check): let it run before the scope ends.
  ASSERT_TRUE(pool->WaitIdle(absl::Seconds(30)));
  EXPECT_EQ(log.run, 6);
}

TEST(CpuPoolTest, StopCancelsQueuedTasksWaitsForRunningOnesAndRefusesMore) {
  auto pool = MakePool(1, 10);
  TaskLog log;
  absl::Notification gate;
  std::atomic<int> started{0};
  ASSERT_TRUE(pool->TrySubmit(log.Make(&gate, &started)));
  ASSERT_TRUE(WaitFor(started, 1));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool->TrySubmit(log.Make()));

  std::thread stopper([&] { pool->Stop(); });
  // The queued four are cancelled while the running one still holds its thread.
  ASSERT_TRUE(WaitFor(log.cancelled, 4));
  EXPECT_EQ(log.run, 0);
  gate.Notify();
  stopper.join();
  EXPECT_EQ(log.run, 1);
  EXPECT_EQ(log.destroyed, 5);

  EXPECT_FALSE(pool->TrySubmit(log.Make()));
  EXPECT_EQ(log.destroyed, 6);
  pool->Stop();  // idempotent
}

}  // namespace
}  // namespace orca
