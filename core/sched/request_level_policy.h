#pragma once
/// Request-level (static) batching: the baseline every benchmark compares against.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/sched/scheduling_policy.h"

namespace orca::sched {

/// The paper's FasterTransformer setup (§6.2) on Orca's engine. When no batch is running,
/// take up to `max_bs` QUEUED requests in arrival order (the same FCFS slot check as
/// Algorithm 1, stopping at the first that does not fit) as one batch, and run it iteration
/// after iteration until ALL of its members finish; only then is the next batch formed.
/// Nobody joins a running batch and nobody leaves it: a member that finishes early is
/// delivered only when the whole batch ends, as a static-batching server returns the batch
/// as a whole. Tokens still stream as they are produced. Cancelled and failed members are
/// delivered at once.
///
/// Pipelines are kept busy the way FasterTransformer does it: the batch is split into
/// `num_microbatches` contiguous microbatches (at most one per member), each with at most
/// one iteration in flight (the Scheduler caps the total at n_workers). With one microbatch
/// this is plain static batching. The paper's ft(max_bs, mbs) sets mbs independently of
/// the pipeline depth.
///
/// Two engines run the batch:
///  - selective (default): Orca's engine, so no prompt is padded and a member that finishes
///    stops computing (its slots are released at its own finish). A generous baseline.
///  - faster_transformer: what FasterTransformer's engine computes. Every prompt is padded
///    to the batch's longest (BatchEntry::num_padding_tokens: the engine runs the padding
///    tokens, see ScheduledRequest::num_padding_tokens), and a member that reaches its end
///    keeps decoding (KeepsFinishedMembersComputing: its extra tokens are discarded, never
///    streamed) until every member has ended. KV is FasterTransformer's [batch, max_seq_len]
///    footprint: each member reserves the longest prompt plus the largest max_new_tokens of
///    the batch (its own prompt + that many decode positions, plus its padding), the batch
///    is formed only while that footprint fits the free slots (and, with a model context,
///    while longest prompt + largest max_new_tokens fits it), and it is released when the
///    batch ends.
///
/// With a separate pool for sliding-window layers' KV (KvManager: KV by layer type) a batch
/// also takes members only while their local reservations fit it — a padded member's
/// counting its padding sequence's blocks, held until the batch ends.
class RequestLevelPolicy final : public SchedulingPolicy {
 public:
  struct Options {
    /// >= 1 (normally n_workers; the paper's mbs).
    int32_t num_microbatches = 1;
    bool faster_transformer = false;
    /// faster_transformer: the model context (positions) a padded batch must fit; 0 = none.
    int32_t max_context = 0;
  };

  explicit RequestLevelPolicy(Options options);
  /// Selective batching with `num_microbatches` microbatches.
  explicit RequestLevelPolicy(int32_t num_microbatches) : RequestLevelPolicy(Options{num_microbatches}) {}

  PolicyKind kind() const override { return PolicyKind::kRequestLevel; }
  /// The next microbatch to run, checked against `budget` (nothing is reserved).
  [[nodiscard]] std::vector<RequestId> Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs) {
    return SelectIds(pool, budget, nullptr, max_bs);
  }
  /// The same batch, with its QUEUED members admitted through `kv` (reserved mode); every
  /// member computes all its uncomputed tokens.
  [[nodiscard]] Selection Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) override;
  [[nodiscard]] std::vector<RequestId> OnRequestFinished(const Request& request) override;
  bool KeepsFinishedMembersComputing() const override { return options_.faster_transformer; }
  [[nodiscard]] std::vector<RequestId> FinishedMembers(const RequestPool& pool) const override;

  /// True while a batch runs (formed, and not every member finished).
  bool batch_active() const { return batch_.has_value(); }

 private:
  // A member's padded shape (faster_transformer only).
  struct PaddedShape {
    int32_t num_padding_tokens = 0;
    int32_t kv_reservation_slots = 0;  // the workers': own prompt + the batch's largest max_new_tokens
    int64_t reserved_slots = 0;        // the scheduler's: kv_reservation_slots + padding, each rounded to a block
    ReservedFootprint Footprint() const { return {reserved_slots, kv_reservation_slots, num_padding_tokens}; }
  };
  struct StaticBatch {
    std::vector<std::vector<RequestId>> microbatches;  // arrival order within and across
    int32_t num_unfinished = 0;
    std::vector<RequestId> held;                         // finished normally, delivered when the batch ends
    absl::flat_hash_map<RequestId, PaddedShape> padded;  // faster_transformer only
    size_t next_microbatch = 0;                          // round robin: microbatches advance in turn
  };

  // The microbatch's unfinished members, or empty when one of them is in flight. A member
  // padding out (faster_transformer) stops once it has used the batch's decode positions.
  std::vector<RequestId> RunnableMembers(const RequestPool& pool, const std::vector<RequestId>& microbatch) const;
  // Select with, when `kv` is given, its local pool checked too.
  std::vector<RequestId> SelectIds(const RequestPool& pool, const KvSlotBudget& budget, const KvManager* kv,
                                   int32_t max_bs);
  // Up to max_bs QUEUED requests that fit together (and in `kv`'s local pool), in arrival order.
  static std::vector<RequestId> FormBatch(const RequestPool& pool, const KvSlotBudget& budget, const KvManager* kv,
                                          int32_t max_bs);
  // The same, padded: stops where the batch's padded footprint no longer fits; fills `padded`.
  std::vector<RequestId> FormPaddedBatch(const RequestPool& pool, const KvSlotBudget& budget, const KvManager* kv,
                                         int32_t max_bs, absl::flat_hash_map<RequestId, PaddedShape>& padded) const;
  // faster_transformer: every member in the pool has ended (finished or padding out).
  bool AllMembersEnded(const RequestPool& pool) const;
  bool Contains(RequestId id) const;

  Options options_;
  std::optional<StaticBatch> batch_;
};

}  // namespace orca::sched
