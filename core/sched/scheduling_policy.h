#pragma once
/// The batch-selection policy interface and the policies Orca ships.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/sched/kv_slot_budget.h"
#include "core/sched/request_pool.h"

namespace orca::sched {

enum class PolicyKind : uint8_t {
  kOrca,          ///< Iteration-level scheduling, the paper's Algorithm 1 (OrcaPolicy).
  kRequestLevel,  ///< Request-level (static) batching baseline (RequestLevelPolicy).
};

/// "orca" or "request-level" (the scheduler's --policy flag values).
const char* PolicyKindName(PolicyKind kind);
/// Parses PolicyKindName's output; nullopt for anything else.
std::optional<PolicyKind> ParsePolicyKind(const std::string& name);

/// Picks the batch of the next iteration. The Scheduler owns the pool and the budget and
/// calls Select only when a pipeline slot is free (fewer than n_workers batches in flight);
/// it commits every non-empty selection: admits (reserves slots for) the QUEUED requests in
/// it and sends the batch. A policy never mutates requests or the budget itself.
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;

  virtual PolicyKind kind() const = 0;

  /// Returns the ids of the next batch in batch order, at most `max_bs`; empty when nothing
  /// is selectable. In-flight and finished requests are never selected. QUEUED requests in
  /// the result fit in `budget` together.
  [[nodiscard]] virtual std::vector<RequestId> Select(const RequestPool& pool, const KvSlotBudget& budget,
                                                      int32_t max_bs) = 0;

  /// `request` has just reached a FINISHED state. Returns the ids (finished, still in the
  /// pool) whose completion becomes visible to clients now; the scheduler delivers and
  /// removes them. Iteration-level scheduling returns the request itself.
  [[nodiscard]] virtual std::vector<RequestId> OnRequestFinished(const Request& request) = 0;
};

/// A new policy of that kind for a pipeline of `n_workers` batches in flight.
std::unique_ptr<SchedulingPolicy> CreatePolicy(PolicyKind kind, int32_t n_workers);

}  // namespace orca::sched
