#include "core/sched/request_level_policy.h"

#include <algorithm>

namespace orca::sched {

std::vector<RequestId> RequestLevelPolicy::RunnableMembers(const RequestPool& pool,
                                                           const StaticBatch& batch) {
  std::vector<RequestId> runnable;
  for (RequestId id : batch.members) {
    const Request* request = pool.Find(id);
    if (request == nullptr || request->finished()) continue;
    if (request->in_flight()) return {};
    runnable.push_back(id);
  }
  return runnable;
}

std::vector<RequestId> RequestLevelPolicy::FormBatch(const RequestPool& pool,
                                                     const KvSlotBudget& budget, int32_t max_bs) {
  std::vector<RequestId> members;
  int64_t new_reservations = 0;
  for (const auto& [id, request] : pool) {
    if (request->state() != RequestState::kQueued) continue;
    if (!budget.Fits(new_reservations + request->reservation())) break;
    new_reservations += request->reservation();
    members.push_back(id);
    if (static_cast<int32_t>(members.size()) == max_bs) break;
  }
  return members;
}

std::vector<RequestId> RequestLevelPolicy::Select(const RequestPool& pool,
                                                  const KvSlotBudget& budget, int32_t max_bs) {
  if (max_bs <= 0) return {};
  // A batch already running goes first: it is not in flight, so it runs its next iteration.
  for (const StaticBatch& batch : batches_) {
    std::vector<RequestId> runnable = RunnableMembers(pool, batch);
    if (!runnable.empty()) return runnable;
  }
  // Every active batch is in flight: this pipeline slot starts a new batch.
  std::vector<RequestId> members = FormBatch(pool, budget, max_bs);
  if (members.empty()) return {};
  StaticBatch batch;
  batch.members = members;
  batch.num_unfinished = static_cast<int32_t>(members.size());
  batches_.push_back(std::move(batch));
  return members;
}

std::vector<RequestId> RequestLevelPolicy::OnRequestFinished(const Request& request) {
  const RequestId id = request.id();
  auto it = std::find_if(batches_.begin(), batches_.end(), [id](const StaticBatch& batch) {
    return std::find(batch.members.begin(), batch.members.end(), id) != batch.members.end();
  });
  // Not part of a batch (cancelled while queued): visible at once.
  if (it == batches_.end()) return {id};

  std::vector<RequestId> visible;
  const RequestState state = request.state();
  if (state == RequestState::kFinishedStop || state == RequestState::kFinishedLength) {
    it->held.push_back(id);
  } else {
    visible.push_back(id);
  }
  if (--it->num_unfinished == 0) {
    visible.insert(visible.end(), it->held.begin(), it->held.end());
    batches_.erase(it);
  }
  return visible;
}

}  // namespace orca::sched
