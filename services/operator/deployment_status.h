#pragma once
/// The status an OrcaDeployment reports: pure functions from what the
/// reconciler observed to the status object and its conditions.
///
/// Counts are observed, never copied from the spec: `replicas` are engine
/// replicas whose pods exist, `updatedReplicas` those running a group at the
/// desired `revision`, `readyReplicas` those with a ready group.
///
/// Conditions (each with observedGeneration; lastTransitionTime changes only
/// when the condition's status changes):
///   Available    True when at least one engine replica is ready (scheduler and
///                every stage) and, if the gateway has replicas, one gateway pod is.
///   Progressing  True while the children have not all caught up with the spec
///                (groups starting, replaced, scaled); False once they have.
///   Degraded     True when the spec is invalid (InvalidSpec), objects could not be
///                applied (ApplyFailed) or the spec asks for a ServiceMonitor this
///                operator may not create (ServiceMonitorsNotManaged).

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "services/operator/orca_deployment_spec.h"
#include "services/operator/rollout_planner.h"

namespace orca::k8s {

/// What the children looked like (from the API server's answers to apply, or a list).
struct ChildObservation {
  /// One engine replica's group at one revision (its two StatefulSets).
  struct Group {
    int32_t replica = 0;
    std::string revision;
    int32_t stages = 0;             // pipeline StatefulSet spec.replicas
    int32_t created_stages = 0;     // its status.replicas: pods that exist
    int32_t ready_stages = 0;       // its status.readyReplicas
    bool scheduler_exists = false;  // scheduler StatefulSet status.replicas >= 1
    bool scheduler_ready = false;   // its status.readyReplicas >= 1
    bool Ready() const { return scheduler_ready && stages > 0 && ready_stages >= stages; }
    bool Exists() const { return scheduler_exists && created_stages > 0; }
  };
  /// Every group found, ordered by replica then revision.
  std::vector<Group> groups;
  int32_t gateway_desired = 0;
  int32_t gateway_available = 0;
  bool gateway_current = false;
};

/// Reads the StatefulSets and Deployments of `d` among `objects` (applied or
/// listed; other kinds and other deployments' objects are ignored). Group
/// StatefulSets are recognized by their component, replica and revision labels.
ChildObservation ObserveChildren(const OrcaDeployment& d, const std::vector<nlohmann::json>& objects);

/// The groups as the rollout planner sees them.
std::vector<GroupObservation> GroupsForPlanning(const ChildObservation& observed);

/// How the reconcile went.
struct ReconcileResult {
  enum class Kind { kApplied, kInvalidSpec, kApplyFailed, kServiceMonitorsNotManaged };
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
/// is metadata.generation; `revision` the desired engine revision; `previous`
/// is the current status (may be null/{}); `now` is an RFC 3339 timestamp used
/// for changed conditions only.
nlohmann::json ComputeStatus(const OrcaDeployment* d, int64_t generation, const ReconcileResult& result,
                             const ChildObservation& observed, const std::string& revision,
                             const nlohmann::json& previous, const std::string& now);

/// Conditions whose status differs between `previous` and `next` status objects.
std::vector<ConditionChange> ConditionChanges(const nlohmann::json& previous, const nlohmann::json& next);

/// Sets condition `type` in `conditions` (an array), keeping lastTransitionTime
/// when the status is unchanged.
void SetCondition(nlohmann::json& conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, int64_t generation, const std::string& now);

/// Current UTC time as RFC 3339 with seconds ("2024-05-01T12:00:00Z").
std::string NowRfc3339();

}  // namespace orca::k8s
