#pragma once
/// Which engine-replica groups the operator keeps, creates and removes on the
/// way to a new revision: LeaderWorkerSet-style group updates, as a pure
/// function of what exists (table- and property-tested, no I/O).
///
/// A group is one engine replica at one revision: a scheduler StatefulSet, a
/// pipeline StatefulSet and the immutable ConfigMap both mount, every name
/// carrying the revision (renderer.h). A revision is never edited in place, so
/// a pipeline is never half old, half new: an update replaces whole groups.
///
///   replica r, desired revision R:
///
///     no group ───────────────────────────────▶ create R          (scale out)
///     group R (ready or not) ─────────────────▶ keep applying R; older groups of r
///                                                go once R is ready (surge) or at once
///     older groups that are not ready ────────▶ removed now (they serve nothing); of several
///                                                ready older groups one is kept, the rest removed
///     only older groups, none ready ──────────▶ replace by R now  (costs no capacity)
///     only older groups, one ready ───────────▶ wait for its turn:
///        turn = a surge slot (old kept until R is ready), else an unavailability
///        slot (old removed, R created); slots: maxSurge replicas with two groups,
///        maxUnavailable replicas without a ready group, lowest replica first
///     replica >= spec.replicas ───────────────▶ remove every group (scale in)
///
/// So with the defaults (maxUnavailable 1, maxSurge 0) a config change takes
/// down one replica at a time and starts the next only when every replica is
/// ready again; a broken new revision stops the rollout after one replica.

#include <cstdint>
#include <string>
#include <vector>

namespace orca::k8s {

/// One group found in the cluster.
struct GroupObservation {
  int32_t replica = 0;
  std::string revision;
  /// The scheduler and every stage are ready, as their StatefulSets report.
  bool ready = false;
};

struct RolloutLimits {
  /// Replicas that may be without a ready group because of the update (LWS maxUnavailable).
  int32_t max_unavailable = 1;
  /// Replicas that may run an extra group while its replacement starts (LWS maxSurge).
  int32_t max_surge = 0;
};

/// A group identified by replica and revision.
struct GroupKey {
  int32_t replica = 0;
  std::string revision;
  bool operator==(const GroupKey& other) const { return replica == other.replica && revision == other.revision; }
  bool operator<(const GroupKey& other) const {
    return replica != other.replica ? replica < other.replica : revision < other.revision;
  }
};

struct RolloutPlan {
  /// The desired revision.
  std::string revision;
  /// Replicas whose group at `revision` is rendered and applied (created when missing).
  std::vector<int32_t> apply;
  /// Older groups left exactly as they are (neither applied nor removed), ascending.
  std::vector<GroupKey> keep;
  /// Groups to delete, ascending.
  std::vector<GroupKey> remove;
  /// Every replica runs a ready group at `revision` and nothing else exists.
  bool complete = false;
};

/// Plans one step of the rollout to `revision` for `replicas` engine replicas.
/// `live` may list several groups per replica and replicas >= `replicas`.
/// Limits below 0 count as 0; when both are 0 the update still proceeds one
/// replica at a time (as maxUnavailable 1), since it could never finish otherwise.
RolloutPlan PlanRollout(int32_t replicas, const std::string& revision, const std::vector<GroupObservation>& live,
                        RolloutLimits limits);

}  // namespace orca::k8s
