#pragma once
/// Reconciles one OrcaDeployment, linearly and idempotently:
///
///   parse + validate spec ──invalid──▶ status Degraded/InvalidSpec + Warning Event (children untouched)
///        │ valid
///   render desired objects (pure) ──▶ server-side apply each (field manager, force)
///        ──▶ prune owned objects no longer desired (label selector + owner uid)
///        ──▶ status from the applied workloads' status ──▶ PUT /status (retry on 409)
///        ──▶ Events for every condition that changed
///
/// No finalizer: every child lives in the OrcaDeployment's namespace and carries
/// a controller owner reference, so the garbage collector removes them.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "services/operator/event_recorder.h"
#include "services/operator/kube_client.h"
#include "services/operator/operator_metrics.h"
#include "services/operator/renderer.h"

namespace orca::k8s {

class Reconciler {
 public:
  struct Options {
    std::string field_manager = "orca-operator";
    RenderOptions render;
    /// Attempts of the status write when it meets 409 Conflict.
    int max_status_attempts = 4;
    /// Counts invalid specs when set (not owned).
    OperatorMetrics* metrics = nullptr;
  };

  /// `events` may be null (no Events).
  Reconciler(KubeClient* client, EventRecorder* events, Options options);

  /// Reconciles `object` (the OrcaDeployment as last seen). OK also for an
  /// invalid spec (reported in status; retrying would not help); an error
  /// asks the caller to retry later.
  absl::Status Reconcile(const nlohmann::json& object);

 private:
  // Applies every object; returns the API server's answers and a summary of failures ("" = none).
  std::vector<nlohmann::json> ApplyAll(const std::vector<nlohmann::json>& desired, std::string* failures);
  // Deletes owned objects of `uid` in `ns` selected by `selector` that are not in `desired`.
  absl::Status Prune(const nlohmann::json& owner, const std::vector<nlohmann::json>& desired);
  // Writes the status computed by `compute` from the previous one; re-reads and retries on conflict.
  absl::Status WriteStatus(nlohmann::json object,
                           const std::function<nlohmann::json(const nlohmann::json& previous)>& compute);
  void Event(const nlohmann::json& object, const std::string& type, const std::string& reason,
             const std::string& message);

  KubeClient* client_;
  EventRecorder* events_;
  Options options_;
};

}  // namespace orca::k8s
