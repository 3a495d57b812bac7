#include "core/sched/orca_policy.h"

namespace orca::sched {

std::vector<RequestId> OrcaPolicy::Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs) {
  std::vector<RequestId> batch;
  if (max_bs <= 0) return batch;
  // Slots this selection would add on top of budget.n_rsrv(); the Scheduler reserves them
  // when it commits the batch.
  int64_t new_reservations = 0;
  for (const auto& [id, request] : pool) {
    if (request->finished() || request->in_flight()) continue;
    if (request->state() == RequestState::kQueued) {
      if (!budget.Fits(new_reservations + request->reservation())) break;
      new_reservations += request->reservation();
    }
    batch.push_back(id);
    if (static_cast<int32_t>(batch.size()) == max_bs) break;
  }
  return batch;
}

}  // namespace orca::sched
