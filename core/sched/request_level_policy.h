#pragma once
/// Request-level (static) batching: the baseline every benchmark compares against.

#include <cstdint>
#include <vector>

#include "core/sched/scheduling_policy.h"

namespace orca::sched {

/// The paper's FasterTransformer setup (§6.2) on Orca's engine: take up to `max_bs` QUEUED
/// requests in arrival order (same FCFS slot check as Algorithm 1, stopping at the first
/// that does not fit) as one batch, and run that batch iteration after iteration until ALL
/// of its members finish. Nobody joins a running batch, and nobody leaves it: a member that
/// finishes early stops computing (the selective-batching engine needs no padding) but its
/// completion is delivered only when the batch ends, like a static-batching server that
/// returns the batch as a whole. Tokens still stream as they are produced; slots are
/// released at the member's own finish. Cancelled and failed members are delivered at once.
///
/// With n_workers > 1, each free pipeline slot runs its own batch, so at most n_workers
/// batches are active and each has at most one iteration in flight.
class RequestLevelPolicy final : public SchedulingPolicy {
 public:
  PolicyKind kind() const override { return PolicyKind::kRequestLevel; }
  [[nodiscard]] std::vector<RequestId> Select(const RequestPool& pool, const KvSlotBudget& budget,
                                              int32_t max_bs) override;
  [[nodiscard]] std::vector<RequestId> OnRequestFinished(const Request& request) override;

  /// Number of active batches (formed, not every member finished).
  int32_t num_active_batches() const { return static_cast<int32_t>(batches_.size()); }

 private:
  struct StaticBatch {
    std::vector<RequestId> members;  // arrival order
    int32_t num_unfinished = 0;
    std::vector<RequestId> held;  // finished normally, delivered when the batch ends
  };

  // The batch's unfinished members, or empty when one of them is in flight.
  static std::vector<RequestId> RunnableMembers(const RequestPool& pool, const StaticBatch& batch);
  // Forms a new batch from QUEUED requests; empty when none is admissible.
  static std::vector<RequestId> FormBatch(const RequestPool& pool, const KvSlotBudget& budget,
                                          int32_t max_bs);

  std::vector<StaticBatch> batches_;  // oldest first
};

}  // namespace orca::sched
