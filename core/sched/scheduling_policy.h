#pragma once
/// The batch-selection policy interface and the policies Orca ships.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/sched/kv_manager.h"
#include "core/sched/kv_slot_budget.h"
#include "core/sched/request_pool.h"

namespace orca::sched {

enum class PolicyKind : uint8_t {
  kOrca,          ///< Iteration-level scheduling, the paper's Algorithm 1 (OrcaPolicy).
  kRequestLevel,  ///< Request-level (static) batching baseline (RequestLevelPolicy).
  kPaged,         ///< Iteration-level, paged KV with on-demand blocks and preemption (TokenBudgetPolicy).
};

/// The order requests are admitted in (and preempted in, reversed).
enum class SchedulingOrder : uint8_t {
  kFcfs,      ///< Arrival order (the paper).
  kPriority,  ///< RequestSpec::priority first (lower first), aged by waiting time; see RequestOrder.
};

/// "orca", "request-level" or "paged" (the scheduler's --policy flag values).
const char* PolicyKindName(PolicyKind kind);
/// Parses PolicyKindName's output; nullopt for anything else.
std::optional<PolicyKind> ParsePolicyKind(const std::string& name);
/// "fcfs" or "priority" (--scheduling-order).
const char* SchedulingOrderName(SchedulingOrder order);
std::optional<SchedulingOrder> ParseSchedulingOrder(const std::string& name);

/// One request of a selected batch.
struct BatchEntry {
  RequestId request_id = 0;
  /// Tokens it computes this iteration: a prompt chunk's length, 1 at increment; 0 = all its
  /// uncomputed tokens (a whole prompt, after its prefix-cache hit).
  int32_t num_tokens = 0;
  /// The FasterTransformer baseline only: padding tokens computed with it
  /// (ScheduledRequest::num_padding_tokens), and the KV its workers reserve in place of its
  /// own kv_reservation_slots (it keeps decoding until its batch ends). 0 = none / its own.
  int32_t num_padding_tokens = 0;
  int32_t kv_reservation_slots = 0;
};

/// What a policy decided for the next iteration.
struct Selection {
  /// Batch order = flattened token order.
  std::vector<BatchEntry> batch;
  /// Admitted requests whose KV the policy took back (paged KV), in preemption order. They
  /// are not in `batch`; the scheduler returns them to QUEUED and has the workers release
  /// them.
  std::vector<RequestId> preempted;
};

/// Picks the batch of the next iteration. The Scheduler owns the pool and the KV manager
/// and calls Select only when a pipeline slot is free (fewer than n_workers batches in
/// flight); it applies every selection: admits the QUEUED requests in it, preempts the
/// preempted ones, and sends the batch. The policy decides KV through `kv`: it admits each
/// QUEUED request it selects (KvManager::TryAdmit), grows the requests it schedules
/// (TryGrow, paged) and frees the ones it preempts (Free). It never changes requests.
class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;

  virtual PolicyKind kind() const = 0;

  /// The next batch, at most `max_bs` requests; empty when nothing is selectable.
  /// In-flight and finished requests are never selected.
  [[nodiscard]] virtual Selection Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) = 0;

  /// `request` has just reached a FINISHED state. Returns the ids (finished, still in the
  /// pool) whose completion becomes visible to clients now; the scheduler delivers and
  /// removes them. Iteration-level scheduling returns the request itself.
  [[nodiscard]] virtual std::vector<RequestId> OnRequestFinished(const Request& request) = 0;

  /// True when a request that reaches its end (stop token, length) keeps computing until
  /// the policy lets it finish (the FasterTransformer baseline: a static batch runs until
  /// its longest member ends). The scheduler then marks it Request::padding_out() instead
  /// of finishing it, discards the tokens it still generates, and finishes it with its
  /// recorded cause once FinishedMembers lists it.
  virtual bool KeepsFinishedMembersComputing() const { return false; }
  /// An iteration of `num_tokens` tokens returned `duration` after it was scheduled (only
  /// iterations that succeeded). Policies that budget time learn from it.
  virtual void OnIterationMeasured(int64_t /*num_tokens*/, absl::Duration /*duration*/) {}

  /// Padding-out requests to finish now (none of them in flight).
  [[nodiscard]] virtual std::vector<RequestId> FinishedMembers(const RequestPool& /*pool*/) const { return {}; }
};

/// How to build a policy (from SchedulerOptions).
struct PolicyOptions {
  PolicyKind kind = PolicyKind::kOrca;
  /// Pipeline depth: batches in flight.
  int32_t n_workers = 1;
  /// kRequestLevel: microbatches a static batch is split into (the paper's ft(max_bs, mbs));
  /// 0 = n_workers.
  int32_t num_microbatches = 0;
  /// kRequestLevel: the FasterTransformer engine's behaviour (RequestLevelPolicy::Options).
  bool faster_transformer = false;
  /// kRequestLevel with faster_transformer: the model context a padded batch must fit
  /// (longest prompt + largest max_new_tokens); 0 = no limit.
  int32_t max_context = 0;
  /// Per-iteration token budget (chunked prefill); 0 = none.
  int32_t max_num_batched_tokens = 0;
  /// Time budget of prompt chunks next to decodes (TokenBudgetPolicy); 0 = none.
  double max_prefill_slowdown = 0;
  /// Prompt tokens of one request per iteration (TokenBudgetPolicy); 0 = no cap.
  int32_t long_prefill_token_threshold = 0;
  SchedulingOrder order = SchedulingOrder::kFcfs;
  absl::Duration priority_aging = absl::Seconds(1);
};

/// A new policy: OrcaPolicy for kOrca with no token or time budget and no priorities (the
/// paper's Algorithm 1 exactly), TokenBudgetPolicy for kOrca with either and for kPaged,
/// RequestLevelPolicy for kRequestLevel (which takes neither: nullptr).
std::unique_ptr<SchedulingPolicy> CreatePolicy(const PolicyOptions& options);
/// The same with only a kind and a pipeline depth.
std::unique_ptr<SchedulingPolicy> CreatePolicy(PolicyKind kind, int32_t n_workers);

}  // namespace orca::sched
