#include "core/sched/request.h"

#include <algorithm>
#include <utility>

#include "core/common/logging.h"

namespace orca::sched {
namespace {

bool Contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

Request::Request(RequestId id, RequestSpec spec, int32_t max_new_tokens, int64_t reservation, absl::Time arrival_time)
    : id_(id),
      spec_(std::move(spec)),
      max_new_tokens_(max_new_tokens),
      reservation_(reservation),
      arrival_time_(arrival_time) {}

void Request::Admit(absl::Time now) {
  ORCA_CHECK(state_ == RequestState::kQueued) << "request " << id_ << " admitted in state " << RequestStateName(state_);
  state_ = RequestState::kWaitingNextIteration;
  admitted_time_ = now;
}

ScheduledRequest Request::StartIteration(IterationId iteration_id) {
  ORCA_CHECK(state_ == RequestState::kWaitingNextIteration)
      << "request " << id_ << " scheduled in state " << RequestStateName(state_);
  ScheduledRequest entry;
  entry.request_id = id_;
  entry.phase = next_phase();
  if (entry.phase == Phase::kInitiation) {
    entry.input_token_ids = spec_.prompt_token_ids;
    entry.start_position = 0;
    NewRequestData data;
    data.max_tokens = static_cast<int32_t>(reservation_);
    data.sampling = spec_.sampling;
    data.prompt_token_ids = spec_.prompt_token_ids;
    entry.new_request = std::move(data);
  } else {
    // The last generated token is fed back at the position right after everything
    // already in the KV cache: prompt + (generated - 1).
    entry.input_token_ids = {last_token_id_};
    entry.start_position = num_prompt_tokens() + num_generated_ - 1;
  }
  state_ = RequestState::kRunning;
  in_flight_iteration_ = iteration_id;
  ++num_iterations_scheduled_;
  return entry;
}

FinishCause Request::CompleteIteration(const SampledToken& token, absl::Time now) {
  ORCA_CHECK(state_ == RequestState::kRunning)
      << "request " << id_ << " completed an iteration in state " << RequestStateName(state_);
  state_ = RequestState::kWaitingNextIteration;
  in_flight_iteration_.reset();
  ++num_iterations_completed_;
  ++num_generated_;
  last_token_id_ = token.token_id;
  if (!first_token_time_.has_value()) first_token_time_ = now;

  if (num_generated_ >= spec_.min_new_tokens) {
    if (Contains(spec_.stop_token_ids, token.token_id)) {
      matched_stop_token_id_ = token.token_id;
      return FinishCause::kStopToken;
    }
    if (!spec_.ignore_eos && Contains(spec_.eos_token_ids, token.token_id)) {
      matched_stop_token_id_ = token.token_id;
      return FinishCause::kEosToken;
    }
  }
  if (num_generated_ >= spec_.max_new_tokens) return FinishCause::kMaxNewTokens;
  if (num_generated_ >= max_new_tokens_) return FinishCause::kContextLimit;
  return FinishCause::kNone;
}

void Request::RequestCancel(FinishCause cause) {
  ORCA_CHECK(state_ == RequestState::kRunning)
      << "cancel mark on request " << id_ << " in state " << RequestStateName(state_);
  if (pending_cancel_ == FinishCause::kNone) pending_cancel_ = cause;
}

void Request::Finish(FinishCause cause, std::string error_message, absl::StatusCode error_code) {
  ORCA_CHECK(!finished()) << "request " << id_ << " finished twice";
  ORCA_CHECK(cause != FinishCause::kNone) << "request " << id_ << " finished without a cause";
  state_ = FinishedStateFor(cause);
  finish_cause_ = cause;
  error_message_ = std::move(error_message);
  error_code_ = error_code;
  in_flight_iteration_.reset();
}

FinishInfo Request::BuildFinishInfo(absl::Time delivered_at) const {
  FinishInfo info;
  info.state = state_;
  info.cause = finish_cause_;
  info.error_message = error_message_;
  info.error_code = error_code_;
  info.matched_stop_token_id = matched_stop_token_id_;
  info.num_prompt_tokens = num_prompt_tokens();
  info.num_generated_tokens = num_generated_;
  RequestTimings& t = info.timings;
  t.total = delivered_at - arrival_time_;
  t.queue = admitted_time_.value_or(delivered_at) - arrival_time_;
  if (admitted_time_.has_value()) {
    t.prefill = first_token_time_.value_or(delivered_at) - *admitted_time_;
  }
  if (first_token_time_.has_value()) {
    t.decode = delivered_at - *first_token_time_;
    t.ttft = *first_token_time_ - arrival_time_;
  }
  return info;
}

}  // namespace orca::sched
