#pragma once
/// Helpers shared by the operator tests that talk to FakeKubeApiServer.

#include <curl/curl.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/operator/kube_client.h"
#include "tests/unit/operator/fake_kube_api_server.h"

namespace orca::k8s::testing {

/// A client for `server` (plain HTTP on loopback).
inline std::unique_ptr<KubeClient> ClientFor(const FakeKubeApiServer& server) {
  KubeClient::Options options;
  options.config.server = server.url();
  options.config.token = "test-token";
  options.request_timeout_seconds = 10;
  auto client = KubeClient::Create(options);
  return client.ok() ? *std::move(client) : nullptr;
}

/// Polls `condition` until it holds or `limit` passes (a bound against hangs,
/// not a timing assertion: the tests only check the final state).
inline bool Eventually(const std::function<bool()>& condition, absl::Duration limit = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

/// GET http://127.0.0.1:`port``path`; the body, and the HTTP code in `code` (0 when unreachable).
inline std::string HttpGet(int port, const std::string& path, long* code) {
  std::string body;
  CURL* curl = curl_easy_init();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(d, s * n);
        return s * n;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  *code = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
  curl_easy_cleanup(curl);
  return body;
}

}  // namespace orca::k8s::testing
