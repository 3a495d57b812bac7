#include "services/operator/leader_elector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::ClientFor;
using testing::Eventually;
using testing::FakeKubeApiServer;

constexpr char kLeasePath[] = "/apis/coordination.k8s.io/v1/namespaces/sys/leases/orca-operator-leader";

// A manual clock shared by the candidates of one test.
struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1700000000);
  std::function<absl::Time()> Fn() {
    return [this] { return now; };
  }
};

class LeaderElectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = FakeKubeApiServer::Start();
    client_ = ClientFor(*server_);
  }
  LeaderElector::Options Options(const std::string& identity) {
    LeaderElector::Options o;
    o.namespace_ = "sys";
    o.identity = identity;
    o.clock = clock_.Fn();
    o.retry_period = absl::Milliseconds(20);
    return o;
  }
  std::string Holder() { return (*server_->Get(kLeasePath))["spec"].value("holderIdentity", ""); }

  FakeClock clock_;
  std::unique_ptr<FakeKubeApiServer> server_;
  std::unique_ptr<KubeClient> client_;
};

TEST_F(LeaderElectorTest, FirstCandidateCreatesTheLease) {
  LeaderElector a(client_.get(), Options("a"));
  ASSERT_EQ(*a.TryAcquireOrRenew(), true);
  EXPECT_TRUE(a.IsLeader());
  const json lease = *server_->Get(kLeasePath);
  EXPECT_EQ(lease["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(lease["spec"]["renewTime"], "2023-11-14T22:13:20.000000Z");
}

TEST_F(LeaderElectorTest, OthersWaitForTheLeaseToExpireOnTheirOwnClock) {
  LeaderElector a(client_.get(), Options("a"));
  LeaderElector b(client_.get(), Options("b"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  EXPECT_FALSE(*b.TryAcquireOrRenew());  // b first sees the record now
  clock_.now += absl::Seconds(10);
  ASSERT_TRUE(*a.TryAcquireOrRenew());  // a renews: a new record
  clock_.now += absl::Seconds(10);
  EXPECT_FALSE(*b.TryAcquireOrRenew());  // renewed 10 s ago (b's clock) < 15 s
  EXPECT_EQ(Holder(), "a");
  clock_.now += absl::Seconds(16);  // a stopped renewing
  EXPECT_TRUE(*b.TryAcquireOrRenew());
  EXPECT_EQ(Holder(), "b");
  EXPECT_EQ((*server_->Get(kLeasePath))["spec"]["leaseTransitions"], 1);
  EXPECT_FALSE(*a.TryAcquireOrRenew());  // a sees b's fresh record
  EXPECT_FALSE(a.IsLeader());
}

TEST_F(LeaderElectorTest, ConflictingWriteLosesTheRace) {
  LeaderElector a(client_.get(), Options("a"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  server_->FailNext("PUT", "/leases/", 409);
  EXPECT_FALSE(*a.TryAcquireOrRenew());
  EXPECT_FALSE(a.IsLeader());
}

TEST_F(LeaderElectorTest, ReleaseLetsTheNextCandidateInAtOnce) {
  LeaderElector a(client_.get(), Options("a"));
  LeaderElector b(client_.get(), Options("b"));
  ASSERT_TRUE(*a.TryAcquireOrRenew());
  EXPECT_FALSE(*b.TryAcquireOrRenew());
  ASSERT_TRUE(a.Release().ok());
  EXPECT_EQ(Holder(), "");
  EXPECT_TRUE(*b.TryAcquireOrRenew());  // no need to wait out the duration
}

TEST_F(LeaderElectorTest, RunLeadsUntilStoppedThenReleases) {
  LeaderElector a(client_.get(), Options("a"));
  absl::Notification stop, started;
  bool stopped_leading = false;
  std::thread t([&] {
    a.Run(
        &stop, [&] { started.Notify(); }, [&] { stopped_leading = true; });
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_TRUE(Eventually([&] { return server_->CountRequests("PUT", "/leases/") >= 2; }));  // renewing
  stop.Notify();
  t.join();
  EXPECT_FALSE(stopped_leading);
  EXPECT_EQ(Holder(), "");
}

TEST_F(LeaderElectorTest, RunStepsDownWhenAnotherTakesOver) {
  LeaderElector a(client_.get(), Options("a"));
  absl::Notification stop, started, lost;
  std::thread t([&] {
    a.Run(
        &stop, [&] { started.Notify(); }, [&] { lost.Notify(); });
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(20)));
  // Someone else overwrites the Lease (e.g. after a partition).
  json lease = *server_->Get(kLeasePath);
  lease["spec"]["holderIdentity"] = "intruder";
  lease["spec"]["renewTime"] = LeaderElector::FormatMicroTime(clock_.now + absl::Seconds(1));
  server_->Upsert(lease);
  EXPECT_TRUE(lost.WaitForNotificationWithTimeout(absl::Seconds(20)));
  stop.Notify();
  t.join();
  EXPECT_FALSE(a.IsLeader());
  EXPECT_EQ(Holder(), "intruder");
}

}  // namespace
}  // namespace orca::k8s
