#include "services/operator/kube_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/unit/operator/fake_kube_api_server.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::ClientFor;
using testing::Eventually;
using testing::FakeKubeApiServer;
using ::testing::HasSubstr;

json ConfigMap(const std::string& name, const std::string& app = "orca") {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "ns"}, {"labels", {{"app", app}}}}},
          {"data", {{"k", "v"}}}};
}

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = FakeKubeApiServer::Start();
    ASSERT_NE(server_, nullptr);
    client_ = ClientFor(*server_);
    ASSERT_NE(client_, nullptr);
  }
  std::unique_ptr<FakeKubeApiServer> server_;
  std::unique_ptr<KubeClient> client_;
};

TEST(KubePathsTest, CoreGroupedNamespacedAndClusterWide) {
  EXPECT_EQ(ResourcePath("v1", "services", "ns", "x"), "/api/v1/namespaces/ns/services/x");
  EXPECT_EQ(ResourcePath("apps/v1", "statefulsets", ""), "/apis/apps/v1/statefulsets");
  EXPECT_EQ(ResourcePath("serving.orca.dev/v1alpha1", "orcadeployments", "a", "b", "status"),
            "/apis/serving.orca.dev/v1alpha1/namespaces/a/orcadeployments/b/status");
  EXPECT_EQ(*ObjectPath(ConfigMap("c")), "/api/v1/namespaces/ns/configmaps/c");
  EXPECT_FALSE(ObjectPath(json{{"kind", "Widget"}, {"metadata", {{"name", "x"}}}}).ok());
}

TEST_F(KubeClientTest, ApplyCreatesThenUpdatesAsFieldManager) {
  const std::string path = "/api/v1/namespaces/ns/configmaps/c";
  auto created = client_->Apply(path, ConfigMap("c"), "orca-operator");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["data"]["k"], "v");
  const std::string rv = (*created)["metadata"]["resourceVersion"];
  // Same object again: a no-op, the version does not move.
  auto same = client_->Apply(path, ConfigMap("c"), "orca-operator");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)["metadata"]["resourceVersion"], rv);
  json changed = ConfigMap("c");
  changed["data"]["k"] = "w";
  auto updated = client_->Apply(path, changed, "orca-operator");
  ASSERT_TRUE(updated.ok());
  EXPECT_NE((*updated)["metadata"]["resourceVersion"], rv);
  const auto requests = server_->Requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.back().method, "PATCH");
  EXPECT_EQ(requests.back().content_type, "application/apply-patch+yaml");
  EXPECT_THAT(requests.back().query, HasSubstr("fieldManager=orca-operator"));
  EXPECT_THAT(requests.back().query, HasSubstr("force=true"));
}

TEST_F(KubeClientTest, ErrorsCarryTheHttpCodeAndTheServersMessage) {
  auto missing = client_->Get("/api/v1/namespaces/ns/configmaps/nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(HttpCodeOf(missing.status()), 404);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("\"nope\" not found"));
  ASSERT_TRUE(client_->Create("/api/v1/namespaces/ns/configmaps", ConfigMap("a")).ok());
  auto again = client_->Create("/api/v1/namespaces/ns/configmaps", ConfigMap("a"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(HttpCodeOf(again.status()), 409);
  json stale = *client_->Get("/api/v1/namespaces/ns/configmaps/a");
  stale["metadata"]["resourceVersion"] = "1";
  auto conflict = client_->Replace("/api/v1/namespaces/ns/configmaps/a", stale);
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(HttpCodeOf(conflict.status()), 409);
  server_->FailNext("GET", "/configmaps/a", 500);
  EXPECT_EQ(client_->Get("/api/v1/namespaces/ns/configmaps/a").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpCodeOf(absl::OkStatus()), 0);
}

TEST_F(KubeClientTest, ConnectionFailureIsUnavailable) {
  KubeClient::Options options;
  options.config.server = "http://127.0.0.1:1";  // nothing listens on port 1
  auto client = KubeClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto r = (*client)->Get("/api/v1/namespaces");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpCodeOf(r.status()), 0);
  options.config.server = "ftp://x";
  EXPECT_FALSE(KubeClient::Create(options).ok());
}

