// Routing across engine replicas: least outstanding requests, health-aware.

#include "services/gateway/scheduler_router.h"

#include "gtest/gtest.h"
#include "services/gateway/testing/fake_scheduler.h"

namespace orca::gateway {
namespace {

using testing::FakeScheduler;

std::unique_ptr<FakeScheduler> StartFake(bool ready = true) {
  FakeScheduler::Options options;
  options.ready = ready;
  auto scheduler = FakeScheduler::Start(options);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  return std::move(scheduler).value();
}

std::unique_ptr<SchedulerRouter> MakeRouter(std::vector<std::string> addresses) {
  SchedulerRouter::Options options;
  options.addresses = std::move(addresses);
  options.start_polling = false;
  auto router = SchedulerRouter::Create(options);
  EXPECT_TRUE(router.ok()) << router.status();
  return std::move(router).value();
}

TEST(SchedulerRouterTest, RejectsAnEmptyList) {
  SchedulerRouter::Options options;
  EXPECT_EQ(SchedulerRouter::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.addresses = {"a:1", ""};
  EXPECT_EQ(SchedulerRouter::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SchedulerRouterTest, PicksTheReadySchedulerWithFewestOutstanding) {
  auto a = StartFake();
  auto b = StartFake();
  auto router = MakeRouter({a->address(), b->address()});
  router->PollNow();
  ASSERT_TRUE(router->AnyReady());
  // Leases alternate while loads are equal, then always fill the emptier one.
  std::vector<SchedulerLease> leases;
  std::map<std::string, int> per_address;
  for (int i = 0; i < 6; ++i) {
    auto lease = router->Acquire();
    ASSERT_TRUE(lease.ok());
    ++per_address[lease->address()];
    leases.push_back(std::move(lease).value());
  }
  EXPECT_EQ(per_address[a->address()], 3);
  EXPECT_EQ(per_address[b->address()], 3);
  // Free two on `a`: the next two go to `a`.
  int freed = 0;
  for (auto& lease : leases) {
    if (freed < 2 && lease.address() == a->address()) {
      lease.Release();
      ++freed;
    }
  }
  for (int i = 0; i < 2; ++i) {
    auto lease = router->Acquire();
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(lease->address(), a->address());
    leases.push_back(std::move(lease).value());
  }
  for (const SchedulerStatus& s : router->Snapshot()) EXPECT_EQ(s.outstanding, 3) << s.address;
}

TEST(SchedulerRouterTest, SkipsSchedulersThatAreNotReadyOrUnreachable) {
  auto ready = StartFake();
  auto not_ready = StartFake(/*ready=*/false);
  auto router = MakeRouter({not_ready->address(), "127.0.0.1:1", ready->address()});
  router->PollNow();
  for (int i = 0; i < 5; ++i) {
    auto lease = router->Acquire();
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(lease->address(), ready->address());
  }
  const auto snapshot = router->Snapshot();
  EXPECT_FALSE(snapshot[0].ready);
  EXPECT_NE(snapshot[0].not_ready_reason.find("not ready"), std::string::npos);
  EXPECT_FALSE(snapshot[1].ready);
  EXPECT_NE(snapshot[1].not_ready_reason.find("GetStats failed"), std::string::npos);
  EXPECT_TRUE(snapshot[2].ready);
  EXPECT_EQ(snapshot[2].stats.model_name(), "fake-model");
  EXPECT_EQ(router->MaxContext(), 1024);
}

TEST(SchedulerRouterTest, NoneReadyIsUnavailableWithReasons) {
  auto not_ready = StartFake(/*ready=*/false);
  auto router = MakeRouter({not_ready->address()});
  router->PollNow();
  auto lease = router->Acquire();
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(lease.status().message()).find(not_ready->address()), std::string::npos);
  // Becomes routable at the next poll after it turns ready.
  not_ready->SetReady(true);
  router->PollNow();
  EXPECT_TRUE(router->Acquire().ok());
}

TEST(SchedulerRouterTest, UnavailableCallTakesASchedulerOutUntilTheNextPoll) {
  auto a = StartFake();
  auto router = MakeRouter({a->address()});
  router->PollNow();
  auto lease = router->Acquire();
  ASSERT_TRUE(lease.ok());
  lease->Release(/*unavailable=*/true);
  EXPECT_FALSE(router->AnyReady());
  router->PollNow();
  EXPECT_TRUE(router->AnyReady());
}

TEST(SchedulerRouterTest, BackgroundPollingNoticesReadiness) {
  auto a = StartFake(/*ready=*/false);
  SchedulerRouter::Options options;
  options.addresses = {a->address()};
  options.poll_interval = absl::Milliseconds(20);
  auto router = SchedulerRouter::Create(options);
  ASSERT_TRUE(router.ok());
  a->SetReady(true);
  EXPECT_TRUE((*router)->WaitUntilReady(absl::Seconds(10)));
}

}  // namespace
}  // namespace orca::gateway
