#include "services/operator/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/operator/renderer.h"
#include "tests/unit/operator/orca_deployment_builder.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::ClientFor;
using testing::FakeKubeApiServer;
using ::testing::HasSubstr;
using testing::OrcaDeploymentBuilder;

constexpr char kCrPath[] = "/apis/serving.orca.dev/v1alpha1/namespaces/team-a/orcadeployments/demo";

json Condition(const json& cr, const std::string& type) {
  for (const json& c : cr["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  return json();
}

class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = FakeKubeApiServer::Start();
    client_ = ClientFor(*server_);
    events_ = std::make_unique<EventRecorder>(client_.get(), "orca-operator", "test");
    reconciler_ = std::make_unique<Reconciler>(client_.get(), events_.get(), Reconciler::Options{});
  }
  // Stores the CR as the API server would, and reconciles what it returns.
  absl::Status Reconcile(const OrcaDeploymentBuilder& b) {
    json cr = b.Build();
    cr["metadata"].erase("uid");
    cr["metadata"].erase("generation");
    server_->Upsert(cr);
    return reconciler_->Reconcile(*server_->Get(kCrPath));
  }
  json Cr() { return *server_->Get(kCrPath); }
  std::vector<std::string> EventReasons() {
    std::vector<std::string> reasons;
    for (const json& e : server_->List("/api/v1/namespaces/team-a/events")) reasons.push_back(e["reason"]);
    return reasons;
  }
  // Marks every workload ready, as the StatefulSet/Deployment controllers would.
  void MakeEverythingReady() {
    for (const std::string kind : {"statefulsets", "deployments"}) {
      for (const json& o : server_->List("/apis/apps/v1/namespaces/team-a/" + kind)) {
        const int replicas = o["spec"]["replicas"];
        server_->SetStatus("/apis/apps/v1/namespaces/team-a/" + kind + "/" + o["metadata"]["name"].get<std::string>(),
                           {{"observedGeneration", o["metadata"]["generation"]},
                            {"replicas", replicas},
                            {"readyReplicas", replicas},
                            {"availableReplicas", replicas},
                            {"updatedReplicas", replicas}});
      }
    }
  }

  std::unique_ptr<FakeKubeApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(ReconcilerTest, AppliesEveryRenderedObjectWithOwnerAndFieldManager) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Replicas(2).Pipeline(2)).ok());
  const json cr = Cr();
  auto d = ParseOrcaDeployment(cr);
  ASSERT_TRUE(d.ok());
  for (const json& want : RenderDesiredObjects(*d, RenderOptions{})) {
    auto stored = server_->Get(*ObjectPath(want));
    ASSERT_TRUE(stored.has_value()) << *ObjectPath(want);
    EXPECT_EQ(stored->value("spec", json()), want.value("spec", json()));
    EXPECT_EQ(stored->value("data", json()), want.value("data", json()));
    EXPECT_EQ((*stored)["metadata"]["ownerReferences"][0]["uid"], cr["metadata"]["uid"]);
  }
  for (const auto& r : server_->Requests()) {
    if (r.method == "PATCH") {
      EXPECT_THAT(r.query, HasSubstr("fieldManager=orca-operator&force=true"));
    }
  }
  EXPECT_EQ(server_->CountRequests("PATCH", "/"), 11);
}

TEST_F(ReconcilerTest, StatusFollowsTheWorkloads) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Pipeline(2)).ok());
  json cr = Cr();
  EXPECT_EQ(cr["status"]["observedGeneration"], 1);
  EXPECT_EQ(cr["status"]["readyReplicas"], 0);
  EXPECT_EQ(Condition(cr, "Available")["status"], "False");
  EXPECT_EQ(Condition(cr, "Progressing")["status"], "True");
  EXPECT_EQ(Condition(cr, "Degraded")["status"], "False");
  MakeEverythingReady();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  cr = Cr();
  EXPECT_EQ(cr["status"]["readyReplicas"], 1);
  EXPECT_EQ(cr["status"]["pipelines"][0]["readyStages"], 2);
  EXPECT_EQ(Condition(cr, "Available")["status"], "True");
  EXPECT_EQ(Condition(cr, "Progressing")["reason"], "RolloutComplete");
  EXPECT_THAT(EventReasons(), ::testing::IsSupersetOf({"Reconciled", "MinimumReplicasAvailable", "RolloutComplete"}));
  // Starting up is not a warning; losing every replica afterwards is.
  auto warnings = [&] {
    int n = 0;
    for (const json& e : server_->List("/api/v1/namespaces/team-a/events")) n += e["type"] == "Warning";
    return n;
  };
  EXPECT_EQ(warnings(), 0);
  server_->SetStatus("/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-pipeline",
                     {{"observedGeneration", 1}, {"readyReplicas", 1}, {"updatedReplicas", 2}});
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_EQ(Condition(Cr(), "Available")["reason"], "NoReplicaReady");
  EXPECT_EQ(warnings(), 1);
}

