#pragma once
/// The iteration-level scheduler (paper §3 S1, §4.2): request pool, policy, KV slot budget.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/sched/kv_manager.h"
#include "core/sched/request_pool.h"
#include "core/sched/request_spec.h"
#include "core/sched/scheduler_output.h"
#include "core/sched/scheduling_policy.h"

namespace orca::sched {

struct SchedulerOptions {
  PolicyKind policy = PolicyKind::kOrca;
  /// Paper's max_bs: requests per iteration (>= 1).
  int32_t max_bs = 16;
  /// Paper's n_slots: KV slots (tokens) the engine holds per stage (>= 1).
  int64_t n_slots = 8192;
  /// Paper's n_workers: batches in flight at once, the pipeline depth (>= 1).
  int32_t n_workers = 1;
  /// kRequestLevel only: microbatches a static batch is split into, the paper's mbs in
  /// ft(max_bs, mbs) (at most n_workers of them in flight). 0 = n_workers.
  int32_t num_microbatches = 0;
  /// kRequestLevel only: the FasterTransformer engine's behaviour instead of Orca's
  /// selective batching — prompts padded to the batch's longest (the engine computes the
  /// padding), finished members keep computing until the whole batch ends (their extra
  /// tokens discarded), KV sized as [batch, longest prompt + largest max_new_tokens]. See
  /// RequestLevelPolicy. Not with enable_prefix_caching.
  bool faster_transformer = false;
  /// Reservations are rounded up to this many tokens; must divide n_slots. 1 = the paper
  /// exactly; a block-table KV pool uses its block size so it never fragments.
  int32_t kv_block_size = 1;
  /// Model context (positions); prompt + generated never exceeds it. 0 = no limit.
  int32_t max_context = 0;
  /// Prompt token ids must be < vocab_size. 0 = not checked here.
  int32_t vocab_size = 0;
  /// Submit fails with RESOURCE_EXHAUSTED beyond these many QUEUED requests / prompt tokens
  /// of QUEUED requests. 0 = unlimited.
  int64_t max_queued_requests = 0;
  int64_t max_queued_tokens = 0;
  /// Fairness: the most KV one request — or one group of sequences of one prompt
  /// (SubmitGroup), counted together — may reserve, as a share of n_slots (rounded down to
  /// whole blocks, at least one block). Submit refuses more with INVALID_ARGUMENT, so no
  /// single request can hold the whole budget while small ones wait behind it. In (0, 1];
  /// 1 = no cap beyond n_slots (the paper; a group's members together still within it).
  double max_request_kv_share = 1.0;
  /// KV by layer type (KvManager). The model's sliding-window ("local") attention layers'
  /// window in tokens (0 = it has none) and the slots of the workers' separate pool for
  /// those layers' KV (0 = no such pool: they keep every position in the main one, and
  /// nothing changes). With a pool every request's SlidingWindowKvBlocks there are counted
  /// too, in whole blocks of kv_block_size; Submit refuses a request whose window alone can
  /// never fit it. Not with enable_prefix_caching (a cached prefix's window is gone).
  int32_t sliding_window = 0;
  int64_t kv_local_slots = 0;

