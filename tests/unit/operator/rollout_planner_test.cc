#include "services/operator/rollout_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace orca::k8s {

// How gtest prints a GroupKey in failure messages (found by argument-dependent lookup, so in
// GroupKey's own namespace, not the anonymous one).
void PrintTo(const GroupKey& k, std::ostream* os) { *os << "r" << k.replica << "@" << k.revision; }

namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

GroupObservation G(int32_t replica, const std::string& revision, bool ready) { return {replica, revision, ready}; }
GroupKey K(int32_t replica, const std::string& revision) { return {replica, revision}; }

// A cluster as the planner sees it: groups by (replica, revision) and whether each is ready.
class FakeCluster {
 public:
  std::map<GroupKey, bool> groups;

  std::vector<GroupObservation> Observe() const {
    std::vector<GroupObservation> out;
    for (const auto& [k, ready] : groups) out.push_back({k.replica, k.revision, ready});
    return out;
  }
  // Carries out a plan: creates the applied groups (not ready yet), deletes the removed ones.
  void Apply(const RolloutPlan& plan) {
    for (const GroupKey& k : plan.remove) groups.erase(k);
    for (int32_t r : plan.apply) groups.emplace(GroupKey{r, plan.revision}, false);
  }
  void MakeReady(int32_t replica, const std::string& revision) { groups[{replica, revision}] = true; }
  // "r0:B* r1:A" style: every group, '*' when ready.
  std::string Row() const {
    std::string out;
    for (const auto& [k, ready] : groups)
      absl::StrAppend(&out, out.empty() ? "" : " ", "r", k.replica, ":", k.revision, ready ? "*" : "");
    return out;
  }
};

TEST(RolloutPlannerTest, FreshDeploymentCreatesEveryReplica) {
  const RolloutPlan plan = PlanRollout(3, "A", {}, {});
  EXPECT_THAT(plan.apply, ElementsAre(0, 1, 2));
  EXPECT_THAT(plan.keep, IsEmpty());
  EXPECT_THAT(plan.remove, IsEmpty());
  EXPECT_FALSE(plan.complete);
}

TEST(RolloutPlannerTest, SteadyStateIsCompleteAndTouchesNothingElse) {
  const RolloutPlan plan = PlanRollout(2, "A", {G(0, "A", true), G(1, "A", true)}, {});
  EXPECT_THAT(plan.apply, ElementsAre(0, 1));
  EXPECT_THAT(plan.keep, IsEmpty());
  EXPECT_THAT(plan.remove, IsEmpty());
  EXPECT_TRUE(plan.complete);
}

// The default (maxUnavailable 1, maxSurge 0) on 3 replicas going from A to B; each
// row is the cluster after the operator applied its plan, then the new group became ready:
//
//   step  r0    r1    r2           what happened
//   0     A*    A*    A*           serving revision A
//   1     B     A*    A*           r0 replaced (r1, r2 keep serving)
//   1'    B*    A*    A*           r0's pipeline formed
//   2     B*    B     A*           only now r1 goes
//   2'    B*    B*    A*
//   3     B*    B*    B
//   3'    B*    B*    B*           complete
TEST(RolloutPlannerTest, ConfigChangeReplacesOneWholeReplicaAtATime) {
  FakeCluster cluster;
  for (int r = 0; r < 3; ++r) cluster.MakeReady(r, "A");
  std::vector<std::string> rows;
  for (int step = 1; step <= 3; ++step) {
    RolloutPlan plan = PlanRollout(3, "B", cluster.Observe(), {});
    EXPECT_FALSE(plan.complete);
    cluster.Apply(plan);
    rows.push_back(cluster.Row());
    // Nothing moves until the replaced replica serves again.
    RolloutPlan again = PlanRollout(3, "B", cluster.Observe(), {});
    cluster.Apply(again);
    EXPECT_EQ(cluster.Row(), rows.back()) << "step " << step;
    cluster.MakeReady(step - 1, "B");
  }
  EXPECT_THAT(rows, ElementsAre("r0:B r1:A* r2:A*", "r0:B* r1:B r2:A*", "r0:B* r1:B* r2:B"));
  EXPECT_TRUE(PlanRollout(3, "B", cluster.Observe(), {}).complete);
}

