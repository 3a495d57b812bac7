#pragma once
/// Iteration-level scheduling beyond the paper: a per-iteration token budget (chunked
/// prefill), paged KV with preemption, and priorities. The paper's Algorithm 1 is OrcaPolicy.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/sched/iteration_cost_model.h"
#include "core/sched/request_order.h"
#include "core/sched/scheduling_policy.h"

namespace orca::sched {

/// Sarathi-Serve / vLLM v1 style selection, one iteration at a time:
///
///   budget ← max_num_batched_tokens (unlimited when 0)
///   1. admitted requests between iterations, in RequestOrder, that decode: 1 token each;
///   2. admitted requests still prefilling (a chunked prompt), in order: the next chunk,
///      min(tokens left, budget);
///   3. QUEUED requests in order: admit with a first chunk of min(tokens left after the
///      prefix-cache hit, budget); stop at the first that does not fit (nobody overtakes);
///   each step stops at max_bs requests or an exhausted budget.
/// With long_prefill_token_threshold T > 0 every prompt chunk of steps 2 and 3 is also at most
/// T tokens, so that a long prompt leaves room in the budget for the requests queued behind it
/// (else its chunks fill every iteration's budget until it is done, and a short prompt that
/// arrives after it waits for the whole of it).
///
/// With max_prefill_slowdown R > 1 the budget of steps 2 and 3 also adapts (a time budget,
/// as Sarathi-Serve sizes its token budget from the time a decode iteration may take):
/// while any request is decoding (in this batch or in flight), prompt chunks may add at
/// most what makes the iteration R times as long as its decodes alone, as predicted by an
/// IterationCostModel fitted to the iterations that returned (OnIterationMeasured):
///   chunk tokens <= max(1, (R - 1) × cost(decodes) / cost per token).
/// An iteration without decodes is not limited by it (no inter-token latency to protect),
/// nor is any iteration before the model has a fit.
///
/// KV (KvManager): reserved mode admits on the whole reservation (Algorithm 1's check;
/// this is `orca` with --max-num-batched-tokens or --scheduling-order priority). Paged
/// mode (`paged`) admits on the first chunk's blocks and grows block by block; when a
/// scheduled request needs blocks that are not free, it preempts the admitted requests
/// that come last in RequestOrder (latest arrival with FCFS), never one in flight: worst
/// first, until its blocks fit. If none is left but a later request is in flight, it waits
/// for the next iteration; if none is left at all, it preempts itself (its KV is
/// recomputed when it is readmitted). A QUEUED request preempts only when the preemptable
/// requests after it free enough blocks (with FCFS that is only a request preempted
/// earlier: new arrivals come last). After a preemption no other request is admitted in
/// the same iteration.
///
/// Guarantees (property-tested): every request finishes — the first request in order
/// always gets its blocks (a request's kv_reservation_slots never exceeds n_slots) and preemption only
/// ever hits requests after it, so the first one runs to its end and the argument repeats;
/// no block is held twice unless it is a cached, read-only full block; the plan never
/// exceeds max_bs or the token budget; decodes are never left out for a prompt chunk.
class TokenBudgetPolicy final : public SchedulingPolicy {
 public:
  /// `kind` is kOrca (reserved KV) or kPaged; `max_num_batched_tokens` 0 = unlimited
  /// (whole prompts), else >= max_bs so every decode fits; `max_prefill_slowdown` 0 = no time
  /// budget, else > 1 (see above).
  /// `long_prefill_token_threshold` 0 = no cap, else the most prompt tokens one request may add to an iteration.
  TokenBudgetPolicy(PolicyKind kind, int32_t max_num_batched_tokens, RequestOrder order,
                    double max_prefill_slowdown = 0, int32_t long_prefill_token_threshold = 0)
      : kind_(kind),
        max_num_batched_tokens_(max_num_batched_tokens),
        order_(order),
        max_prefill_slowdown_(max_prefill_slowdown),
        long_prefill_token_threshold_(long_prefill_token_threshold) {}

  PolicyKind kind() const override { return kind_; }
  const RequestOrder& order() const { return order_; }
  [[nodiscard]] Selection Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) override;
  [[nodiscard]] std::vector<RequestId> OnRequestFinished(const Request& request) override { return {request.id()}; }
  void OnIterationMeasured(int64_t num_tokens, absl::Duration duration) override;

  /// Prompt-chunk tokens an iteration with `num_decodes` decodes may carry under the time
  /// budget; nullopt = not limited (no time budget, or no fit yet).
  std::optional<int64_t> ChunkTokenLimit(int64_t num_decodes) const;
  const IterationCostModel& cost_model() const { return cost_model_; }

 private:
  class Round;

  PolicyKind kind_;
  int32_t max_num_batched_tokens_;
  RequestOrder order_;
  double max_prefill_slowdown_;
  int32_t long_prefill_token_threshold_;
  IterationCostModel cost_model_;
};

}  // namespace orca::sched
