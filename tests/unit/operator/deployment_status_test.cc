#include "services/operator/deployment_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/operator/renderer.h"
#include "tests/unit/operator/orca_deployment_builder.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::OrcaDeploymentBuilder;

json Condition(const json& status, const std::string& type) {
  for (const json& c : status["conditions"]) {
    if (c["type"] == type) return c;
  }
  ADD_FAILURE() << "no condition " << type;
  return json();
}

constexpr char kRev[] = "0a1b2c3d";

// One group's two StatefulSets as the API server would return them.
std::vector<json> GroupWorkloads(const OrcaDeployment& d, int r, const std::string& rev, int created_stages,
                                 int ready_stages, bool scheduler_ready) {
  auto labels = [&](const char* component) {
    return json{{"app.kubernetes.io/component", component},
                {"serving.orca.dev/deployment", d.name},
                {"serving.orca.dev/replica", std::to_string(r)},
                {"serving.orca.dev/revision", rev}};
  };
  return {{{"kind", "StatefulSet"},
           {"metadata", {{"name", GroupName(d, r, rev)}, {"generation", 1}, {"labels", labels("worker")}}},
           {"spec", {{"replicas", d.pipeline}}},
           {"status", {{"observedGeneration", 1}, {"replicas", created_stages}, {"readyReplicas", ready_stages}}}},
          {{"kind", "StatefulSet"},
           {"metadata", {{"name", GroupSchedulerName(d, r, rev)}, {"generation", 1}, {"labels", labels("scheduler")}}},
           {"spec", {{"replicas", 1}}},
           {"status",
            {{"observedGeneration", 1},
             {"replicas", created_stages > 0 ? 1 : 0},
             {"readyReplicas", scheduler_ready ? 1 : 0}}}}};
}

// Every replica's group at kRev with these ready counts, and the gateway.
std::vector<json> Workloads(const OrcaDeployment& d, const std::vector<int>& ready_stages, bool schedulers_ready,
                            int gateway_available) {
  std::vector<json> out;
  for (int r = 0; r < d.replicas; ++r) {
    for (json& o : GroupWorkloads(d, r, kRev, d.pipeline, ready_stages[r], schedulers_ready)) out.push_back(o);
  }
  out.push_back({{"kind", "Deployment"},
                 {"metadata", {{"name", GatewayName(d)}, {"generation", 1}}},
                 {"status",
                  {{"observedGeneration", 1},
                   {"availableReplicas", gateway_available},
                   {"readyReplicas", gateway_available},
                   {"updatedReplicas", gateway_available}}}});
  return out;
}

class DeploymentStatusTest : public ::testing::Test {
 protected:
  OrcaDeployment Deployment(int replicas, int pipeline) {
    auto d = ParseOrcaDeployment(OrcaDeploymentBuilder().Replicas(replicas).Pipeline(pipeline).Generation(5).Build());
    EXPECT_TRUE(d.ok());
    return *d;
  }
  json Status(const OrcaDeployment& d, const std::vector<json>& workloads, const json& previous, const char* now,
              ReconcileResult result = {}) {
    return ComputeStatus(&d, 5, result, ObserveChildren(d, workloads), kRev, previous, now);
  }
};