TEST(RolloutPlannerTest, ReplicasThatServeNothingAreReplacedAtOnce) {
  const RolloutPlan plan = PlanRollout(3, "B", {G(0, "A", false), G(1, "A", false), G(2, "A", true)}, {});
  EXPECT_THAT(plan.apply, ElementsAre(0, 1));
  EXPECT_THAT(plan.remove, ElementsAre(K(0, "A"), K(1, "A")));
  // Two replicas are already down: the serving one waits.
  EXPECT_THAT(plan.keep, ElementsAre(K(2, "A")));
}

TEST(RolloutPlannerTest, ABrokenNewRevisionStopsAfterOneReplica) {
  // r0 runs B, which never becomes ready: r1 and r2 keep A for as long as that lasts.
  const RolloutPlan plan = PlanRollout(3, "B", {G(0, "B", false), G(1, "A", true), G(2, "A", true)}, {});
  EXPECT_THAT(plan.apply, ElementsAre(0));
  EXPECT_THAT(plan.keep, ElementsAre(K(1, "A"), K(2, "A")));
  EXPECT_THAT(plan.remove, IsEmpty());
  // Fixing the spec (revision C) replaces the broken group first, still one at a time.
  const RolloutPlan fix = PlanRollout(3, "C", {G(0, "B", false), G(1, "A", true), G(2, "A", true)}, {});
  EXPECT_THAT(fix.apply, ElementsAre(0));
  EXPECT_THAT(fix.remove, ElementsAre(K(0, "B")));
  EXPECT_THAT(fix.keep, ElementsAre(K(1, "A"), K(2, "A")));
}

TEST(RolloutPlannerTest, SurgeKeepsTheOldGroupServingUntilTheNewOneIsReady) {
  const RolloutLimits surge{0, 1};
  FakeCluster cluster;
  cluster.MakeReady(0, "A");
  RolloutPlan p1 = PlanRollout(1, "B", cluster.Observe(), surge);
  EXPECT_THAT(p1.apply, ElementsAre(0));
  EXPECT_THAT(p1.keep, ElementsAre(K(0, "A")));
  cluster.Apply(p1);
  EXPECT_EQ(cluster.Row(), "r0:A* r0:B");
  cluster.Apply(PlanRollout(1, "B", cluster.Observe(), surge));
  EXPECT_EQ(cluster.Row(), "r0:A* r0:B");  // still both: a single replica never goes dark
  cluster.MakeReady(0, "B");
  RolloutPlan p2 = PlanRollout(1, "B", cluster.Observe(), surge);
  EXPECT_THAT(p2.remove, ElementsAre(K(0, "A")));
  cluster.Apply(p2);
  EXPECT_EQ(cluster.Row(), "r0:B*");
  EXPECT_TRUE(PlanRollout(1, "B", cluster.Observe(), surge).complete);
}

TEST(RolloutPlannerTest, ScaleInRemovesEveryGroupOfTheDroppedReplicas) {
  const RolloutPlan plan =
      PlanRollout(1, "A", {G(0, "A", true), G(1, "A", true), G(2, "A", false), G(2, "Z", true)}, {});
  EXPECT_THAT(plan.apply, ElementsAre(0));
  EXPECT_THAT(plan.remove, ElementsAre(K(1, "A"), K(2, "A"), K(2, "Z")));
  EXPECT_FALSE(plan.complete);
}

TEST(RolloutPlannerTest, ScalingOutLeavesRunningReplicasAlone) {
  const RolloutPlan plan = PlanRollout(3, "A", {G(0, "A", true)}, {});
  EXPECT_THAT(plan.apply, ElementsAre(0, 1, 2));
  EXPECT_THAT(plan.remove, IsEmpty());
  EXPECT_THAT(plan.keep, IsEmpty());
}

