#pragma once
/// Iteration-level scheduling: the paper's Algorithm 1 (§4.2), to the letter.

#include <cstdint>
#include <vector>

#include "core/sched/scheduling_policy.h"

namespace orca::sched {

/// Algorithm 1 (ORCA scheduling):
///
///   batch ← []; n_rsrv ← current reservations
///   for req in pool (arrival order), skipping requests in flight:
///     if req is in the initiation phase (not admitted yet):
///       if n_rsrv + req.max_tokens > n_slots: break      # FCFS: nobody overtakes it
///       n_rsrv ← n_rsrv + req.max_tokens
///     batch.append(req)
///     if |batch| = max_bs: break
///
/// The paper's `req.max_tokens` (prompt + max new tokens) is our KV reservation,
/// Request::kv_reservation_slots() (rounded up to a KV block; the name sent to the workers,
/// NewRequestInfo.kv_reservation_slots). The paper's word is not used elsewhere: in this
/// tree `max_tokens` is only the OpenAI API's field, the client's max_new_tokens.
///
/// A group of sequences sharing one prompt (KvManager, prefix caching only) is one unit of
/// admission: its leader's reservation is the whole group's, and the other members, whose KV
/// that reserves, are skipped (not waited for) until the leader has computed the prompt
/// blocks they share; they then join with nothing more to reserve.
///
/// When the workers keep a separate pool for the KV of sliding-window layers (KvManager: KV
/// by layer type), the admission check is made there too, with the request's local
/// reservation against the local pool's free blocks: the first request that does not fit
/// either pool stops admission.
///
/// The pool re-forms every iteration, so a finished request leaves at once and a new one
/// joins at the next iteration. Because admission is strictly FCFS, admitted requests
/// always precede QUEUED ones in arrival order, and an earlier request has always run at
/// least as many iterations as a later one (iteration-level FCFS).
class OrcaPolicy final : public SchedulingPolicy {
 public:
  PolicyKind kind() const override { return PolicyKind::kOrca; }
  /// The batch, checked against `budget` (nothing is reserved).
  [[nodiscard]] std::vector<RequestId> Select(const RequestPool& pool, const KvSlotBudget& budget, int32_t max_bs);
  /// The same batch, with its QUEUED members admitted through `kv` (reserved mode); every
  /// member computes all its uncomputed tokens.
  [[nodiscard]] Selection Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) override;
  [[nodiscard]] std::vector<RequestId> OnRequestFinished(const Request& request) override { return {request.id()}; }
};

}  // namespace orca::sched