  // ---- Beyond the paper (each off by default; core/sched/README.md) ----
  /// Chunked prefill: tokens per iteration (decodes first, then prompt chunks). 0 = off
  /// (whole prompts, Algorithm 1). Else >= max_bs. Not with kRequestLevel.
  int32_t max_num_batched_tokens = 0;
  /// Chunked prefill with a time budget: while requests decode, an iteration's prompt chunks
  /// are cut so that it is predicted to take at most this many times as long as its
  /// decodes alone (learned from the iterations' measured durations, schedule to return;
  /// TokenBudgetPolicy). Bounds inter-token latency where a fixed token budget cannot know
  /// the engine's costs. 0 = off; else in (1, 1000]. With max_num_batched_tokens 0, an
  /// iteration without decodes takes whole prompts. Not with kRequestLevel.
  double max_prefill_slowdown = 0;
  /// Chunked prefill: at most this many prompt tokens of one request per iteration, so that a long prompt leaves
  /// room in the token budget for the requests queued behind it (vLLM's long_prefill_token_threshold). 0 = off.
  /// Not with kRequestLevel.
  int32_t long_prefill_token_threshold = 0;
  /// Prefix caching: full KV blocks are shared by content across requests. Makes the
  /// scheduler own the block tables (sent to the workers), in any policy.
  bool enable_prefix_caching = false;
  /// Admission (and preemption) order. kPriority not with kRequestLevel.
  SchedulingOrder scheduling_order = SchedulingOrder::kFcfs;
  /// kPriority: one priority level per this much waiting (the starvation bound, see
  /// RequestOrder); zero = strict priority.
  absl::Duration priority_aging = absl::Seconds(1);
};

/// A snapshot for metrics and the service's GetStats.
struct SchedulerStats {
  int32_t num_queued = 0;              ///< QUEUED (wire: num_requests_waiting).
  int32_t num_running = 0;             ///< Admitted: RUNNING + WAITING_NEXT_ITERATION (wire: num_requests_running).
  int32_t num_in_flight_requests = 0;  ///< RUNNING.
  int32_t num_batches_in_flight = 0;
  int64_t n_rsrv = 0;  ///< Reserved KV slots; paged: slots of the blocks in use (wire: kv_slots_used).
  int64_t n_slots = 0;
  /// The sliding-window layers' pool (0 and 0 without one): slots reserved there (paged:
  /// held), and its size (wire: kv_local_slots_used / kv_local_slots_total).
  int64_t n_local_rsrv = 0;
  int64_t n_local_slots = 0;
  int32_t sliding_window = 0;    ///< The model's window (0 = none), pool or not.
  KvStats kv;                    ///< Blocks and prefix-cache counters.
  uint64_t num_preemptions = 0;  ///< Requests preempted since the start (paged).
  int64_t queued_tokens = 0;     ///< Prompt tokens of QUEUED requests.
  /// The most KV slots one request or group may reserve (max_request_kv_share of n_slots).
  int64_t max_request_kv_slots = 0;
  /// Groups of sequences of one prompt share its full KV blocks (KvManager): their
  /// footprint is GroupKvFootprint(..., shares_prompt = true).
  bool shares_group_prompts = false;
  uint64_t num_iterations_scheduled = 0;
  uint64_t num_iterations_completed = 0;  ///< Returned by OnIterationDone.
  int32_t num_pending_releases = 0;       ///< Released ids not yet sent to the workers.
  bool draining = false;
};

/// One request as tests and debug endpoints see it.
struct RequestSnapshot {
  RequestId id = 0;
  std::string caller_id;
  RequestState state = RequestState::kQueued;
  Phase next_phase = Phase::kInitiation;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  int32_t max_new_tokens = 0;  ///< Effective (capped by the context).
  /// KV slots it holds while admitted (KvManager::reserved_slots; FasterTransformer: padded;
  /// a sharing group's member: its own part, the group holds the shared blocks'), else its
  /// kv_reservation_slots (paged: its bound).
  int64_t reserved_slots = 0;
  /// Local-pool blocks it reserves (reserved mode) or holds (paged) while admitted; 0
  /// without a local pool or when it holds none.
  int64_t local_blocks = 0;
  /// QUEUED: the slots its admission would add to n_rsrv (reserved mode; a group leader's is its group's).
  int64_t slots_to_admit = 0;
  /// QUEUED, reserved mode: the local-pool blocks its admission would reserve (its own
  /// footprint; 0 without a local pool).
  int64_t local_blocks_to_admit = 0;
  /// The group it was submitted in (its first request's id), 0 when submitted alone.
  RequestId group_id = 0;
  /// QUEUED in a sharing group, waiting for its leader's prompt blocks (KvManager).
  bool waits_for_shared_prompt = false;
  /// QUEUED in a sharing group whose leader's admission reserved its KV (reserved mode).
  bool kv_reserved_by_group = false;
  int32_t priority = 0;
  absl::Time arrival_time;
  int32_t num_computed_tokens = 0;  ///< Tokens whose KV the workers hold.
  int32_t num_cached_tokens = 0;    ///< Prefix-cache hit at its last admission.
  int32_t num_preemptions = 0;
  int64_t num_iterations_scheduled = 0;
  int64_t num_iterations_completed = 0;
  std::optional<IterationId> in_flight_iteration;
  bool cancel_requested = false;
  /// The FasterTransformer baseline: it ended but computes on with its batch.
  bool padding_out = false;
};

/// Result of Cancel(): `found` is false for ids the scheduler does not track (never
/// submitted or already delivered); `events` holds the CANCELLED completion when it
/// happened at once (empty when the request is in flight: it finishes when its iteration
/// returns).
struct CancelResult {
  bool found = false;
  std::vector<RequestEvent> events;
};

/// Iteration-level scheduler. Deterministic and single-threaded: the owner (the
/// scheduler service's loop thread, or a simulation) calls every method from one thread;
/// there are no locks inside. Time is passed in (`now`), never read from a clock.
///
/// Driving loop:
///   Submit(...) as requests arrive;
///   while (auto plan = Schedule(now)) send(plan);       // up to n_workers in flight
///   on results: events = OnIterationDone(id, results, now); stream(events);
///   on failure: events = OnIterationFailed(id, error, now);
///
/// KV is taken when a request is admitted into a plan (its whole reservation, or with paged
/// KV the blocks of its first chunk) and released the moment it finishes in any way or is
/// preempted; its id then rides on the next plan's released_request_ids (or
/// TakeReleasedRequestIds() when idle) so the workers free its KV.
class Scheduler {
 public:
  /// Validates the options (each error names the field and the limit).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(SchedulerOptions options);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Adds a request to the pool (QUEUED) and returns its id. Errors:
  ///  - FAILED_PRECONDITION while draining;
  ///  - INVALID_ARGUMENT for a malformed spec (field and value named, e.g. a priority beyond
  ///    ±kMaxPriority), or when it can never fit:
  ///    "prompt (600 tokens) + max_new_tokens (100) = 700 exceeds n_slots (512)" (with a local
  ///    pool, naming it: "... of the full-attention layers' pool", or "... need 9 blocks of
  ///    the sliding-window layers' pool at once, more than its 8"), or when its
  ///    KV (prompt + max_new_tokens, block-rounded) exceeds max_request_kv_slots(), naming
  ///    the numbers;
  ///  - OUT_OF_RANGE when the prompt leaves no room in the model context;
  ///  - DEADLINE_EXCEEDED when its deadline is not after `now`;
  ///  - ALREADY_EXISTS when an unfinished request has the same non-empty caller_id;
  ///  - RESOURCE_EXHAUSTED when max_queued_requests / max_queued_tokens would be exceeded.
  absl::StatusOr<RequestId> Submit(RequestSpec spec, absl::Time now);

