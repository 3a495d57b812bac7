#include "services/operator/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "services/operator/renderer.h"
#include "tests/unit/operator/orca_deployment_builder.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::ClientFor;
using ::testing::ElementsAre;
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
        SetReady("/apis/apps/v1/namespaces/team-a/" + kind + "/" + o["metadata"]["name"].get<std::string>());
      }
    }
  }
  void SetReady(const std::string& path) {
    const json o = *server_->Get(path);
    const int replicas = o["spec"]["replicas"];
    server_->SetStatus(path, {{"observedGeneration", o["metadata"]["generation"]},
                              {"replicas", replicas},
                              {"readyReplicas", replicas},
                              {"availableReplicas", replicas},
                              {"updatedReplicas", replicas}});
  }
  // The engine revision the operator renders for `b`.
  std::string RevisionOf(const OrcaDeploymentBuilder& b) {
    auto d = ParseOrcaDeployment(b.Build());
    return d.ok() ? EngineRevision(*d, RenderOptions{}) : "";
  }
  // "r0:REV" for every group StatefulSet (pipeline) in the namespace, sorted.
  std::vector<std::string> Groups() {
    std::vector<std::string> out;
    for (const json& o : server_->List("/apis/apps/v1/namespaces/team-a/statefulsets")) {
      const json& l = o["metadata"]["labels"];
      if (l["app.kubernetes.io/component"] != "worker") continue;
      out.push_back(absl::StrCat("r", l["serving.orca.dev/replica"].get<std::string>(), ":",
                                 l["serving.orca.dev/revision"].get<std::string>()));
    }
    std::sort(out.begin(), out.end());
    return out;
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
  EXPECT_EQ(server_->CountRequests("PATCH", "/"), static_cast<int>(RenderDesiredObjects(*d, RenderOptions{}).size()));
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
  server_->SetStatus(
      "/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + RevisionOf(OrcaDeploymentBuilder().Pipeline(2)),
      {{"observedGeneration", 1}, {"replicas", 2}, {"readyReplicas", 1}, {"updatedReplicas", 2}});
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
  EXPECT_EQ(server_->List("/apis/apps/v1/namespaces/team-a/statefulsets").size(), 6u);
  // An unrelated object with our labels but another owner must survive.
  server_->Upsert(
      {{"apiVersion", "v1"},
       {"kind", "ConfigMap"},
       {"metadata",
        {{"name", "foreign"},
         {"namespace", "team-a"},
         {"labels", {{"app.kubernetes.io/managed-by", "orca-operator"}, {"serving.orca.dev/deployment", "demo"}}}}}});
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Replicas(1)).ok());
  const std::string rev = RevisionOf(OrcaDeploymentBuilder());
  EXPECT_EQ(server_->List("/apis/apps/v1/namespaces/team-a/statefulsets").size(), 2u);
  EXPECT_FALSE(server_->Get("/apis/apps/v1/namespaces/team-a/statefulsets/demo-r2-" + rev + "-sched").has_value());
  EXPECT_FALSE(server_->Get("/api/v1/namespaces/team-a/configmaps/demo-r1-" + rev).has_value());
  EXPECT_FALSE(server_->Get("/api/v1/namespaces/team-a/services/demo-r1-scheduler").has_value());
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
  EXPECT_THAT(Condition(Cr(), "Degraded")["message"].get<std::string>(),
              HasSubstr("StatefulSet/demo-r0-" + RevisionOf(OrcaDeploymentBuilder())));
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

// D4: a config change replaces one engine replica (scheduler and whole pipeline, as a new
// group) at a time; the next goes only when the new one is ready; the others serve throughout.
TEST_F(ReconcilerTest, UpdateReplacesOneWholeReplicaAtATime) {
  const auto before = OrcaDeploymentBuilder().Replicas(2).Pipeline(2);
  const auto after = OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/scheduler/maxBatchSize", 8);
  const std::string a = RevisionOf(before), b = RevisionOf(after);
  ASSERT_NE(a, b);
  ASSERT_TRUE(Reconcile(before).ok());
  MakeEverythingReady();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_THAT(Groups(), ElementsAre("r0:" + a, "r1:" + a));
  const int patches_of_r1 = server_->CountRequests("PATCH", "demo-r1-" + a);

  ASSERT_TRUE(Reconcile(after).ok());
  EXPECT_THAT(Groups(), ElementsAre("r0:" + b, "r1:" + a));
  EXPECT_EQ(Cr()["status"]["updatedReplicas"], 0);            // no pod of the new group exists yet
  EXPECT_EQ(Condition(Cr(), "Available")["status"], "True");  // r1 serves
  EXPECT_EQ(Condition(Cr(), "Progressing")["reason"], "RolloutInProgress");
  // Again, before r0's new group is ready: r1 is not touched.
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_THAT(Groups(), ElementsAre("r0:" + b, "r1:" + a));
  EXPECT_EQ(server_->CountRequests("PATCH", "demo-r1-" + a), patches_of_r1);

  SetReady("/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + b);
  SetReady("/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + b + "-sched");
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_THAT(Groups(), ElementsAre("r0:" + b, "r1:" + b));
  EXPECT_FALSE(server_->Get("/api/v1/namespaces/team-a/configmaps/demo-r1-" + a).has_value());
  MakeEverythingReady();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  const json cr = Cr();
  EXPECT_EQ(Condition(cr, "Progressing")["reason"], "RolloutComplete");
  EXPECT_EQ(cr["status"]["updatedReplicas"], 2);
  EXPECT_EQ(cr["status"]["revision"], b);
  // Scaling afterwards adds a group and deletes nothing; the running groups' objects are
  // re-applied unchanged (a no-op: their resourceVersion stays).
  const int deletes = server_->CountRequests("DELETE", "/");
  const std::string r0 = "/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + b;
  const std::string r0_version = (*server_->Get(r0))["metadata"]["resourceVersion"];
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Replicas(3).Pipeline(2).Set("/spec/scheduler/maxBatchSize", 8)).ok());
  EXPECT_THAT(Groups(), ElementsAre("r0:" + b, "r1:" + b, "r2:" + b));
  EXPECT_EQ(server_->CountRequests("DELETE", "/"), deletes);
  EXPECT_EQ((*server_->Get(r0))["metadata"]["resourceVersion"], r0_version);
}