TEST_F(DeploymentStatusTest, RolloutFromNothingToAvailable) {
  const OrcaDeployment d = Deployment(2, 2);
  // t1: nothing ready yet.
  json s1 = Status(d, Workloads(d, {0, 0}, false, 0), json::object(), "t1");
  EXPECT_EQ(s1["observedGeneration"], 5);
  EXPECT_EQ(s1["readyReplicas"], 0);
  EXPECT_EQ(s1["replicas"], 2);
  EXPECT_EQ(Condition(s1, "Available")["status"], "False");
  EXPECT_EQ(Condition(s1, "Available")["reason"], "NoReplicaReady");
  EXPECT_EQ(Condition(s1, "Progressing")["status"], "True");
  EXPECT_EQ(Condition(s1, "Degraded")["status"], "False");
  EXPECT_EQ(s1["selector"], SchedulerPodSelector(d));
  // t2: replica 0 fully ready, replica 1 has one of two stages.
  json s2 = Status(d, Workloads(d, {2, 1}, true, 1), s1, "t2");
  EXPECT_EQ(s2["readyReplicas"], 1);
  EXPECT_EQ(s2["pipelines"][0]["ready"], true);
  EXPECT_EQ(s2["pipelines"][1]["ready"], false);
  EXPECT_EQ(s2["pipelines"][1]["readyStages"], 1);
  EXPECT_EQ(Condition(s2, "Available")["status"], "True");
  EXPECT_EQ(Condition(s2, "Available")["lastTransitionTime"], "t2");
  EXPECT_EQ(Condition(s2, "Progressing")["status"], "True");
  EXPECT_EQ(Condition(s2, "Progressing")["lastTransitionTime"], "t1");  // unchanged status keeps its time
  // t3: everything ready.
  json s3 = Status(d, Workloads(d, {2, 2}, true, 1), s2, "t3");
  EXPECT_EQ(s3["readyReplicas"], 2);
  EXPECT_EQ(Condition(s3, "Progressing")["status"], "False");
  EXPECT_EQ(Condition(s3, "Progressing")["reason"], "RolloutComplete");
  EXPECT_EQ(Condition(s3, "Available")["lastTransitionTime"], "t2");
  // t4: same observation, same status: nothing to write.
  EXPECT_EQ(Status(d, Workloads(d, {2, 2}, true, 1), s3, "t4"), s3);
}

TEST_F(DeploymentStatusTest, GatewayDownMeansUnavailable) {
  const OrcaDeployment d = Deployment(1, 1);
  json s = Status(d, Workloads(d, {1}, true, 0), json::object(), "t");
  EXPECT_EQ(Condition(s, "Available")["status"], "False");
  EXPECT_EQ(Condition(s, "Available")["reason"], "GatewayUnavailable");
}

TEST_F(DeploymentStatusTest, MissingWorkloadsCountAsNotReady) {
  const OrcaDeployment d = Deployment(1, 3);
  json s = Status(d, {}, json::object(), "t");
  EXPECT_EQ(s["readyReplicas"], 0);
  EXPECT_EQ(s["replicas"], 0);
  EXPECT_TRUE(s["pipelines"].empty());
  EXPECT_EQ(Condition(s, "Progressing")["status"], "True");
}

TEST_F(DeploymentStatusTest, ReplicasAreObservedNotCopiedFromTheSpec) {
  const OrcaDeployment d = Deployment(3, 2);
  // Replica 0 has its pods; replica 1's StatefulSets exist but no pod was created yet; replica 2 has nothing.
  std::vector<json> objects = GroupWorkloads(d, 0, kRev, 2, 2, true);
  for (json& o : GroupWorkloads(d, 1, kRev, 0, 0, false)) objects.push_back(o);
  json s = Status(d, objects, json::object(), "t");
  EXPECT_EQ(s["replicas"], 1);
  EXPECT_EQ(s["updatedReplicas"], 1);
  EXPECT_EQ(s["readyReplicas"], 1);
  EXPECT_EQ(s["revision"], kRev);
  EXPECT_EQ(s["pipelines"].size(), 2u);
}

TEST_F(DeploymentStatusTest, AnOldRevisionStillServesButIsNotUpdated) {
  const OrcaDeployment d = Deployment(2, 1);
  std::vector<json> objects = GroupWorkloads(d, 0, "olderrev", 1, 1, true);  // not replaced yet
  for (json& o : GroupWorkloads(d, 1, kRev, 1, 1, true)) objects.push_back(o);
  objects.push_back(
      {{"kind", "Deployment"},
       {"metadata", {{"name", GatewayName(d)}, {"generation", 1}}},
       {"status",
        {{"observedGeneration", 1}, {"availableReplicas", 1}, {"updatedReplicas", 1}, {"readyReplicas", 1}}}});
  json s = Status(d, objects, json::object(), "t");
  EXPECT_EQ(s["replicas"], 2);
  EXPECT_EQ(s["readyReplicas"], 2);
  EXPECT_EQ(s["updatedReplicas"], 1);
  EXPECT_EQ(Condition(s, "Available")["status"], "True");
  EXPECT_EQ(Condition(s, "Progressing")["reason"], "RolloutInProgress");
  EXPECT_EQ(s["pipelines"][0]["revision"], "olderrev");
  // Objects of other deployments or without group labels are not groups.
  std::vector<json> foreign = GroupWorkloads(d, 0, kRev, 1, 1, true);
  foreign[0]["metadata"]["labels"]["serving.orca.dev/deployment"] = "other";
  foreign[1]["metadata"]["labels"].erase("serving.orca.dev/revision");
  EXPECT_TRUE(ObserveChildren(d, foreign).groups.empty());
}

