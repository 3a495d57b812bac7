// Routing across engine replicas: least outstanding requests, health-aware.

#include "services/gateway/scheduler_router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/common/ports.h"
#include "gtest/gtest.h"
#include "services/gateway/scheduler_call.h"
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

TEST(SchedulerRouterTest, NoneReadyIsUnavailableWithoutInternalDetails) {
  auto not_ready = StartFake(/*ready=*/false);
  auto router = MakeRouter({not_ready->address()});
  router->PollNow();
  auto lease = router->Acquire();
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kUnavailable);
  // The client learns that no replica is ready, not which addresses or why (issue 45): the
  // reasons are in the log and in the snapshot /ready's details show.
  EXPECT_EQ(lease.status().message(), "No scheduler is ready (1 engine replica, all down or starting); retry the request");
  EXPECT_FALSE(router->Snapshot()[0].not_ready_reason.empty());
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

TEST(SchedulerRouterTest, AStalledSchedulerStaysRoutableForTheGraceThenGoesOut) {
  auto a = StartFake();
  SchedulerRouter::Options options;
  options.addresses = {a->address()};
  options.start_polling = false;
  options.stats_timeout = absl::Milliseconds(100);
  options.stall_grace = absl::Milliseconds(1500);
  auto router = SchedulerRouter::Create(options);
  ASSERT_TRUE(router.ok());
  (*router)->PollNow();
  ASSERT_TRUE((*router)->AnyReady());
  a->StallStats(absl::Milliseconds(400));  // every poll times out from here on
  (*router)->PollNow();
  EXPECT_TRUE((*router)->AnyReady()) << "a poll that timed out inside the grace must not take it out";
  EXPECT_TRUE((*router)->Acquire().ok());
  absl::SleepFor(absl::Milliseconds(1600));  // past the grace since its last answer
  (*router)->PollNow();
  EXPECT_FALSE((*router)->AnyReady());
  const auto snapshot = (*router)->Snapshot();
  EXPECT_NE(snapshot[0].not_ready_reason.find("GetStats failed"), std::string::npos) << snapshot[0].not_ready_reason;
  a->StallStats(absl::ZeroDuration());
  absl::SleepFor(absl::Milliseconds(500));  // the stalled answers drain
  (*router)->PollNow();
  EXPECT_TRUE((*router)->AnyReady());
}

TEST(SchedulerRouterTest, ANeverAnsweringSchedulerIsNotReadyAtOnce) {
  auto a = StartFake();
  a->StallStats(absl::Milliseconds(400));
  SchedulerRouter::Options options;
  options.addresses = {a->address()};
  options.start_polling = false;
  options.stats_timeout = absl::Milliseconds(100);
  auto router = SchedulerRouter::Create(options);
  ASSERT_TRUE(router.ok());
  (*router)->PollNow();  // never ready: no grace for a scheduler that never answered
  EXPECT_FALSE((*router)->AnyReady());
  a->StallStats(absl::ZeroDuration());
  absl::SleepFor(absl::Milliseconds(500));
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

// DNS discovery: schedulers are the A records of one name (a headless Service), all at one port.
// Loopback has the whole 127/8, so two fake schedulers listen on 127.0.0.2 and 127.0.0.3 at one port.
class DnsDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto port = PickLoopbackPort();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    for (const char* ip : {"127.0.0.2", "127.0.0.3"}) {
      FakeScheduler::Options options;
      options.listen = absl::StrCat(ip, ":", port_);
      auto scheduler = FakeScheduler::Start(options);
      ASSERT_TRUE(scheduler.ok()) << scheduler.status();
      fakes_.push_back(std::move(scheduler).value());
    }
  }

  std::unique_ptr<SchedulerRouter> MakeDnsRouter() {
    SchedulerRouter::Options options;
    options.dns_target = absl::StrCat("orca-schedulers.ns.svc.cluster.local:", port_);
    options.start_polling = false;
    options.resolve = [this](const std::string& host) -> absl::StatusOr<std::vector<std::string>> {
      EXPECT_EQ(host, "orca-schedulers.ns.svc.cluster.local");
      absl::MutexLock lock(&mu_);
      return answer_;
    };
    auto router = SchedulerRouter::Create(options);
    EXPECT_TRUE(router.ok()) << router.status();
    return std::move(router).value();
  }

  void Answer(absl::StatusOr<std::vector<std::string>> ips) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(ips);
  }

  std::vector<std::string> Addresses(const SchedulerRouter& router) {
    std::vector<std::string> out;
    for (const auto& s : router.Snapshot()) out.push_back(s.address);
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string At(const char* ip) { return absl::StrCat(ip, ":", port_); }

  int port_ = 0;
  std::vector<std::unique_ptr<FakeScheduler>> fakes_;
  absl::Mutex mu_;
  absl::StatusOr<std::vector<std::string>> answer_ ABSL_GUARDED_BY(mu_) = std::vector<std::string>{};
};

