// Proof item (c) of issue 10: the real orca-operator, started with the arguments the
// Helm chart gives it, against an API server that enforces the RBAC the same chart
// renders (FakeKubeApiServer answers 403 to anything not granted), in every mode the
// chart has: cluster-wide, one namespace, no ServiceMonitors, DNS discovery. A full
// life cycle (create, become ready, a config change rolled replica by replica, the
// upgrade from the old layout, scale to zero, a status conflict, foreground deletion)
// must meet no 403, and use every verb granted (least privilege, both ways).
//
// The chart is rendered with the real helm from .tools/helm (scripts/bootstrap.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/common/ports.h"
#include "services/operator/json_yaml.h"
#include "services/operator/orca_deployment_spec.h"
#include "services/operator/renderer.h"
#include "tests/unit/operator/orca_deployment_builder.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::Eventually;
using testing::FakeKubeApiServer;
using testing::OrcaDeploymentBuilder;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// `helm template` of the chart with a values file of tests/deploy/values, parsed.
std::vector<json> RenderChart(const std::string& values_file) {
  const std::string src = Env("ORCA_SOURCE_DIR");
  const std::string helm = src + "/.tools/helm";
  EXPECT_EQ(::access(helm.c_str(), X_OK), 0) << helm << " missing: run scripts/bootstrap.sh";
  const std::string home = ::testing::TempDir() + "/helm-home";
  const std::string cmd =
      absl::StrCat("HELM_CACHE_HOME=", home, "/cache HELM_CONFIG_HOME=", home, "/config HELM_DATA_HOME=", home,
                   "/data ", helm, " template orca-test ", src, "/deploy/helm/orca --namespace orca-system -f ", src,
                   "/tests/deploy/values/", values_file, " 2>&1");
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int rc = ::pclose(pipe);
  EXPECT_EQ(rc, 0) << out;
  auto docs = ParseYamlDocuments(out);
  EXPECT_TRUE(docs.ok()) << docs.status();
  return docs.ok() ? *docs : std::vector<json>{};
}

struct ChartMode {
  std::vector<FakeKubeApiServer::PolicyRule> rules;  // bound to the operator's ServiceAccount
  std::set<std::string> granted;                     // "verb group/resource"
  std::vector<std::string> args;                     // the operator container's args
};