// D6: under foreground deletion the garbage collector deletes the children while the owner
// still exists with a deletionTimestamp; the operator must not apply (re-create) anything.
TEST_F(ReconcilerTest, DeletionInProgressAppliesNothing) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Pipeline(2)).ok());
  const std::string rev = RevisionOf(OrcaDeploymentBuilder().Pipeline(2));
  json cr = Cr();
  cr["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:10Z";
  cr["metadata"]["finalizers"] = json::array({"foregroundDeletion"});
  server_->Upsert(cr);
  server_->Remove("/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + rev);  // the GC at work
  const size_t before = server_->Requests().size();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  const auto requests = server_->Requests();
  EXPECT_EQ(requests.size(), before) << "any request at all: " << requests.back().method << " " << requests.back().path;
  EXPECT_FALSE(server_->Get("/apis/apps/v1/namespaces/team-a/statefulsets/demo-r0-" + rev).has_value());
}

// RBAC as the chart grants it in the no-ServiceMonitor mode (no monitoring.coreos.com rule).
std::vector<FakeKubeApiServer::PolicyRule> RulesWithoutServiceMonitors() {
  return {{{"serving.orca.dev"}, {"orcadeployments"}, {"get", "list", "watch"}, ""},
          {{"serving.orca.dev"}, {"orcadeployments/status"}, {"update"}, ""},
          {{"apps"}, {"statefulsets", "deployments"}, {"list", "watch", "create", "patch", "delete"}, ""},
          {{""}, {"services", "configmaps"}, {"list", "create", "patch", "delete"}, ""},
          {{"policy"}, {"poddisruptionbudgets"}, {"list", "create", "patch", "delete"}, ""},
          {{"networking.k8s.io"}, {"networkpolicies"}, {"list", "create", "patch", "delete"}, ""},
          {{""}, {"secrets"}, {"create"}, ""},
          {{""}, {"events"}, {"create"}, ""}};
}

// D2: with --manage-service-monitors=false the operator never lists ServiceMonitors (the
// RBAC does not allow it), so deployments are not Degraded by a 403.
TEST_F(ReconcilerTest, UnmanagedServiceMonitorsAreNeverTouched) {
  server_->Upsert(OrcaDeploymentBuilder().Build());  // (stored by the test before RBAC is on)
  server_->SetRbacRules(RulesWithoutServiceMonitors());
  Reconciler::Options options;
  options.render.service_monitors = false;
  Reconciler unmanaged(client_.get(), events_.get(), options);
  ASSERT_TRUE(unmanaged.Reconcile(*server_->Get(kCrPath)).ok());
  EXPECT_THAT(server_->Denials(), ::testing::IsEmpty());
  EXPECT_EQ(Condition(Cr(), "Degraded")["status"], "False");
  // Asking for one is reported, not attempted.
  server_->SetRbacRules(std::nullopt);
  server_->Upsert(OrcaDeploymentBuilder().Set("/spec/monitoring/serviceMonitor/enabled", true).Build());
  server_->SetRbacRules(RulesWithoutServiceMonitors());
  ASSERT_TRUE(unmanaged.Reconcile(*server_->Get(kCrPath)).ok());
  EXPECT_THAT(server_->Denials(), ::testing::IsEmpty());
  EXPECT_EQ(Condition(Cr(), "Degraded")["reason"], "ServiceMonitorsNotManaged");
  EXPECT_EQ(Condition(Cr(), "Available")["reason"], "NoReplicaReady");  // what it says otherwise is unchanged
  // The old behaviour (listing them anyway) is what the RBAC refuses: Degraded for everyone.
  ASSERT_FALSE(reconciler_->Reconcile(*server_->Get(kCrPath)).ok());
  EXPECT_THAT(server_->Denials(), ::testing::Contains(HasSubstr("list monitoring.coreos.com/servicemonitors team-a")));
  EXPECT_EQ(Condition(Cr(), "Degraded")["reason"], "ApplyFailed");
}

constexpr char kTokenSecretPath[] = "/api/v1/namespaces/team-a/secrets/demo-internal-token";

// Issue 45: every internal port requires the deployment's internal token. The operator creates
// its Secret once, owned by the OrcaDeployment (the garbage collector deletes it with it), and
// never draws it again: later reconciles, a spec change (a new revision, new pods) and a second
// operator pass keep the token the running pods read.
TEST_F(ReconcilerTest, CreatesTheInternalTokenSecretOnceOwnedAndNeverRedrawsIt) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Pipeline(2)).ok());
  const std::optional<json> secret = server_->Get(kTokenSecretPath);
  ASSERT_TRUE(secret.has_value());
  const json& refs = (*secret)["metadata"]["ownerReferences"];
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0]["uid"], Cr()["metadata"]["uid"]);
  EXPECT_EQ(refs[0]["kind"], "OrcaDeployment");
  EXPECT_EQ(refs[0]["controller"], true);
  std::string token;
  ASSERT_TRUE(absl::Base64Unescape((*secret)["data"]["token"].get<std::string>(), &token));
  EXPECT_THAT(token, ::testing::MatchesRegex("[0-9a-f]{64}\n"));
  // Every workload mounts it and every process reads it.
  for (const std::string kind : {"statefulsets", "deployments"}) {
    for (const json& o : server_->List("/apis/apps/v1/namespaces/team-a/" + kind)) {
      bool mounted = false;
      for (const json& v : o["spec"]["template"]["spec"]["volumes"])
        mounted |= v.contains("secret") && v["secret"]["secretName"] == "demo-internal-token";
      EXPECT_TRUE(mounted) << o["metadata"]["name"];
    }
  }
  for (const json& cm : server_->List("/api/v1/namespaces/team-a/configmaps")) {
    for (const auto& [file, text] : cm["data"].items())
      EXPECT_THAT(text.get<std::string>(), HasSubstr("internal-token-file: \"/etc/orca-internal-auth/token\""))
          << cm["metadata"]["name"] << "/" << file;
  }

  MakeEverythingReady();
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Pipeline(2).Set("/spec/scheduler/maxBatchSize", 8)).ok());
  Reconciler another(client_.get(), events_.get(), Reconciler::Options{});  // e.g. after a leader change
  ASSERT_TRUE(another.Reconcile(Cr()).ok());
  EXPECT_EQ((*server_->Get(kTokenSecretPath))["data"], (*secret)["data"]) << "the token was drawn again";
  EXPECT_EQ((*server_->Get(kTokenSecretPath))["metadata"]["resourceVersion"], (*secret)["metadata"]["resourceVersion"]);
  for (const char* method : {"PUT", "PATCH", "DELETE", "GET"})
    EXPECT_EQ(server_->CountRequests(method, "/secrets"), 0) << method << ": the operator only ever creates Secrets";
  const std::vector<std::string> reasons = EventReasons();
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "InternalTokenCreated"), 1);
  EXPECT_EQ(Condition(Cr(), "Degraded")["status"], "False");
}

