#include "services/operator/operator_admin_server.h"

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/operator/operator_metrics.h"

namespace orca::k8s {
namespace {

using ::testing::HasSubstr;

struct HttpResult {
  long code = 0;
  std::string body;
};

HttpResult HttpGet(int port, const std::string& path) {
  HttpResult result;
  CURL* curl = curl_easy_init();
  const std::string url = absl::StrCat("http://127.0.0.1:", port, path);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(d, s * n);
        return s * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.code);
  curl_easy_cleanup(curl);
  return result;
}

TEST(OperatorAdminServerTest, ServesHealthReadinessAndMetrics) {
  auto metrics = *OperatorMetrics::Create();
  for (int i = 0; i < 3; ++i) metrics->RecordReconcile(true, absl::Milliseconds(20));
  metrics->SetLeader(true);
  std::atomic<bool> ready{false};
  OperatorAdminServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.readiness = [&]() -> absl::Status {
    return ready ? absl::OkStatus() : absl::UnavailableError("informers have not synced yet");
  };
  options.metrics = [&] { return metrics->Render(); };
  auto server = OperatorAdminServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(HttpGet(port, "/healthz").code, 200);
  HttpResult not_ready = HttpGet(port, "/readyz");
  EXPECT_EQ(not_ready.code, 503);
  EXPECT_THAT(not_ready.body, HasSubstr("informers have not synced yet"));
  ready = true;
  EXPECT_EQ(HttpGet(port, "/readyz").code, 200);
  HttpResult page = HttpGet(port, "/metrics");
  EXPECT_EQ(page.code, 200);
  EXPECT_THAT(page.body, HasSubstr("orca:operator_reconciles_total{result=\"ok\"} 3\n"));
  EXPECT_THAT(page.body, HasSubstr("orca:operator_is_leader 1\n"));
  EXPECT_THAT(page.body, HasSubstr("orca:operator_reconcile_duration_seconds_bucket{le=\"0.025\"} 3\n"));
  EXPECT_EQ(HttpGet(port, "/nope").code, 404);
  (*server)->Stop();
  EXPECT_EQ(HttpGet(port, "/healthz").code, 0);  // closed
}

TEST(OperatorAdminServerTest, RejectsBadAddresses) {
  EXPECT_EQ(OperatorAdminServer::Start({.listen_address = "localhost"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OperatorAdminServer::Start({.listen_address = "127.0.0.1:99999"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OperatorAdminServer::Start({.listen_address = "not-an-ip:80"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orca::k8s
