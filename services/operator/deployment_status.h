#pragma once
/// The status an OrcaDeployment reports: pure functions from what the
/// reconciler observed to the status object and its conditions.
///
/// Conditions (each with observedGeneration; lastTransitionTime changes only
/// when the condition's status changes):
///   Available    True when at least one engine replica is ready (scheduler and
///                every stage) and, if the gateway has replicas, one gateway pod is.
///   Progressing  True while the children have not all caught up with the spec
///                (pods starting, rolling, scaling); False once they have.
///   Degraded     True when the spec is invalid (InvalidSpec) or objects could not
///                be applied (ApplyFailed); the message says which and why.

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "services/operator/orca_deployment_spec.h"

namespace orca::k8s {

/// What the children looked like after apply (from the API server's answers).
struct ChildObservation {
  struct Replica {
    int32_t stages = 0;        // desired pipeline pods
    int32_t ready_stages = 0;  // StatefulSet status.readyReplicas
    bool scheduler_ready = false;
    bool current = false;  // both workloads have observed their latest spec and are updated
    bool Ready() const { return scheduler_ready && ready_stages >= stages && stages > 0; }
  };
  std::vector<Replica> replicas;
  int32_t gateway_desired = 0;
  int32_t gateway_available = 0;
  bool gateway_current = false;
};

/// Reads the applied StatefulSets and Deployments of `d` (the objects the
/// API server returned from apply, or read back) into a ChildObservation.
/// Objects not among `objects` count as not ready.
ChildObservation ObserveChildren(const OrcaDeployment& d, const std::vector<nlohmann::json>& objects);

/// How the reconcile went.
struct ReconcileResult {
  enum class Kind { kApplied, kInvalidSpec, kApplyFailed };
  Kind kind = Kind::kApplied;
  std::string message;  // the spec error or the apply error
};

/// One condition change, for Events.
struct ConditionChange {
  std::string type;
  std::string previous_status;  // "" when the condition is new
  std::string status;
  std::string reason;
  std::string message;
};

/// Builds the new status. `d` is null when the spec is invalid; `generation`
/// is metadata.generation; `previous` is the current status (may be null/{});
/// `now` is an RFC 3339 timestamp used for changed conditions only.
nlohmann::json ComputeStatus(const OrcaDeployment* d, int64_t generation, const ReconcileResult& result,
                             const ChildObservation& observed, const nlohmann::json& previous, const std::string& now);

/// Conditions whose status differs between `previous` and `next` status objects.
std::vector<ConditionChange> ConditionChanges(const nlohmann::json& previous, const nlohmann::json& next);

/// Sets condition `type` in `conditions` (an array), keeping lastTransitionTime
/// when the status is unchanged.
void SetCondition(nlohmann::json& conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, int64_t generation, const std::string& now);

/// Current UTC time as RFC 3339 with seconds ("2024-05-01T12:00:00Z").
std::string NowRfc3339();

}  // namespace orca::k8s
