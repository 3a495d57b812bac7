#include "core/sched/orca_policy.h"

#include "core/common/logging.h"

namespace orca::sched {
namespace {

// Algorithm 1 over `pool`. With `kv`, groups of sequences sharing one prompt (KvManager):
// a group's leader reserves the whole group's slots, and its members, whose KV that
// reserves, are skipped until the leader has computed the prompt blocks they share.
std::vector<RequestId> SelectIds(const RequestPool& pool, const KvSlotBudget& budget, const KvManager* kv,
                                 int32_t max_bs) {
  std::vector<RequestId> batch;
  if (max_bs <= 0) return batch;
  // Slots (and local blocks) this selection would add on top of budget.n_rsrv(); the
  // KvManager overload reserves them.
  int64_t new_reservations = 0;
  int64_t new_local_blocks = 0;
  for (const auto& [id, request] : pool) {
    if (request->finished() || request->in_flight()) continue;
    if (request->state() == RequestState::kQueued) {
      if (kv != nullptr && kv->WaitsForSharedPrompt(*request)) continue;
      const int64_t slots = kv != nullptr ? kv->SlotsToAdmit(*request) : request->kv_reservation_slots();
      if (!budget.Fits(new_reservations + slots)) break;
      // The sliding-window layers' pool, when the workers keep one: the same check there.
      const int64_t local = kv != nullptr ? kv->LocalBlocksToAdmit(*request, 0) : 0;
      if (local > 0 && new_local_blocks + local > kv->num_free_local_blocks()) break;
      new_reservations += slots;
      new_local_blocks += local;
    }
    batch.push_back(id);
    if (static_cast<int32_t>(batch.size()) == max_bs) break;
  }
  return batch;
}

}  // namespace

Selection OrcaPolicy::Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) {
  ORCA_CHECK(!kv.paged()) << "OrcaPolicy needs reserved KV";
  Selection selection;
  for (RequestId id : SelectIds(pool, kv.slot_budget(), &kv, max_bs)) {
    const Request* request = pool.Find(id);
    if (request->state() == RequestState::kQueued) {
      ORCA_CHECK(kv.TryAdmit(*request, 0)) << "request " << id << " selected beyond n_slots";
    }
    selection.batch.push_back(BatchEntry{id, 0});
  }
  return selection;
}

std::vector<RequestId> OrcaPolicy::Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs) {
  return SelectIds(pool, budget, nullptr, max_bs);
}

}  // namespace orca::sched