TEST_F(KubeClientTest, ListFiltersByLabelSelectorAndSendsTheToken) {
  server_->Upsert(ConfigMap("a", "orca"));
  server_->Upsert(ConfigMap("b", "other"));
  auto list = client_->List("/api/v1/namespaces/ns/configmaps", {.label_selector = "app=orca"});
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ((*list)["items"][0]["metadata"]["name"], "a");
  EXPECT_EQ((*list)["metadata"]["resourceVersion"], std::to_string(server_->resource_version()));
  EXPECT_THAT(server_->Requests().back().query, HasSubstr("labelSelector=app%3Dorca"));
  EXPECT_EQ(server_->Requests().back().authorization, "Bearer test-token");
}

TEST_F(KubeClientTest, WatchStreamsEventsAfterTheResourceVersion) {
  server_->Upsert(ConfigMap("before"));
  const std::string rv = std::to_string(server_->resource_version());
  std::vector<std::string> seen;
  std::thread writer([&] {
    ASSERT_TRUE(Eventually([&] { return server_->OpenWatches() == 1; }));
    server_->Upsert(ConfigMap("one"));
    server_->Upsert(ConfigMap("two"));
    server_->Remove("/api/v1/namespaces/ns/configmaps/one");
  });
  absl::Status st =
      client_->Watch("/api/v1/namespaces/ns/configmaps", {.resource_version = rv}, [&](const WatchEvent& e) {
        seen.push_back(e.type + " " + e.object["metadata"]["name"].get<std::string>());
        return seen.size() < 3;
      });
  writer.join();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_THAT(seen, ::testing::ElementsAre("ADDED one", "ADDED two", "DELETED one"));
}

TEST_F(KubeClientTest, WatchFromACompactedVersionIsGone) {
  server_->Upsert(ConfigMap("a"));
  const std::string old_rv = "101";
  server_->CompactHistory();
  absl::Status st = client_->Watch("/api/v1/namespaces/ns/configmaps", {.resource_version = old_rv},
                                   [](const WatchEvent&) { return true; });
  EXPECT_EQ(HttpCodeOf(st), 410);
  EXPECT_THAT(std::string(st.message()), HasSubstr("too old resource version"));
}

TEST_F(KubeClientTest, WatchEndsWhenTheServerEndsItAndOnCancel) {
  std::thread ender([&] {
    ASSERT_TRUE(Eventually([&] { return server_->OpenWatches() == 1; }));
    server_->EndWatches();
  });
  EXPECT_TRUE(client_->Watch("/api/v1/namespaces/ns/configmaps", {}, [](const WatchEvent&) { return true; }).ok());
  ender.join();
  absl::Notification cancel;
  std::thread canceller([&] {
    ASSERT_TRUE(Eventually([&] { return server_->OpenWatches() == 1; }));
    cancel.Notify();
  });
  absl::Status st = client_->Watch(
      "/api/v1/namespaces/ns/configmaps", {}, [](const WatchEvent&) { return true; }, &cancel);
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(st)) << st;
}

TEST_F(KubeClientTest, DeleteAndStatusSubresource) {
  json cr = {{"apiVersion", "serving.orca.dev/v1alpha1"},
             {"kind", "OrcaDeployment"},
             {"metadata", {{"name", "x"}, {"namespace", "ns"}}},
             {"spec", {{"replicas", 1}}}};
  json stored = server_->Upsert(cr);
  stored["status"] = {{"readyReplicas", 1}};
  stored["spec"]["replicas"] = 5;  // ignored by /status
  const std::string path = "/apis/serving.orca.dev/v1alpha1/namespaces/ns/orcadeployments/x";
  auto written = client_->Replace(path + "/status", stored);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ((*written)["status"]["readyReplicas"], 1);
  EXPECT_EQ((*written)["spec"]["replicas"], 1);
  EXPECT_TRUE(client_->Delete(path).ok());
  EXPECT_EQ(HttpCodeOf(client_->Delete(path)), 404);
}

}  // namespace
}  // namespace orca::k8s
