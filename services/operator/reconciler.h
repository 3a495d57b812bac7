#pragma once
/// Reconciles one OrcaDeployment, linearly and idempotently:
///
///   deletionTimestamp set ──▶ nothing (the garbage collector is deleting the children;
///        │                     re-applying them would fight it under foreground deletion)
///   parse + validate spec ──invalid──▶ status Degraded/InvalidSpec + Warning Event (children untouched)
///        │ valid
///   no spec.scheduler.apiKeys ──▶ create Secret/NAME-internal-token with a random token
///        │                         (409 AlreadyExists: it is there, untouched; never read or updated)
///   list owned objects (label selector + owner uid) ──▶ observe the engine groups
///        ──▶ plan the rollout (rollout_planner.h: which groups to apply, keep, remove)
///        ──▶ render the desired objects (pure) ──▶ server-side apply each (field manager, force)
///        ──▶ delete owned objects neither desired nor kept
///        ──▶ status from the applied and kept workloads ──▶ PUT /status (retry on 409)
///        ──▶ Events for every condition that changed
///
/// Each pass moves the rollout one step; the controller runs it again when a
/// workload's status changes (a group became ready), so the next replica is
/// replaced only after the previous one serves.
///
/// No finalizer: every child lives in the OrcaDeployment's namespace and carries
/// a controller owner reference, so the garbage collector removes them (the
/// internal token's Secret too).
///
/// The internal token's Secret is created, never applied: applying it again
/// would draw a new token under pods that read the old one. Creating needs
/// only the `create` verb on Secrets, so the operator can read no Secret.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "services/common/internal_token.h"
#include "services/operator/event_recorder.h"
#include "services/operator/kube_client.h"
#include "services/operator/operator_metrics.h"
#include "services/operator/renderer.h"

namespace orca::k8s {

class Reconciler {
 public:
  struct Options {
    std::string field_manager = "orca-operator";
    /// Also says whether ServiceMonitors are managed (render.service_monitors): when
    /// not, they are never rendered, listed or deleted (the RBAC may not allow it).
    RenderOptions render;
    /// Attempts of the status write when it meets 409 Conflict.
    int max_status_attempts = 4;
    /// Counts invalid specs when set (not owned).
    OperatorMetrics* metrics = nullptr;
    /// Draws the token of a new NAME-internal-token Secret (tests may fix it).
    std::function<absl::StatusOr<std::string>()> draw_token = services::GenerateInternalToken;
  };

  /// `events` may be null (no Events).
  Reconciler(KubeClient* client, EventRecorder* events, Options options);

  /// Reconciles `object` (the OrcaDeployment as last seen). OK also for an
  /// invalid spec (reported in status; retrying would not help) and for an
  /// object being deleted; an error asks the caller to retry later.
  absl::Status Reconcile(const nlohmann::json& object);

 private:
  // Every object of the managed kinds labelled for `owner` (kind and apiVersion filled in).
  absl::StatusOr<std::vector<nlohmann::json>> ListOwned(const nlohmann::json& owner);
  // Creates the internal token's Secret unless it exists (or the spec names its own); "" or what failed.
  std::string EnsureInternalTokenSecret(const nlohmann::json& owner, const OrcaDeployment& d);
  // Applies every object; returns the API server's answers and a summary of failures ("" = none).
  std::vector<nlohmann::json> ApplyAll(const std::vector<nlohmann::json>& desired, std::string* failures);
  // Deletes the objects of `live` owned by `owner` that are neither in `desired` nor in `kept`.
  absl::Status Prune(const nlohmann::json& owner, const std::vector<nlohmann::json>& live,
                     const std::vector<nlohmann::json>& desired, const std::vector<nlohmann::json>& kept);
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
