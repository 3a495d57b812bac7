// Failure handling of the distributed engine: a dead or hung worker is
// detected within a bounded time, its requests end with a clear error, every
// KV slot comes back, the scheduler reports not-ready, and the engine
// recovers by itself when the worker returns. Also: graceful drain on SIGTERM.

#include <signal.h>

#include <future>
#include <thread>

#include "gtest/gtest.h"
#include "tests/integration/cluster.h"
#include "tests/unit/engine/test_models.h"

namespace orca::testing {
namespace {

using engine::testing::SmallLlama;
using engine::testing::SyntheticModel;

std::string Model() {
  engine::SyntheticModelOptions o = SmallLlama(DType::kF32);
  o.max_position = 4096;
  return SyntheticModel(o);
}

bool WaitUntil(const std::function<bool()>& cond, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Starts a long generation and returns once it has produced tokens.
std::future<GenerateResult> StartLongRequest(v1::Scheduler::Stub* stub, int max_new_tokens) {
  return std::async(std::launch::async, [stub, max_new_tokens] { return Generate(stub, {1, 2, 3}, max_new_tokens); });
}

class FailureTest : public ::testing::TestWithParam<int /*signal*/> {};

TEST_P(FailureTest, DeadOrHungWorkerFailsItsRequestsReleasesSlotsAndRecovers) {
  const int sig = GetParam();
  ClusterOptions co;
  co.model = Model();
  co.pipeline = 2;
  co.n_slots = 4096;
  co.worker_timeout_ms = 1500;
  co.peer_timeout_ms = 1500;
  co.name = sig == SIGKILL ? "kill" : "hang";
  Cluster cluster(co);
  ASSERT_TRUE(cluster.Start()) << cluster.Logs();
  auto stub = cluster.NewStub();
  auto running = StartLongRequest(stub.get(), 3000);
  ASSERT_TRUE(WaitUntil(
      [&] {
        grpc::ClientContext ctx;
        v1::SchedulerStats s;
        return stub->GetStats(&ctx, v1::StatsRequest(), &s).ok() && s.num_requests_running() == 1 &&
               s.iterations() > 10;
      },
      10000));  // mid-generation
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(cluster.worker(1).pid(), sig), 0);
  GenerateResult r = running.get();
  const double detect_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.finish, v1::FINISH_REASON_ERROR) << "status " << r.status.error_message();
  EXPECT_FALSE(r.error.empty());
  EXPECT_LT(r.tokens.size(), 3000u);
  EXPECT_LT(detect_s, 10.0) << "failure must be detected within a bounded time";
  // Not ready, and nothing leaked.
  EXPECT_TRUE(WaitUntil([&] { return HttpGet(cluster.scheduler_http_port(), "/ready") == 503; }, 5000));
  v1::SchedulerStats stats = SettledStats(stub.get());
  EXPECT_EQ(stats.kv_slots_used(), 0);
  EXPECT_EQ(stats.num_requests_running(), 0);
  EXPECT_FALSE(stats.ready());
  // A request meanwhile is refused clearly, not queued forever.
  GenerateResult refused = Generate(stub.get(), {5, 6}, 4);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.status.error_message();
  // The worker comes back (restarted, or resumed after the hang): the engine recovers by itself.
  if (sig == SIGSTOP) {
    kill(cluster.worker(1).pid(), SIGCONT);
    cluster.worker(1).Stop(SIGKILL, 2000);  // its session is gone; replace it like a restarted pod
  }
  cluster.StartWorker(1);
  ASSERT_TRUE(WaitReady(cluster.scheduler_http_port(), 30000)) << cluster.Logs();
  GenerateResult ok = Generate(stub.get(), {5, 6}, 8);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.finish, v1::FINISH_REASON_LENGTH) << ok.error << "\n" << cluster.Logs();
  EXPECT_EQ(ok.tokens.size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(Signals, FailureTest, ::testing::Values(SIGKILL, SIGSTOP), [](const auto& info) {
  return info.param == SIGKILL ? std::string("Killed") : std::string("Hung");
});

TEST(DrainTest, SigtermFinishesInFlightWorkRejectsNewAndExitsCleanly) {
  ClusterOptions co;
  co.model = Model();
  co.pipeline = 0;  // in-process engine
  co.name = "drain";
  co.extra_scheduler_flags = {"--drain-grace-seconds=60"};  // the in-flight request must finish, even on a busy machine
  Cluster cluster(co);
  ASSERT_TRUE(cluster.Start()) << cluster.Logs();
  auto stub = cluster.NewStub();
  auto running = StartLongRequest(stub.get(), 1000);  // still running while we probe the drain
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(cluster.scheduler().pid(), SIGTERM);
  ASSERT_TRUE(WaitUntil([&] { return HttpGet(cluster.scheduler_http_port(), "/ready") != 200; }, 3000));
  GenerateResult refused = Generate(stub.get(), {5, 6}, 4);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.status.error_message();
  GenerateResult r = running.get();
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.finish, v1::FINISH_REASON_LENGTH) << r.error;
  EXPECT_EQ(r.tokens.size(), 1000u);
  EXPECT_EQ(cluster.scheduler().Stop(SIGTERM, 60000), 0) << cluster.Logs();
}

}  // namespace
}  // namespace orca::testing
