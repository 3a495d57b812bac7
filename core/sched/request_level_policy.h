#pragma once
/// Request-level (static) batching: the baseline every benchmark compares against.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/sched/scheduling_policy.h"

namespace orca::sched {

/// The paper's FasterTransformer setup (§6.2) on Orca's engine. When no batch is running,
/// take up to `max_bs` QUEUED requests in arrival order (the same FCFS slot check as
/// Algorithm 1, stopping at the first that does not fit) as one batch, and run it iteration
/// after iteration until ALL of its members finish; only then is the next batch formed.
/// Nobody joins a running batch and nobody leaves it: a member that finishes early stops
/// computing (the selective-batching engine needs no padding) but its completion is
/// delivered only when the whole batch ends, as a static-batching server returns the batch
/// as a whole. Tokens still stream as they are produced; slots are released at the member's
/// own finish (no new batch can use them before the batch ends anyway). Cancelled and
/// failed members are delivered at once.
///
/// Pipelines (n_workers > 1) are kept busy the way FasterTransformer does it: the batch is
/// split into `num_microbatches` contiguous microbatches (at most one per member), each with
/// at most one iteration in flight. With one microbatch this is plain static batching.
class RequestLevelPolicy final : public SchedulingPolicy {
 public:
  /// num_microbatches >= 1, normally n_workers.
  explicit RequestLevelPolicy(int32_t num_microbatches);

  PolicyKind kind() const override { return PolicyKind::kRequestLevel; }
  /// The batch, checked against `budget` (nothing is reserved).
  [[nodiscard]] std::vector<RequestId> Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs);
  /// The same batch, with its QUEUED members admitted through `kv` (reserved mode); every
  /// member computes all its uncomputed tokens.
  [[nodiscard]] Selection Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) override;
  [[nodiscard]] std::vector<RequestId> OnRequestFinished(const Request& request) override;

  /// True while a batch runs (formed, and not every member finished).
  bool batch_active() const { return batch_.has_value(); }

 private:
  struct StaticBatch {
    std::vector<std::vector<RequestId>> microbatches;  // arrival order within and across
    int32_t num_unfinished = 0;
    std::vector<RequestId> held;  // finished normally, delivered when the batch ends
  };

  // The microbatch's unfinished members, or empty when one of them is in flight.
  static std::vector<RequestId> RunnableMembers(const RequestPool& pool, const std::vector<RequestId>& microbatch);
  // Up to max_bs QUEUED requests that fit together, in arrival order.
  static std::vector<RequestId> FormBatch(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs);
  bool Contains(RequestId id) const;

  int32_t num_microbatches_;
  std::optional<StaticBatch> batch_;
};

}  // namespace orca::sched