  /// Submits n sequences of one prompt (the API's `n`) together, all or none: consecutive
  /// ids in `specs` order, returned in that order. The specs must have the same prompt;
  /// they may differ in everything else (each its own seed). Their KV is counted together:
  /// the group's footprint (GroupKvFootprint; the prompt's full blocks once when the KV
  /// manager shares them, with prefix caching) may not exceed max_request_kv_slots() (n_slots
  /// with a share of 1). Errors as Submit's, for the first member that fails (named by index),
  /// and INVALID_ARGUMENT for an empty group, more than kMaxGroupSize members or differing
  /// prompts. One spec is Submit.
  absl::StatusOr<std::vector<RequestId>> SubmitGroup(std::vector<RequestSpec> specs, absl::Time now);
  static constexpr int32_t kMaxGroupSize = 1024;

  /// The most KV slots one request or group may reserve (SchedulerOptions::max_request_kv_share).
  int64_t max_request_kv_slots() const;

  /// The next iteration, or nullopt when n_workers batches are already in flight or nothing
  /// is selectable (the pool is empty, or every candidate is in flight or waits for slots).
  std::optional<IterationPlan> Schedule(absl::Time now);

  /// The engine returned `iteration_id`. Appends each member's token, finishes the members
  /// that hit a stop/EOS token, max_new_tokens or the context, and members cancelled while
  /// in flight (their token discarded). A member without a result fails with ERROR; results
  /// for requests not in the batch are ignored. Returns the events to stream, in batch
  /// order. NOT_FOUND when the iteration is not in flight (unknown, or dropped by FailAll).
  absl::StatusOr<std::vector<RequestEvent>> OnIterationDone(IterationId iteration_id,
                                                            absl::Span<const RequestResult> results, absl::Time now);

  /// The iteration failed in the pipeline: each member finishes ERROR with `error`'s message
  /// (CANCELLED if it was cancelled meanwhile). NOT_FOUND as for OnIterationDone.
  absl::StatusOr<std::vector<RequestEvent>> OnIterationFailed(IterationId iteration_id, const absl::Status& error,
                                                              absl::Time now);

  /// The pipeline is dead: every in-flight iteration is dropped and every admitted request
  /// (in flight or between iterations) finishes ERROR. QUEUED requests stay queued: the
  /// workers hold nothing for them, so they run once the pipeline is back (the service
  /// may Cancel them instead). Their ids are queued for release like any finish. The
  /// prefix cache is emptied: the workers' KV is gone with them.
  std::vector<RequestEvent> FailAll(const absl::Status& error, absl::Time now);

  /// Cancels a request: QUEUED or WAITING_NEXT_ITERATION → FINISHED_CANCELLED at once;
  /// RUNNING → marked, finished when its iteration returns. A finished request whose
  /// completion the request-level baseline still holds is found but not changed.
  [[nodiscard]] CancelResult Cancel(RequestId id, absl::Time now);

  /// Cancels (FinishCause::kDeadlineExceeded) every unfinished request whose deadline is
  /// <= now, with Cancel's semantics. Returns the events of those finished at once.
  std::vector<RequestEvent> ExpireDeadlines(absl::Time now);