// spec.scheduler.apiKeys names the user's own Secret: it is mounted instead and none is created.
TEST_F(ReconcilerTest, AnOwnSecretIsMountedAndNoneIsCreated) {
  ASSERT_TRUE(Reconcile(OrcaDeploymentBuilder().Set("/spec/scheduler/apiKeys", {{"secretName", "mine"}})).ok());
  EXPECT_FALSE(server_->Get(kTokenSecretPath).has_value());
  EXPECT_EQ(server_->CountRequests("POST", "/secrets"), 0);
  for (const json& o : server_->List("/apis/apps/v1/namespaces/team-a/statefulsets")) {
    bool mounted = false;
    for (const json& v : o["spec"]["template"]["spec"]["volumes"])
      mounted |= v.contains("secret") && v["secret"]["secretName"] == "mine";
    EXPECT_TRUE(mounted) << o["metadata"]["name"];
  }
}

// A Secret that cannot be created (here: RBAC) leaves the deployment Degraded naming it, and is retried.
TEST_F(ReconcilerTest, ASecretThatCannotBeCreatedIsDegradedAndRetried) {
  server_->FailNext("POST", "/secrets", 403);
  EXPECT_FALSE(Reconcile(OrcaDeploymentBuilder()).ok());
  EXPECT_EQ(Condition(Cr(), "Degraded")["reason"], "ApplyFailed");
  EXPECT_THAT(Condition(Cr(), "Degraded")["message"].get<std::string>(), HasSubstr("Secret/demo-internal-token"));
  EXPECT_TRUE(server_->Get("/apis/apps/v1/namespaces/team-a/deployments/demo-gateway").has_value());
  ASSERT_TRUE(reconciler_->Reconcile(Cr()).ok());
  EXPECT_TRUE(server_->Get(kTokenSecretPath).has_value());
  EXPECT_EQ(Condition(Cr(), "Degraded")["status"], "False");
}

}  // namespace
}  // namespace orca::k8s
