#include "services/operator/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/mutex.h"
#include "tests/unit/operator/test_util.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using testing::ClientFor;
using testing::Eventually;
using testing::FakeKubeApiServer;

json Service(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", name}, {"namespace", "ns"}}}};
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = FakeKubeApiServer::Start();
    client_ = ClientFor(*server_);
    Informer::Options options;
    options.collection_path = "/api/v1/namespaces/ns/services";
    options.initial_backoff = absl::Milliseconds(10);
    informer_ = std::make_unique<Informer>(client_.get(), options, [this](const std::string& type, const json& o) {
      absl::MutexLock lock(&mu_);
      seen_.push_back(type + " " + o["metadata"]["name"].get<std::string>());
    });
  }
  void StartInformer() {
    thread_ = std::thread([this] { informer_->Run(&stop_); });
    ASSERT_TRUE(Eventually([&] { return informer_->HasSynced() && server_->OpenWatches() == 1; }));
  }
  void TearDown() override {
    stop_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> Seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  bool Saw(const std::string& what) {
    auto s = Seen();
    return std::find(s.begin(), s.end(), what) != s.end();
  }

  std::unique_ptr<FakeKubeApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<Informer> informer_;
  absl::Notification stop_;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
};

TEST_F(InformerTest, ListsThenWatchesIntoTheCache) {
  server_->Upsert(Service("a"));
  StartInformer();
  EXPECT_TRUE(informer_->Get("ns/a").has_value());
  server_->Upsert(Service("b"));
  ASSERT_TRUE(Eventually([&] { return informer_->Get("ns/b").has_value(); }));
  server_->Remove("/api/v1/namespaces/ns/services/a");
  ASSERT_TRUE(Eventually([&] { return !informer_->Get("ns/a").has_value(); }));
  EXPECT_THAT(Seen(), ::testing::ElementsAre("ADDED a", "ADDED b", "DELETED a"));
  EXPECT_EQ(informer_->list_count(), 1);
}

TEST_F(InformerTest, ResumesFromItsVersionWhenAWatchEnds) {
  StartInformer();
  server_->EndWatches();
  ASSERT_TRUE(Eventually([&] { return server_->CountRequests("GET", "/services") >= 3; }));  // list, watch, watch
  server_->Upsert(Service("c"));
  ASSERT_TRUE(Eventually([&] { return informer_->Get("ns/c").has_value(); }));
  EXPECT_EQ(informer_->list_count(), 1);  // no re-list needed
}

TEST_F(InformerTest, BookmarksAdvanceTheVersion) {
  StartInformer();
  server_->Upsert(
      json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "other"}, {"namespace", "ns"}}}});
  server_->SendBookmark();
  ASSERT_TRUE(Eventually([&] { return informer_->resource_version() == std::to_string(server_->resource_version()); }));
  EXPECT_TRUE(Seen().empty());
}

TEST_F(InformerTest, RelistsAfter410AndReportsWhatVanishedMeanwhile) {
  server_->Upsert(Service("a"));
  server_->Upsert(Service("b"));
  StartInformer();
  // While the watch is down (its reconnect held at the server), objects change and history
  // is compacted; the re-watch then gets 410, and the first re-list fails once.
  server_->HoldWatches(true);
  server_->FailNext("GET", "/services", 500, 1);
  server_->EndWatches();
  server_->Remove("/api/v1/namespaces/ns/services/a");
  server_->Upsert(Service("d"));
  server_->CompactHistory();
  server_->HoldWatches(false);
  ASSERT_TRUE(Eventually([&] { return informer_->list_count() >= 2 && informer_->Get("ns/d").has_value(); }));
  EXPECT_FALSE(informer_->Get("ns/a").has_value());
  EXPECT_TRUE(Saw("DELETED a"));
  EXPECT_TRUE(Saw("ADDED d"));
}

TEST_F(InformerTest, RetriesAListThatFails) {
  server_->FailNext("GET", "/services", 503, 2);
  server_->Upsert(Service("a"));
  StartInformer();
  EXPECT_TRUE(informer_->Get("ns/a").has_value());
  EXPECT_GE(server_->CountRequests("GET", "/services"), 3);
}

}  // namespace
}  // namespace orca::k8s
