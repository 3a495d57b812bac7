#pragma once
/// One request in the scheduler's pool: its spec, progress and lifecycle state.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/sched/request_spec.h"
#include "core/sched/request_state.h"
#include "core/sched/scheduler_output.h"

namespace orca::sched {

/// A request owned by the Scheduler's pool. State changes go through the transition
/// methods below, which check the diagram in request_state.h (a wrong transition is a
/// scheduler bug and aborts). KV accounting is the KvManager's; the request only records
/// how many slots it may use and how many of its tokens the workers hold.
///
/// Tokens: token_ids() is the prompt followed by every generated token. The workers hold
/// the KV of the first num_computed_tokens() of them. An iteration computes the next
/// chunk of uncomputed tokens; the one that reaches the end of token_ids() samples the
/// next token (at increment, the chunk is the single last generated token).
class Request {
 public:
  /// `max_new_tokens` is the effective limit (spec's, capped by the context);
  /// `kv_reservation_slots` the KV slots it reserves once admitted.
  Request(RequestId id, RequestSpec spec, int32_t max_new_tokens, int64_t kv_reservation_slots,
          absl::Time arrival_time);

  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  RequestId id() const { return id_; }
  const std::string& caller_id() const { return spec_.caller_id; }
  const RequestSpec& spec() const { return spec_; }
  RequestState state() const { return state_; }
  bool finished() const { return IsFinished(state_); }
  bool admitted() const { return IsAdmitted(state_); }
  bool in_flight() const { return state_ == RequestState::kRunning; }
  /// Phase of its next iteration: initiation until the iteration that computes the last
  /// prompt token (again after a preemption, until the recompute catches up).
  Phase next_phase() const { return prefilling_ ? Phase::kInitiation : Phase::kIncrement; }
  int32_t num_prompt_tokens() const { return static_cast<int32_t>(spec_.prompt_token_ids.size()); }
  int32_t num_generated_tokens() const { return num_generated_; }
  /// Prompt, then generated tokens.
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids_.size()); }
  /// Tokens whose KV the workers hold, as of the last returned iteration.
  int32_t num_computed_tokens() const { return num_computed_; }
  /// Tokens its next iteration may compute at most (the rest of the prompt while
  /// prefilling, 1 at increment).
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_; }
  /// Prompt tokens found in the prefix cache when it was (last) admitted.
  int32_t num_cached_tokens() const { return num_cached_; }
  int32_t num_preemptions() const { return num_preemptions_; }
  int32_t priority() const { return spec_.priority; }
  /// The group it was submitted in (Scheduler::SubmitGroup: n sequences of one prompt), named
  /// by the id of the group's first request; 0 when it was submitted alone.
  RequestId group_id() const { return group_id_; }
  /// Set once, at submission, before it joins the pool.
  void set_group_id(RequestId group_id) { group_id_ = group_id; }
  /// Effective max new tokens (spec's value capped by the model context).
  int32_t max_new_tokens() const { return max_new_tokens_; }
  /// Its KV reservation: prompt + max_new_tokens() rounded up to a block, the slots it
  /// reserves while admitted (NewRequestData::kv_reservation_slots).
  int64_t kv_reservation_slots() const { return kv_reservation_slots_; }
  int64_t num_iterations_scheduled() const { return num_iterations_scheduled_; }
  int64_t num_iterations_completed() const { return num_iterations_completed_; }
  std::optional<IterationId> in_flight_iteration() const { return in_flight_iteration_; }
  /// Set when Cancel() arrived while its iteration was in flight.
  bool cancel_requested() const { return pending_cancel_ != FinishCause::kNone; }
  FinishCause pending_cancel_cause() const { return pending_cancel_; }
  /// True while the workers hold state for it (it was part of a plan since it was last
  /// admitted): they must be told to release it.
  bool sent_to_engine() const { return on_workers_; }
  /// True when its in-flight iteration samples a token (false for a prompt chunk that does
  /// not reach the end of its tokens).
  bool in_flight_samples() const { return in_flight_samples_; }
  absl::Time arrival_time() const { return arrival_time_; }
  /// The FasterTransformer baseline: it reached its end but keeps computing with its static
  /// batch (BeginPadOut); finish it with pad_out_cause() when the batch ends.
  bool padding_out() const { return pad_out_cause_ != FinishCause::kNone; }
  FinishCause pad_out_cause() const { return pad_out_cause_; }

  /// QUEUED → WAITING_NEXT_ITERATION. The caller holds its KV (reserved, or the blocks of
  /// its first chunk); the first `num_cached_tokens` tokens are already in KV blocks the
  /// prefix cache handed it (0 without prefix caching).
  void Admit(absl::Time now, int32_t num_cached_tokens = 0);
  /// WAITING_NEXT_ITERATION → RUNNING, computing the next `num_tokens` uncomputed tokens
  /// (0 = all of them: a whole prompt, or one token at increment). Returns this request's
  /// entry of the plan: the full record when the workers do not hold it yet, the diff
  /// afterwards. `new_block_ids` are the KV blocks appended to its table for this
  /// iteration and `kv_block_size` their size, when the scheduler owns the block tables
  /// (0: the workers allocate from kv_reservation_slots).
  [[nodiscard]] ScheduledRequest StartIteration(IterationId iteration_id, int32_t num_tokens = 0,
                                                std::vector<int32_t> new_block_ids = {}, int32_t kv_block_size = 0);
  /// RUNNING → WAITING_NEXT_ITERATION with one more generated token (its iteration
  /// sampled). Returns the cause that ends the request with this token (kNone when it
  /// continues); the caller then calls Finish(). Stop/EOS tokens count only after
  /// min_new_tokens.
  [[nodiscard]] FinishCause CompleteIteration(const SampledToken& token, absl::Time now);
  /// Appends to `out` the prompt logprobs of a record (entry i scores position
  /// `first_position` + i) that were not reported before: a recomputed request (after a
  /// preemption) scores its prompt again, and positions are reported once, in order.
  void TakeNewPromptLogprobs(int32_t first_position, const std::vector<SampledToken>& logprobs,
                             std::vector<SampledToken>* out);
  /// RUNNING → WAITING_NEXT_ITERATION after a prompt chunk that did not sample.
  void CompleteChunk();
  /// WAITING_NEXT_ITERATION, just ended by `cause` (CompleteIteration's result): instead of
  /// finishing, it stays admitted and keeps decoding (FasterTransformer: a finished member
  /// computes until its whole batch ends). From now on CompleteIteration appends the tokens
  /// it samples to token_ids() (the next iteration's input) without counting them as
  /// generated, and returns kNone.
  void BeginPadOut(FinishCause cause);
  /// WAITING_NEXT_ITERATION → QUEUED: its KV was taken back (paged KV). It keeps its
  /// arrival position and generated tokens; the workers forget it (the caller releases it)
  /// and its next admission recomputes all its tokens.
  void Preempt();
  /// Marks a RUNNING request to finish with `cause` when its iteration returns.
  void RequestCancel(FinishCause cause);
  /// Any unfinished state → the FINISHED state of `cause`.
  void Finish(FinishCause cause, std::string error_message, absl::StatusCode error_code = absl::StatusCode::kInternal);
  /// The finish record as delivered at `delivered_at` (>= the finish time; the request-level
  /// baseline delivers when its whole batch ends).
  [[nodiscard]] FinishInfo BuildFinishInfo(absl::Time delivered_at) const;

 private:
  RequestId id_;
  RequestSpec spec_;
  int32_t max_new_tokens_;
  int64_t kv_reservation_slots_;
  absl::Time arrival_time_;
  RequestId group_id_ = 0;

  RequestState state_ = RequestState::kQueued;
  std::vector<int32_t> token_ids_;
  int32_t num_generated_ = 0;
  int32_t num_computed_ = 0;
  int32_t num_cached_ = 0;
  int32_t num_preemptions_ = 0;
  int32_t next_prompt_logprob_position_ = 1;  // the first prompt token has no logprob
  bool prefilling_ = true;
  bool on_workers_ = false;
  int32_t in_flight_tokens_ = 0;
  bool in_flight_samples_ = false;
  int64_t num_iterations_scheduled_ = 0;
  int64_t num_iterations_completed_ = 0;
  std::optional<IterationId> in_flight_iteration_;
  FinishCause pending_cancel_ = FinishCause::kNone;
  FinishCause finish_cause_ = FinishCause::kNone;
  FinishCause pad_out_cause_ = FinishCause::kNone;
  std::string error_message_;
  absl::StatusCode error_code_ = absl::StatusCode::kInternal;
  std::optional<int32_t> matched_stop_token_id_;
  std::optional<absl::Time> admitted_time_;
  std::optional<absl::Time> first_token_time_;
};

}  // namespace orca::sched
