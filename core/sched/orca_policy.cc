#include "core/sched/orca_policy.h"

#include "core/common/logging.h"

namespace orca::sched {

Selection OrcaPolicy::Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) {
  ORCA_CHECK(!kv.paged()) << "OrcaPolicy needs reserved KV";
  Selection selection;
  for (RequestId id : Select(pool, kv.slot_budget(), max_bs)) {
    const Request* request = pool.Find(id);
    if (request->state() == RequestState::kQueued) {
      ORCA_CHECK(kv.TryAdmit(*request, 0)) << "request " << id << " selected beyond n_slots";
    }
    selection.batch.push_back(BatchEntry{id, 0});
  }
  return selection;
}

std::vector<RequestId> OrcaPolicy::Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs) {
  std::vector<RequestId> batch;
  if (max_bs <= 0) return batch;
  // Slots this selection would add on top of budget.n_rsrv(); the KvManager overload above
  // reserves them.
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