  /// Stops admitting: Submit fails with FAILED_PRECONDITION from now on. Requests already
  /// submitted keep running.
  void BeginDrain() { draining_ = true; }
  bool draining() const { return draining_; }

  /// The released ids not yet carried by a plan; clears them. For a release-only control
  /// message when the scheduler is idle.
  [[nodiscard]] std::vector<RequestId> TakeReleasedRequestIds();

  /// True while any request is tracked (queued, admitted, or finished but not delivered).
  bool HasRequests() const { return !pool_.empty(); }

  [[nodiscard]] SchedulerStats stats() const;
  /// nullopt for unknown or already delivered requests.
  [[nodiscard]] std::optional<RequestSnapshot> GetRequest(RequestId id) const;
  /// The unfinished request submitted with this non-empty caller id.
  [[nodiscard]] std::optional<RequestId> FindRequest(const std::string& caller_id) const;
  const SchedulerOptions& options() const { return options_; }
  /// The KV accounting (tests check its invariants; read-only).
  const KvManager& kv() const { return *kv_; }

 private:
  class EventList;
  // An iteration in the pipeline: its members, tokens and when it was scheduled.
  struct InFlightIteration {
    std::vector<RequestId> members;
    int64_t num_tokens = 0;
    absl::Time scheduled_at;
  };

  Scheduler(SchedulerOptions options, std::unique_ptr<KvManager> kv, std::unique_ptr<SchedulingPolicy> policy);
  static absl::Status ValidateOptions(const SchedulerOptions& options);

  absl::Status ValidateSpec(const RequestSpec& spec) const;
  // Effective max new tokens after the context cap; OUT_OF_RANGE when nothing fits.
  absl::StatusOr<int32_t> EffectiveMaxNewTokens(const RequestSpec& spec) const;
  // Submit's checks of one spec: its effective max new tokens and KV reservation.
  struct Checked {
    int32_t max_new_tokens = 0;
    int64_t kv_reservation_slots = 0;
  };
  absl::StatusOr<Checked> CheckSpec(const RequestSpec& spec, absl::Time now) const;
  // max_request_kv_share: the group's footprint against max_request_kv_slots().
  absl::Status CheckKvShare(const std::vector<RequestSpec>& specs, const std::vector<Checked>& checked) const;
  // The sliding-window layers' pool: INVALID_ARGUMENT naming it when the request's window
  // there could never fit.
  absl::Status CheckLocalFit(int64_t prompt, int32_t max_new_tokens) const;
  // `num_requests` more queued requests with `prompt_tokens` prompt tokens in all.
  absl::Status CheckQueueLimits(int64_t num_requests, int64_t prompt_tokens) const;
  // Finishes `request` with `cause`, releases its slots, queues its id for the workers and
  // delivers whatever the policy says became visible.
  void FinishRequest(Request& request, FinishCause cause, std::string error_message, absl::Time now, EventList& events,
                     absl::StatusCode error_code = absl::StatusCode::kInternal);
  // Finishes every member of a dropped or failed iteration.
  void FailBatch(const std::vector<RequestId>& members, const std::string& error_message, absl::StatusCode error_code,
                 absl::Time now, EventList& events);
  CancelResult CancelWithCause(RequestId id, FinishCause cause, absl::Time now);
  // Finishes the padding-out members the policy says are done (their batch ended).
  void FinishEndedMembers(absl::Time now, EventList& events);
  // Applies a policy's preemption: the request is QUEUED again, its workers' state released.
  void PreemptRequest(RequestId id);
  // Admits (when QUEUED) and starts the iteration of one batch entry.
  ScheduledRequest StartEntry(const BatchEntry& entry, IterationId iteration_id, absl::Time now);
  // Removes a finished or failed iteration from the pipeline and returns its members;
  // NOT_FOUND when it is not in flight.
  absl::StatusOr<InFlightIteration> TakeInFlight(IterationId iteration_id);

  SchedulerOptions options_;
  std::unique_ptr<KvManager> kv_;
  std::unique_ptr<SchedulingPolicy> policy_;
  RequestPool pool_;
  // Iterations in the pipeline, in schedule order.
  absl::btree_map<IterationId, InFlightIteration> in_flight_;
  std::vector<RequestId> pending_releases_;

  RequestId next_request_id_ = 1;
  IterationId next_iteration_id_ = 1;
  bool draining_ = false;
  int32_t num_queued_ = 0;
  int64_t queued_tokens_ = 0;
  int32_t num_admitted_ = 0;
  int32_t num_in_flight_requests_ = 0;
  uint64_t num_iterations_completed_ = 0;
  uint64_t num_preemptions_ = 0;
};

}  // namespace orca::sched