TEST_F(DnsDiscoveryTest, FollowsTheNameAsReplicasComeAndGo) {
  auto router = MakeDnsRouter();
  // No scheduler yet (no endpoints: the name does not resolve): unavailable, saying where it looked.
  router->RefreshDiscovery();
  router->PollNow();
  auto none = router->Acquire();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(none.status().message()).find("orca-schedulers.ns.svc.cluster.local"), std::string::npos);

  Answer(std::vector<std::string>{"127.0.0.2"});
  router->RefreshDiscovery();
  router->PollNow();
  EXPECT_EQ(Addresses(*router), std::vector<std::string>{At("127.0.0.2")});
  auto held = router->Acquire();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->address(), At("127.0.0.2"));

  // Scale out: the second replica joins without a new router (a gateway restart).
  Answer(std::vector<std::string>{"127.0.0.3", "127.0.0.2"});
  router->RefreshDiscovery();
  router->PollNow();
  EXPECT_EQ(Addresses(*router), (std::vector<std::string>{At("127.0.0.2"), At("127.0.0.3")}));
  auto second = router->Acquire();  // the emptier one
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->address(), At("127.0.0.3"));

  // Scale in: the first leaves; a lease on it stays usable until released.
  Answer(std::vector<std::string>{"127.0.0.3"});
  router->RefreshDiscovery();
  EXPECT_EQ(Addresses(*router), std::vector<std::string>{At("127.0.0.3")});
  EXPECT_EQ(held->address(), At("127.0.0.2"));
  EXPECT_NE(held->stub(), nullptr);
  held->Release();
  for (int i = 0; i < 3; ++i) {
    auto lease = router->Acquire();
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(lease->address(), At("127.0.0.3"));
  }
}

TEST_F(DnsDiscoveryTest, AResolverErrorKeepsTheCurrentSchedulers) {
  auto router = MakeDnsRouter();
  Answer(std::vector<std::string>{"127.0.0.2", "127.0.0.3"});
  router->RefreshDiscovery();
  Answer(absl::UnavailableError("SERVFAIL"));
  router->RefreshDiscovery();
  router->PollNow();
  EXPECT_EQ(Addresses(*router), (std::vector<std::string>{At("127.0.0.2"), At("127.0.0.3")}));
  EXPECT_TRUE(router->AnyReady());
}

TEST(SchedulerRouterTest, DnsTargetMustBeHostPortAndExclusiveWithAList) {
  SchedulerRouter::Options options;
  options.start_polling = false;
  for (const char* bad : {"no-port", "host:", ":7000", "host:0", "host:70000", "host:x"}) {
    options.dns_target = bad;
    EXPECT_EQ(SchedulerRouter::Create(options).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  options.dns_target = "sched.ns.svc:7000";
  options.addresses = {"a:1"};
  EXPECT_EQ(SchedulerRouter::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.addresses.clear();
  EXPECT_TRUE(SchedulerRouter::Create(options).ok());
}

TEST(SchedulerRouterTest, DefaultResolverFindsLocalhostAndTreatsAnUnknownNameAsNoSchedulers) {
  SchedulerRouter::Options options;
  options.start_polling = false;
  options.dns_target = "localhost:1";
  auto router = SchedulerRouter::Create(options);
  ASSERT_TRUE(router.ok());
  (*router)->RefreshDiscovery();
  EXPECT_FALSE((*router)->Snapshot().empty());
  options.dns_target = "no-such-scheduler.invalid:1";
  router = SchedulerRouter::Create(options);
  ASSERT_TRUE(router.ok());
  (*router)->RefreshDiscovery();
  EXPECT_TRUE((*router)->Snapshot().empty());
}

// A call's listener that, once the call is done, waits on gRPC's callback thread for a while
// before the call lets go of its context: the router is destroyed meanwhile.
class SlowDoneListener : public SchedulerCallListener {
 public:
  void OnSchedulerResponse(int, const orca::v1::GenerateResponse&) override {}
  void OnSchedulerDone(int, const grpc::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      status_ = status;
      done_ = true;
    }
    absl::SleepFor(absl::Milliseconds(300));
    absl::MutexLock lock(&mu_);
    returned_ = true;
  }
  bool returned() {
    absl::MutexLock lock(&mu_);
    return returned_;
  }
  grpc::Status WaitDone() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&done_));
    return status_;
  }

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool returned_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

TEST(SchedulerRouterTest, ACallEndingAfterTheRouterIsGoneNeverDestroysTheChannelOnGrpcsThread) {
  // With gRPC 1.51, destroying the process's last channel on a callback thread deletes the
  // callback queue under that thread, which aborts at its next poll (grpc_cq_internal_unref):
  // the router must outlive the call's context and destroy the channel itself. No other
  // channel exists here, so the old order (the router gone first, the call's context last on
  // gRPC's thread) aborted this test binary.
  auto fake = StartFake();
  auto router = MakeRouter({fake->address()});
  router->PollNow();
  auto lease = router->Acquire();
  ASSERT_TRUE(lease.ok()) << lease.status();
  orca::v1::GenerateRequest request;
  request.set_request_id("late");
  request.add_prompt_token_ids(1);
  request.set_max_new_tokens(2);
  auto listener = std::make_shared<SlowDoneListener>();
  SchedulerCall::Start(std::move(lease).value(), request, 0, listener);
  EXPECT_TRUE(listener->WaitDone().ok());
  // The call is (almost surely) still inside OnDone, holding its context: the router waits
  // until the call has let go of it, which is after the listener returned.
  router.reset();
  EXPECT_TRUE(listener->returned());
  // gRPC's callback threads still work: a new router's call completes.
  router = MakeRouter({fake->address()});
  router->PollNow();
  auto again = router->Acquire();
  ASSERT_TRUE(again.ok()) << again.status();
  auto second = std::make_shared<SlowDoneListener>();
  SchedulerCall::Start(std::move(again).value(), request, 0, second);
  EXPECT_TRUE(second->WaitDone().ok());
  router.reset();
}

}  // namespace
}  // namespace orca::gateway