TEST_F(ReconcilerTest, ReconcileIsIdempotent) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder()).ok());
  MakeEverythingReady();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  const int64_t rv = server_->resource_version();
  const size_t events = EventReasons().size();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_EQ(server_->resource_version(), rv);  // nothing changed anywhere
  EXPECT_EQ(EventReasons().size(), events);
  EXPECT_EQ(server_->CountRequests("PUT", "/status"), 2);
}

TEST_F(ReconcilerTest, ScalingDownPrunesTheReplicasNoLongerWanted) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Replicas(3)).ok());
  EXPECT_EQ(server_->List("/apis/apps/v1/namespaces/team-a/statefulsets").size(), 3u);
  // An unrelated object with our labels but another owner must survive.
  server_->Upsert(
      {{"apiVersion", "v1"},
       {"kind", "ConfigMap"},
       {"metadata",
        {{"name", "foreign"},
         {"namespace", "team-a"},
         {"labels", {{"app.kubernetes.io/managed-by", "orca-operator"}, {"serving.orca.dev/deployment", "demo"}}}}}});
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Replicas(1)).ok());
  EXPECT_EQ(server_->List("/apis/apps/v1/namespaces/team-a/statefulsets").size(), 1u);
  EXPECT_FALSE(server_->Get("/apis/apps/v1/namespaces/team-a/deployments/demo-r2-scheduler").has_value());
  EXPECT_FALSE(server_->Get("/api/v1/namespaces/team-a/services/demo-r1-pipeline").has_value());
  EXPECT_TRUE(server_->Get("/api/v1/namespaces/team-a/configmaps/foreign").has_value());
  EXPECT_THAT(EventReasons(), ::testing::Contains("Pruned"));
}

TEST_F(ReconcilerTest, InvalidSpecIsReportedNotApplied) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Set("/spec/scheduler/kvSlots", 4)).ok());
  const json cr = Cr();
  EXPECT_EQ(Condition(cr, "Degraded")["status"], "True");
  EXPECT_EQ(Condition(cr, "Degraded")["reason"], "InvalidSpec");
  EXPECT_THAT(Condition(cr, "Degraded")["message"].get<std::string>(), HasSubstr("fewer than maxBatchSize"));
  EXPECT_EQ(server_->CountRequests("PATCH", "/"), 0);
  EXPECT_THAT(EventReasons(), ::testing::Contains("InvalidSpec"));
  // Fixing the spec recovers.
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder()).ok());
  EXPECT_EQ(Condition(Cr(), "Degraded")["status"], "False");
  EXPECT_EQ(Cr()["status"]["observedGeneration"], 2);
}

TEST_F(ReconcilerTest, StatusConflictIsRetriedOnAFreshRead) {
  server_->FailNext("PUT", "/status", 409, 2);
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder()).ok());
  EXPECT_EQ(server_->CountRequests("PUT", "/status"), 3);
  EXPECT_EQ(Cr()["status"]["observedGeneration"], 1);
}

TEST_F(ReconcilerTest, ApplyFailureIsDegradedAndRetried) {
  server_->FailNext("PATCH", "/statefulsets/", 500);
  absl::Status st = Reconcile(OrcaDeploymentBuilder());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(Condition(Cr(), "Degraded")["reason"], "ApplyFailed");
  EXPECT_THAT(Condition(Cr(), "Degraded")["message"].get<std::string>(), HasSubstr("StatefulSet/demo-r0-pipeline"));
  // The other objects were applied regardless.
  EXPECT_TRUE(server_->Get("/apis/apps/v1/namespaces/team-a/deployments/demo-gateway").has_value());
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_EQ(Condition(Cr(), "Degraded")["status"], "False");
}

TEST_F(ReconcilerTest, MissingServiceMonitorApiIsExplained) {
  server_->FailNext("PATCH", "/servicemonitors/", 404);
  absl::Status st = Reconcile(OrcaDeploymentBuilder().Set("/spec/monitoring/serviceMonitor/enabled", true));
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(Condition(Cr(), "Degraded")["message"].get<std::string>(),
              HasSubstr("monitoring.coreos.com/v1 API is not installed"));
}

}  // namespace
}  // namespace orca::k8s
