#pragma once
/// Helpers shared by the operator tests that talk to FakeKubeApiServer.

#include <functional>
#include <memory>

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

}  // namespace orca::k8s::testing