TEST(RolloutPlannerTest, ZeroLimitsStillProgressOneAtATime) {
  const RolloutPlan plan = PlanRollout(2, "B", {G(0, "A", true), G(1, "A", true)}, {0, 0});
  EXPECT_THAT(plan.apply, ElementsAre(0));
  EXPECT_THAT(plan.keep, ElementsAre(K(1, "A")));
}

// Random spec changes, scaling and readiness; after every plan is carried out:
//   - no replica runs more than two groups, and the plan never starts more surges than
//     maxSurge allows (replicas with two groups <= max(maxSurge, those before the step));
//   - the plan never takes the last ready group of a replica away beyond the budget:
//     replicas without a ready group <= max(those before the step, maxUnavailable);
//   - once the spec stops changing and new groups become ready, the rollout completes.
TEST(RolloutPlannerTest, PropertyBudgetsHoldAndRolloutsFinish) {
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    std::mt19937 rng(seed);
    const RolloutLimits limits{static_cast<int32_t>(rng() % 3), static_cast<int32_t>(rng() % 2)};
    const int32_t effective_unavailable =
        limits.max_unavailable == 0 && limits.max_surge == 0 ? 1 : limits.max_unavailable;
    FakeCluster cluster;
    int32_t replicas = 1 + static_cast<int32_t>(rng() % 4);
    std::string revision = "R0";
    auto unavailable = [&](const FakeCluster& c) {
      int32_t n = 0;
      for (int32_t r = 0; r < replicas; ++r) {
        bool ready = false;
        for (const auto& [k, is_ready] : c.groups) ready = ready || (k.replica == r && is_ready);
        n += !ready;
      }
      return n;
    };
    for (int step = 0; step < 60; ++step) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, " step ", step, ": ", cluster.Row()));
      if (step < 40 && rng() % 5 == 0) revision = absl::StrCat("R", step);
      if (step < 40 && rng() % 7 == 0) replicas = 1 + static_cast<int32_t>(rng() % 4);
      const int32_t before = unavailable(cluster);
      auto doubled_replicas = [&](const FakeCluster& c) {
        std::map<int32_t, int> per_replica;
        for (const auto& [k, ready] : c.groups) ++per_replica[k.replica];
        int32_t n = 0;
        for (const auto& [r, count] : per_replica) {
          EXPECT_LE(count, 2) << "replica " << r;
          n += count > 1;
        }
        return n;
      };
      const int32_t doubled_before = doubled_replicas(cluster);
      const RolloutPlan plan = PlanRollout(replicas, revision, cluster.Observe(), limits);
      cluster.Apply(plan);
      EXPECT_LE(doubled_replicas(cluster), std::max(limits.max_surge, doubled_before));
      EXPECT_LE(unavailable(cluster), std::max(before, effective_unavailable));
      // Some not-ready groups become ready (pipelines form); sometimes one breaks.
      for (auto& [k, ready] : cluster.groups) {
        if (!ready && rng() % 2 == 0) ready = true;
        if (ready && step < 40 && rng() % 25 == 0) ready = false;
      }
    }
    // The spec has been still for 20 steps with no breakage: finished.
    for (auto& [k, ready] : cluster.groups) ready = true;
    cluster.Apply(PlanRollout(replicas, revision, cluster.Observe(), limits));
    for (auto& [k, ready] : cluster.groups) ready = true;
    for (int i = 0; i < 2 * replicas + 2; ++i) {
      cluster.Apply(PlanRollout(replicas, revision, cluster.Observe(), limits));
      for (auto& [k, ready] : cluster.groups) ready = true;
    }
    EXPECT_TRUE(PlanRollout(replicas, revision, cluster.Observe(), limits).complete)
        << "seed " << seed << ": " << cluster.Row();
  }
}

}  // namespace
}  // namespace orca::k8s
