#include "services/operator/rollout_planner.h"

#include <algorithm>
#include <map>

namespace orca::k8s {

RolloutPlan PlanRollout(int32_t replicas, const std::string& revision, const std::vector<GroupObservation>& live,
                        RolloutLimits limits) {
  const int32_t max_surge = std::max(0, limits.max_surge);
  int32_t max_unavailable = std::max(0, limits.max_unavailable);
  if (max_surge == 0 && max_unavailable == 0) max_unavailable = 1;

  std::map<int32_t, std::vector<GroupObservation>> by_replica;
  for (const GroupObservation& g : live) by_replica[g.replica].push_back(g);

  RolloutPlan plan;
  plan.revision = revision;
  // Replicas in [0, replicas) without any ready group: they already count as unavailable.
  int32_t unavailable = 0;
  // Replicas running two groups (an old one kept while the new one starts).
  int32_t surging = 0;

  struct Waiting {
    int32_t replica;
    std::string serving;  // the one ready older group kept until the replica's turn
  };
  std::vector<Waiting> waiting;
  bool complete = true;

  for (int32_t r = 0; r < replicas; ++r) {
    const std::vector<GroupObservation>& groups = by_replica[r];
    const GroupObservation* current = nullptr;
    std::vector<std::string> old_ready, old_not_ready;
    for (const GroupObservation& g : groups) {
      if (g.revision == revision) {
        current = &g;
      } else {
        (g.ready ? old_ready : old_not_ready).push_back(g.revision);
      }
    }
    // Older groups that serve nothing go at once; of several that serve, one is enough.
    for (const std::string& rev : old_not_ready) plan.remove.push_back({r, rev});
    for (size_t i = 1; i < old_ready.size(); ++i) plan.remove.push_back({r, old_ready[i]});
    const bool current_ready = current != nullptr && current->ready;
    if (!current_ready && old_ready.empty()) ++unavailable;
    if (current != nullptr) {
      plan.apply.push_back(r);
      complete = complete && current_ready && groups.size() == 1;
      if (old_ready.empty()) continue;
      if (current_ready) {
        plan.remove.push_back({r, old_ready[0]});
      } else {
        plan.keep.push_back({r, old_ready[0]});  // a surge in progress: serves until the new group is ready
        ++surging;
      }
      continue;
    }
    complete = false;
    if (old_ready.empty()) {
      plan.apply.push_back(r);  // scale out, or replace groups that serve nothing anyway
      continue;
    }
    waiting.push_back({r, old_ready[0]});
  }

  for (const Waiting& w : waiting) {
    if (surging < max_surge) {
      // Start the new group next to the old one, which serves until the new one is ready.
      ++surging;
      plan.apply.push_back(w.replica);
      plan.keep.push_back({w.replica, w.serving});
    } else if (unavailable < max_unavailable) {
      ++unavailable;
      plan.apply.push_back(w.replica);
      plan.remove.push_back({w.replica, w.serving});
    } else {
      plan.keep.push_back({w.replica, w.serving});
    }
  }

  for (const auto& [r, groups] : by_replica) {
    if (r < replicas) continue;
    complete = false;
    for (const GroupObservation& g : groups) plan.remove.push_back({r, g.revision});
  }
  std::sort(plan.apply.begin(), plan.apply.end());
  std::sort(plan.keep.begin(), plan.keep.end());
  std::sort(plan.remove.begin(), plan.remove.end());
  plan.complete = complete;
  return plan;
}

}  // namespace orca::k8s
