#include "services/operator/controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "services/operator/orca_deployment_spec.h"
#include "services/operator/renderer.h"
#include "tests/unit/operator/orca_deployment_builder.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::ClientFor;
using testing::Eventually;
using testing::FakeKubeApiServer;
using testing::OrcaDeploymentBuilder;

constexpr char kCrPath[] = "/apis/serving.orca.dev/v1alpha1/namespaces/team-a/orcadeployments/demo";

std::string ConditionStatus(const json& cr, const std::string& type) {
  if (!cr.contains("status") || !cr["status"].contains("conditions")) return "";
  for (const json& c : cr["status"]["conditions"]) {
    if (c["type"] == type) return c["status"];
  }
  return "";
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_ = *OperatorMetrics::Create();
    server_ = FakeKubeApiServer::Start();
    client_ = ClientFor(*server_);
    Controller::Options options;
    options.namespace_ = "team-a";
    options.retry_base = absl::Milliseconds(10);
    controller_ = std::make_unique<Controller>(client_.get(), nullptr, metrics_.get(), options);
  }
  void Start() {
    thread_ = std::thread([this] { controller_->Run(&stop_); });
    ASSERT_TRUE(Eventually([&] { return controller_->HasSynced() && server_->OpenWatches() == 3; }));
  }
  void TearDown() override {
    stop_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  std::optional<json> Cr() { return server_->Get(kCrPath); }
  void Submit(const OrcaDeploymentBuilder& b) {
    json cr = b.Build();
    cr["metadata"].erase("uid");
    cr["metadata"].erase("generation");
    server_->Upsert(cr);
  }

  std::unique_ptr<OperatorMetrics> metrics_;
  std::unique_ptr<FakeKubeApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<Controller> controller_;
  absl::Notification stop_;
  std::thread thread_;
};

TEST_F(ControllerTest, ReconcilesWhatItWatchesAndFollowsChildren) {
  Start();
  auto revision = [](const OrcaDeploymentBuilder& b) {
    auto d = ParseOrcaDeployment(b.Build());
    return d.ok() ? EngineRevision(*d, RenderOptions{}) : "";
  };
  const std::string group =
      "/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + revision(OrcaDeploymentBuilder().Pipeline(2));
  Submit(OrcaDeploymentBuilder().Pipeline(2));
  ASSERT_TRUE(Eventually([&] { return ConditionStatus(*Cr(), "Progressing") == "True"; }));
  ASSERT_TRUE(server_->Get(group).has_value());
  // The workload controllers report ready: the child watches bring the operator back.
  for (const std::string& path :
       {group, group + "-sched", std::string("/apis/apps/v1/namespaces/team-a/deployments/demo-gateway")}) {
    const json o = *server_->Get(path);
    const int n = o["spec"]["replicas"];
    server_->SetStatus(path, {{"observedGeneration", o["metadata"]["generation"]},
                              {"replicas", n},
                              {"readyReplicas", n},
                              {"availableReplicas", n},
                              {"updatedReplicas", n}});
  }
  ASSERT_TRUE(Eventually([&] { return ConditionStatus(*Cr(), "Available") == "True"; }));
  EXPECT_EQ((*Cr())["status"]["readyReplicas"], 1);
  // A spec change is applied: the replica is replaced by a group at the new revision.
  const std::string next =
      "/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + revision(OrcaDeploymentBuilder().Pipeline(3));
  Submit(OrcaDeploymentBuilder().Pipeline(3));
  ASSERT_TRUE(Eventually([&] {
    auto sts = server_->Get(next);
    return sts && (*sts)["spec"]["replicas"] == 3 && !server_->Get(group) &&
           (*Cr())["status"]["observedGeneration"] == 2;
  }));
  EXPECT_GT(metrics_->reconciles(true), 0);
}

TEST_F(ControllerTest, KeepsWorkingAcrossAnExpiredWatch) {
  Start();
  server_->EndWatches();
  server_->CompactHistory();
  Submit(OrcaDeploymentBuilder());
  ASSERT_TRUE(Eventually([&] { return Cr()->contains("status"); }));
  EXPECT_TRUE(server_->Get("/apis/apps/v1/namespaces/team-a/deployments/demo-gateway").has_value());
}

TEST_F(ControllerTest, RetriesFailedReconcilesWithBackoff) {
  server_->FailNext("PATCH", "/configmaps/demo-gateway", 500, 2);
  Start();
  Submit(OrcaDeploymentBuilder());
  ASSERT_TRUE(Eventually([&] { return ConditionStatus(*Cr(), "Degraded") == "False"; }));
  EXPECT_GE(metrics_->reconciles(false), 2);
  EXPECT_TRUE(server_->Get("/api/v1/namespaces/team-a/configmaps/demo-gateway").has_value());
}

TEST_F(ControllerTest, InvalidSpecIsNotRetried) {
  Start();
  Submit(OrcaDeploymentBuilder().Pipeline(0));
  ASSERT_TRUE(Eventually([&] { return ConditionStatus(*Cr(), "Degraded") == "True"; }));
  const int puts = server_->CountRequests("PUT", "/status");
  // The status update itself comes back as a watch event; reconciling it again changes nothing.
  ASSERT_TRUE(Eventually([&] { return metrics_->reconciles(true) >= 2; }));
  EXPECT_EQ(server_->CountRequests("PUT", "/status"), puts);
  EXPECT_EQ(metrics_->reconciles(false), 0);
  EXPECT_EQ(server_->CountRequests("PATCH", "/"), 0);
  EXPECT_GE(metrics_->invalid_specs(), 1);
}

}  // namespace
}  // namespace orca::k8s
