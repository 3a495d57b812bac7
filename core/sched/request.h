#pragma once
/// One request in the scheduler's pool: its spec, progress and lifecycle state.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "core/sched/request_spec.h"
#include "core/sched/request_state.h"
#include "core/sched/scheduler_output.h"

namespace orca::sched {

/// A request owned by the Scheduler's pool. State changes go through the transition
/// methods below, which check the diagram in request_state.h (a wrong transition is a
/// scheduler bug and aborts). KV slot accounting is the Scheduler's; the request only
/// records how many slots it reserves.
class Request {
 public:
  /// `max_new_tokens` is the effective limit (spec's, capped by the context);
  /// `reservation` the KV slots it reserves once admitted.
  Request(RequestId id, RequestSpec spec, int32_t max_new_tokens, int64_t reservation, absl::Time arrival_time);

  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  RequestId id() const { return id_; }
  const std::string& caller_id() const { return spec_.caller_id; }
  const RequestSpec& spec() const { return spec_; }
  RequestState state() const { return state_; }
  bool finished() const { return IsFinished(state_); }
  bool admitted() const { return IsAdmitted(state_); }
  bool in_flight() const { return state_ == RequestState::kRunning; }
  /// Phase of its next iteration: initiation until its first iteration was scheduled.
  Phase next_phase() const { return num_iterations_scheduled_ == 0 ? Phase::kInitiation : Phase::kIncrement; }
  int32_t num_prompt_tokens() const { return static_cast<int32_t>(spec_.prompt_token_ids.size()); }
  int32_t num_generated_tokens() const { return num_generated_; }
  /// Effective max new tokens (spec's value capped by the model context).
  int32_t max_new_tokens() const { return max_new_tokens_; }
  /// KV slots reserved while admitted (paper's max_tokens, rounded up to a block).
  int64_t reservation() const { return reservation_; }
  int64_t num_iterations_scheduled() const { return num_iterations_scheduled_; }
  int64_t num_iterations_completed() const { return num_iterations_completed_; }
  std::optional<IterationId> in_flight_iteration() const { return in_flight_iteration_; }
  /// Set when Cancel() arrived while its iteration was in flight.
  bool cancel_requested() const { return pending_cancel_ != FinishCause::kNone; }
  FinishCause pending_cancel_cause() const { return pending_cancel_; }
  /// True once it was part of a plan: the workers hold state for it and must be told to
  /// release it.
  bool sent_to_engine() const { return num_iterations_scheduled_ > 0; }
  absl::Time arrival_time() const { return arrival_time_; }
  FinishCause finish_cause() const { return finish_cause_; }

  /// QUEUED → WAITING_NEXT_ITERATION. The caller reserved reservation() slots.
  void Admit(absl::Time now);
  /// WAITING_NEXT_ITERATION → RUNNING; returns this request's entry of the plan (the full
  /// record on its first schedule, the diff afterwards).
  [[nodiscard]] ScheduledRequest StartIteration(IterationId iteration_id);
  /// RUNNING → WAITING_NEXT_ITERATION with one more generated token. Returns the cause that
  /// ends the request with this token (kNone when it continues); the caller then calls
  /// Finish(). Stop/EOS tokens count only after min_new_tokens.
  [[nodiscard]] FinishCause CompleteIteration(const SampledToken& token, absl::Time now);
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
  int64_t reservation_;
  absl::Time arrival_time_;

  RequestState state_ = RequestState::kQueued;
  int32_t num_generated_ = 0;
  int32_t last_token_id_ = 0;
  int64_t num_iterations_scheduled_ = 0;
  int64_t num_iterations_completed_ = 0;
  std::optional<IterationId> in_flight_iteration_;
  FinishCause pending_cancel_ = FinishCause::kNone;
  FinishCause finish_cause_ = FinishCause::kNone;
  std::string error_message_;
  absl::StatusCode error_code_ = absl::StatusCode::kInternal;
  std::optional<int32_t> matched_stop_token_id_;
  std::optional<absl::Time> admitted_time_;
  std::optional<absl::Time> first_token_time_;
};

}  // namespace orca::sched
