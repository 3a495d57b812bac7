#pragma once
/// Posts core/v1 Events about an object, so `kubectl describe` shows what the
/// operator did and why. Failures to record are logged, never fatal.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "services/operator/kube_client.h"

namespace orca::k8s {

class EventRecorder {
 public:
  /// `component` is source.component/reportingComponent; `instance` this replica (pod name).
  EventRecorder(
      KubeClient* client, std::string component, std::string instance,
      std::function<absl::Time()> clock = [] { return absl::Now(); });

  /// Records an Event of `type` (Normal or Warning) on `object` (a full object with metadata).
  absl::Status Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
                      const std::string& message);

 private:
  KubeClient* client_;
  std::string component_;
  std::string instance_;
  std::function<absl::Time()> clock_;
};

}  // namespace orca::k8s