TEST_F(DeploymentStatusTest, ServiceMonitorsNotManagedIsDegradedButServes) {
  const OrcaDeployment d = Deployment(1, 1);
  json s = Status(d, Workloads(d, {1}, true, 1), json::object(), "t",
                  {ReconcileResult::Kind::kServiceMonitorsNotManaged, "no ServiceMonitor was created"});
  EXPECT_EQ(Condition(s, "Degraded")["reason"], "ServiceMonitorsNotManaged");
  EXPECT_EQ(Condition(s, "Available")["status"], "True");
  EXPECT_EQ(Condition(s, "Progressing")["reason"], "RolloutComplete");
}

TEST_F(DeploymentStatusTest, ApplyFailureIsDegraded) {
  const OrcaDeployment d = Deployment(1, 1);
  json s = Status(d, Workloads(d, {1}, true, 1), json::object(), "t",
                  {ReconcileResult::Kind::kApplyFailed, "ServiceMonitor/demo: API not installed"});
  EXPECT_EQ(Condition(s, "Degraded")["status"], "True");
  EXPECT_EQ(Condition(s, "Degraded")["reason"], "ApplyFailed");
  EXPECT_EQ(Condition(s, "Degraded")["message"], "ServiceMonitor/demo: API not installed");
  EXPECT_EQ(Condition(s, "Available")["status"], "True");  // what runs still serves
}

TEST_F(DeploymentStatusTest, InvalidSpecKeepsWhatIsKnownAndSaysWhy) {
  const OrcaDeployment d = Deployment(1, 1);
  json good = Status(d, Workloads(d, {1}, true, 1), json::object(), "t1");
  json bad = ComputeStatus(nullptr, 6, {ReconcileResult::Kind::kInvalidSpec, "spec.replicas: must be in [0, 64]"}, {},
                           "", good, "t2");
  EXPECT_EQ(bad["observedGeneration"], 6);
  EXPECT_EQ(bad["readyReplicas"], 1);
  EXPECT_EQ(Condition(bad, "Degraded")["status"], "True");
  EXPECT_EQ(Condition(bad, "Degraded")["reason"], "InvalidSpec");
  EXPECT_EQ(Condition(bad, "Degraded")["message"], "spec.replicas: must be in [0, 64]");
  EXPECT_EQ(Condition(bad, "Degraded")["lastTransitionTime"], "t2");
  EXPECT_EQ(Condition(bad, "Available")["status"], "True");
  EXPECT_EQ(Condition(bad, "Available")["lastTransitionTime"], "t1");
  // From nothing, availability is unknown.
  json fresh = ComputeStatus(nullptr, 1, {ReconcileResult::Kind::kInvalidSpec, "x"}, {}, "", json(), "t");
  EXPECT_EQ(Condition(fresh, "Available")["status"], "Unknown");
}

TEST_F(DeploymentStatusTest, ScaledToZero) {
  const OrcaDeployment d = Deployment(0, 1);
  json s = Status(d, Workloads(d, {}, false, 0), json::object(), "t");
  EXPECT_EQ(Condition(s, "Available")["reason"], "ScaledToZero");
  EXPECT_EQ(Condition(s, "Progressing")["status"], "False");
}

TEST_F(DeploymentStatusTest, ConditionChangesListOnlyTransitions) {
  const OrcaDeployment d = Deployment(1, 1);
  json s1 = Status(d, Workloads(d, {0}, false, 0), json::object(), "t1");
  EXPECT_EQ(ConditionChanges(json::object(), s1).size(), 3u);
  json s2 = Status(d, Workloads(d, {1}, true, 1), s1, "t2");
  auto changes = ConditionChanges(s1, s2);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].type, "Available");
  EXPECT_EQ(changes[0].status, "True");
  EXPECT_EQ(changes[0].previous_status, "False");
  EXPECT_EQ(changes[1].type, "Progressing");
  EXPECT_TRUE(ConditionChanges(s2, s2).empty());
}

}  // namespace
}  // namespace orca::k8s
