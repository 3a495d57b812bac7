#include "core/sched/request_level_policy.h"

#include <algorithm>

#include "core/common/logging.h"

namespace orca::sched {

Selection RequestLevelPolicy::Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) {
  ORCA_CHECK(!kv.paged()) << "RequestLevelPolicy needs reserved KV";
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

RequestLevelPolicy::RequestLevelPolicy(int32_t num_microbatches) : num_microbatches_(std::max(1, num_microbatches)) {}

std::vector<RequestId> RequestLevelPolicy::RunnableMembers(const RequestPool& pool,
                                                           const std::vector<RequestId>& microbatch) {
  std::vector<RequestId> runnable;
  for (RequestId id : microbatch) {
    const Request* request = pool.Find(id);
    if (request == nullptr || request->finished()) continue;
    if (request->in_flight()) return {};
    runnable.push_back(id);
  }
  return runnable;
}

std::vector<RequestId> RequestLevelPolicy::FormBatch(const RequestPool& pool, const KvSlotBudget& budget,
                                                     int32_t max_bs) {
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

std::vector<RequestId> RequestLevelPolicy::Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs) {
  if (max_bs <= 0) return {};
  if (batch_.has_value()) {
    // The running batch owns the engine: its next microbatch whose iteration returned goes.
    for (const std::vector<RequestId>& microbatch : batch_->microbatches) {
      std::vector<RequestId> runnable = RunnableMembers(pool, microbatch);
      if (!runnable.empty()) return runnable;
    }
    return {};
  }
  const std::vector<RequestId> members = FormBatch(pool, budget, max_bs);
  if (members.empty()) return {};
  // Contiguous microbatches of near-equal size, as FasterTransformer splits a batch.
  StaticBatch batch;
  const size_t parts = std::min<size_t>(num_microbatches_, members.size());
  for (size_t i = 0; i < parts; ++i) {
    const size_t begin = members.size() * i / parts;
    const size_t end = members.size() * (i + 1) / parts;
    batch.microbatches.emplace_back(members.begin() + begin, members.begin() + end);
  }
  batch.num_unfinished = static_cast<int32_t>(members.size());
  batch_ = std::move(batch);
  return batch_->microbatches.front();
}

bool RequestLevelPolicy::Contains(RequestId id) const {
  if (!batch_.has_value()) return false;
  for (const std::vector<RequestId>& microbatch : batch_->microbatches) {
    if (std::find(microbatch.begin(), microbatch.end(), id) != microbatch.end()) return true;
  }
  return false;
}

std::vector<RequestId> RequestLevelPolicy::OnRequestFinished(const Request& request) {
  const RequestId id = request.id();
  // Not part of the batch (cancelled while queued): visible at once.
  if (!Contains(id)) return {id};

  std::vector<RequestId> visible;
  const RequestState state = request.state();
  if (state == RequestState::kFinishedStop || state == RequestState::kFinishedLength) {
    batch_->held.push_back(id);
  } else {
    visible.push_back(id);
  }
  if (--batch_->num_unfinished == 0) {
    visible.insert(visible.end(), batch_->held.begin(), batch_->held.end());
    batch_.reset();
  }
  return visible;
}

}  // namespace orca::sched