ChartMode ReadChart(const std::vector<json>& objects) {
  ChartMode mode;
  std::set<std::string> bound;  // Role names ("ns/name") and ClusterRole names bound to the operator
  for (const json& o : objects) {
    const std::string kind = o.value("kind", "");
    if (kind != "RoleBinding" && kind != "ClusterRoleBinding") continue;
    for (const json& s : o["subjects"]) {
      if (s["kind"] == "ServiceAccount" && s["namespace"] == "orca-system" &&
          s["name"].get<std::string>().find("operator") != std::string::npos) {
        bound.insert(absl::StrCat(o["roleRef"]["kind"].get<std::string>(), "/",
                                  kind == "RoleBinding" ? o["metadata"]["namespace"].get<std::string>() + "/" : "",
                                  o["roleRef"]["name"].get<std::string>()));
      }
    }
  }
  std::vector<json> roles;
  for (const json& o : objects) {
    const std::string kind = o.value("kind", "");
    if (kind == "Role" && bound.count(absl::StrCat("Role/", o["metadata"]["namespace"].get<std::string>(), "/",
                                                   o["metadata"]["name"].get<std::string>()))) {
      roles.push_back(o);
    } else if (kind == "ClusterRole" && bound.count("ClusterRole/" + o["metadata"]["name"].get<std::string>())) {
      roles.push_back(o);
    } else if (kind == "Deployment" && o["metadata"]["labels"]["app.kubernetes.io/component"] == "operator") {
      mode.args = o["spec"]["template"]["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
    }
  }
  mode.rules = FakeKubeApiServer::RulesFromRoles(roles);
  for (const auto& r : mode.rules) {
    for (const auto& g : r.api_groups)
      for (const auto& res : r.resources)
        for (const auto& v : r.verbs) mode.granted.insert(absl::StrCat(v, " ", g, "/", res));
  }
  return mode;
}

class OperatorRbacTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(Env("ORCA_BINARY_DIR").empty()) << "ORCA_BINARY_DIR must point at the build tree (set by CTest)";
    binary_ = Env("ORCA_BINARY_DIR") + "/bin/orca-operator";
    ASSERT_EQ(::access(binary_.c_str(), X_OK), 0) << binary_ << " is not built";
    server_ = FakeKubeApiServer::Start();
    kubeconfig_ = ::testing::TempDir() + "/rbac-kubeconfig-" + std::to_string(::getpid()) + ".yaml";
    std::ofstream(kubeconfig_) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                               << "clusters: [{name: fake, cluster: {server: \"" << server_->url() << "\"}}]\n"
                               << "contexts: [{name: test, context: {cluster: fake, user: op}}]\n"
                               << "users: [{name: op, user: {token: t0k3n}}]\n";
  }
  void TearDown() override { Stop(); }

  // Starts the operator with the chart's args, its HTTP port moved to a free loopback port.
  void StartOperator(std::vector<std::string> args) {
    auto port = PickLoopbackPort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    for (std::string& a : args) {
      if (a.rfind("--http-listen=", 0) == 0) a = absl::StrCat("--http-listen=127.0.0.1:", *port);
      if (a == "--log-json=true") a = "--log-json=false";
    }
    args.push_back("--kubeconfig=" + kubeconfig_);
    args.push_back("--log-level=warning");
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::setenv("POD_NAME", "orca-operator-rbac-0", 1);
      ::setenv("POD_NAMESPACE", "orca-system", 1);
      std::vector<char*> argv = {binary_.data()};
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary_.c_str(), argv.data());
      ::_exit(127);
    }
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    pid_ = -1;
  }

  std::string CrPath(const std::string& ns) {
    return "/apis/serving.orca.dev/v1alpha1/namespaces/" + ns + "/orcadeployments/demo";
  }
  json Cr(const std::string& ns) { return server_->Get(CrPath(ns)).value_or(json::object()); }
  std::string ConditionReason(const std::string& ns, const std::string& type) {
    for (const json& c : Cr(ns).value("status", json::object()).value("conditions", json::array())) {
      if (c["type"] == type) return c["reason"];
    }
    return "";
  }
  void Submit(const std::string& ns, OrcaDeploymentBuilder b) {
    json cr = b.Build();
    cr["metadata"]["namespace"] = ns;
    cr["metadata"].erase("generation");
    cr["metadata"]["uid"] = "uid-demo";
    server_->Upsert(cr);
  }
  // The workload controllers: every StatefulSet and Deployment in `ns` reports ready.
  void MakeReady(const std::string& ns) {
    for (const std::string kind : {"statefulsets", "deployments"}) {
      for (const json& o : server_->List("/apis/apps/v1/namespaces/" + ns + "/" + kind)) {
        const int n = o["spec"].value("replicas", 1);
        if (o.contains("status") && o["status"].value("readyReplicas", -1) == n) continue;
        server_->SetStatus(
            "/apis/apps/v1/namespaces/" + ns + "/" + kind + "/" + o["metadata"]["name"].get<std::string>(),
            {{"observedGeneration", o["metadata"]["generation"]},
             {"replicas", n},
             {"readyReplicas", n},
             {"availableReplicas", n},
             {"updatedReplicas", n}});
      }
    }
  }
  // Objects an operator of the old layout left (no revision groups): the upgrade prunes them.
  void SeedOldLayout(const std::string& ns) {
    const json owner = json::array(
        {{{"apiVersion", kApiVersion}, {"kind", kKind}, {"name", "demo"}, {"uid", "uid-demo"}, {"controller", true}}});
    const json labels = {{"app.kubernetes.io/managed-by", "orca-operator"}, {"serving.orca.dev/deployment", "demo"}};
    auto meta = [&](const std::string& name) {
      return json{{"name", name}, {"namespace", ns}, {"labels", labels}, {"ownerReferences", owner}};
    };
    server_->Upsert({{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", meta("demo-config")}});
    server_->Upsert(
        {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", meta("demo-r0-pipeline")}, {"spec", json::object()}});
    server_->Upsert({{"apiVersion", "apps/v1"},
                     {"kind", "Deployment"},
                     {"metadata", meta("demo-r0-scheduler")},
                     {"spec", {{"replicas", 1}}}});
    server_->Upsert({{"apiVersion", "apps/v1"},
                     {"kind", "StatefulSet"},
                     {"metadata", meta("demo-r0-pipeline")},
                     {"spec", {{"replicas", 2}}}});
  }

  // Reconciles the operator finished successfully (its /metrics), -1 when unreachable.
  int64_t Reconciles() {
    long code = 0;
    const std::string metrics = testing::HttpGet(port_, "/metrics", &code);
    const std::string key = "orca:operator_reconciles_total{result=\"ok\"} ";
    const size_t at = metrics.find(key);
    if (code != 200 || at == std::string::npos) return -1;
    return std::stoll(metrics.substr(at + key.size()));
  }
  // Waits until no reconcile has finished for a while (the work queue drained).
  void WaitUntilIdle() {
    int64_t last = Reconciles();
    for (int stable = 0; stable < 5;) {
      absl::SleepFor(absl::Milliseconds(100));
      const int64_t now = Reconciles();
      stable = now == last ? stable + 1 : 0;
      last = now;
    }
  }

  std::string binary_;
  std::string kubeconfig_;
  std::unique_ptr<FakeKubeApiServer> server_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST_P(OperatorRbacTest, AWholeLifeCycleMeetsNo403AndUsesEveryGrantedVerb) {
  const ChartMode mode = ReadChart(RenderChart(GetParam()));
  ASSERT_FALSE(mode.rules.empty());
  ASSERT_FALSE(mode.args.empty());
  std::string ns = "team-a";
  bool manages_monitors = true;
  for (const std::string& a : mode.args) {
    if (a == "--manage-service-monitors=false") manages_monitors = false;
  }
  const auto spec = [](int replicas, int max_bs, bool extras) {
    return OrcaDeploymentBuilder("demo")
        .Replicas(replicas)
        .Pipeline(2)
        .Set("/spec/scheduler/maxBatchSize", max_bs)
        .Set("/spec/monitoring/serviceMonitor/enabled", extras)
        .Set("/spec/networkPolicy/enabled", extras);
  };
  SeedOldLayout(ns);
  Submit(ns, spec(2, 16, true));
  server_->SetRbacRules(mode.rules);
  StartOperator(mode.args);

  // Created; the old layout pruned.
  ASSERT_TRUE(Eventually([&] { return Cr(ns).value("status", json::object()).value("observedGeneration", 0) == 1; }));
  EXPECT_TRUE(
      Eventually([&] { return !server_->Get("/apis/apps/v1/namespaces/team-a/deployments/demo-r0-scheduler"); }));
  EXPECT_EQ(ConditionReason(ns, "Degraded"), manages_monitors ? "AsExpected" : "ServiceMonitorsNotManaged");
  // Ready, then a config change rolled replica by replica until complete.
  ASSERT_TRUE(Eventually([&] {
    MakeReady(ns);
    return ConditionReason(ns, "Available") == "MinimumReplicasAvailable";
  }));
  Submit(ns, spec(2, 8, true));
  ASSERT_TRUE(Eventually([&] {
    MakeReady(ns);
    return Cr(ns)["status"].value("observedGeneration", 0) == 2 &&
           ConditionReason(ns, "Progressing") == "RolloutComplete";
  })) << Cr(ns).dump();
  // A status write that conflicts is re-read (get) and retried.
  server_->FailNext("PUT", "/status", 409);
  // Scale to zero without monitoring or policies: everything but the gateway and Services pruned.
  Submit(ns, spec(0, 8, false));
  ASSERT_TRUE(Eventually([&] {
    return Cr(ns)["status"].value("observedGeneration", 0) == 3 && ConditionReason(ns, "Available") == "ScaledToZero";
  })) << Cr(ns).dump();
  EXPECT_TRUE(server_->List("/apis/apps/v1/namespaces/team-a/statefulsets").empty());
  EXPECT_TRUE(server_->List("/apis/policy/v1/namespaces/team-a/poddisruptionbudgets").empty());
  EXPECT_EQ(ConditionReason(ns, "Degraded"), "AsExpected");
  // Foreground deletion: the operator must not re-create what the garbage collector deletes.
  Submit(ns, spec(2, 8, false));
  ASSERT_TRUE(Eventually([&] { return Cr(ns)["status"].value("observedGeneration", 0) == 4; }));
  WaitUntilIdle();
  const int64_t before = Reconciles();
  json deleting = Cr(ns);
  deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:10Z";
  deleting["metadata"]["finalizers"] = json::array({"foregroundDeletion"});
  server_->Upsert(deleting);
  // The operator has seen the deletion once it reconciled again (as a no-op).
  ASSERT_TRUE(Eventually([&] { return Reconciles() > before; }));
  const int64_t seen = Reconciles();
  for (const json& sts : server_->List("/apis/apps/v1/namespaces/team-a/statefulsets")) {
    server_->Remove("/apis/apps/v1/namespaces/team-a/statefulsets/" + sts["metadata"]["name"].get<std::string>());
  }
  // Each deletion event brings a reconcile; none may re-create anything.
  ASSERT_TRUE(Eventually([&] { return Reconciles() > seen; }));
  WaitUntilIdle();
  EXPECT_TRUE(server_->List("/apis/apps/v1/namespaces/team-a/statefulsets").empty()) << "re-created under deletion";
  Stop();

  EXPECT_THAT(server_->Denials(), ::testing::IsEmpty());
  // Least privilege: every granted verb was needed (the finalizers one is for admission only).
  std::set<std::string> unused;
  const std::set<std::string> used = server_->AllowedCalls();
  for (const std::string& g : mode.granted) {
    if (!used.count(g) && g != "update serving.orca.dev/orcadeployments/finalizers") unused.insert(g);
  }
  EXPECT_THAT(unused, ::testing::IsEmpty()) << "granted but never used";
}

INSTANTIATE_TEST_SUITE_P(ChartModes, OperatorRbacTest,
                         ::testing::Values("default.yaml", "namespaced.yaml", "no-servicemonitors.yaml",
                                           "dns-discovery.yaml"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// The enforcement is real: an operator that lists ServiceMonitors (the D2 bug) against the
// RBAC of a chart without them meets 403 and reports every OrcaDeployment Degraded.
TEST_F(OperatorRbacTest, ListingServiceMonitorsWithoutTheirRbacIsForbidden) {
  ChartMode mode = ReadChart(RenderChart("no-servicemonitors.yaml"));
  for (std::string& a : mode.args) {
    if (a == "--manage-service-monitors=false") a = "--manage-service-monitors=true";
  }
  Submit("team-a", OrcaDeploymentBuilder("demo"));
  server_->SetRbacRules(mode.rules);
  StartOperator(mode.args);
  ASSERT_TRUE(Eventually([&] { return ConditionReason("team-a", "Degraded") == "ApplyFailed"; }));
  EXPECT_THAT(server_->Denials(), ::testing::Contains("list monitoring.coreos.com/servicemonitors team-a"));
}

}  // namespace
}  // namespace orca::k8s
