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

Request::Request(RequestId id, RequestSpec spec, int32_t max_new_tokens, int64_t kv_reservation_slots,
                 absl::Time arrival_time)
    : id_(id),
      spec_(std::move(spec)),
      max_new_tokens_(max_new_tokens),
      kv_reservation_slots_(kv_reservation_slots),
      arrival_time_(arrival_time),
      token_ids_(spec_.prompt_token_ids) {}

void Request::Admit(absl::Time now, int32_t num_cached_tokens) {
  ORCA_CHECK(state_ == RequestState::kQueued) << "request " << id_ << " admitted in state " << RequestStateName(state_);
  ORCA_CHECK(num_cached_tokens >= 0 && num_cached_tokens < num_tokens())
      << "request " << id_ << " admitted with " << num_cached_tokens << " cached of " << num_tokens() << " tokens";
  state_ = RequestState::kWaitingNextIteration;
  num_computed_ = num_cached_tokens;
  num_cached_ = num_cached_tokens;
  prefilling_ = true;
  if (!admitted_time_.has_value()) admitted_time_ = now;
}

ScheduledRequest Request::StartIteration(IterationId iteration_id, int32_t num_tokens,
                                         std::vector<int32_t> new_block_ids, int32_t kv_block_size) {
  ORCA_CHECK(state_ == RequestState::kWaitingNextIteration)
      << "request " << id_ << " scheduled in state " << RequestStateName(state_);
  const int32_t uncomputed = num_uncomputed_tokens();
  if (num_tokens == 0) num_tokens = uncomputed;
  ORCA_CHECK(num_tokens >= 1 && num_tokens <= uncomputed)
      << "request " << id_ << " scheduled for " << num_tokens << " tokens with " << uncomputed << " uncomputed";
  ORCA_CHECK(prefilling_ || num_tokens == 1) << "request " << id_ << " decodes " << num_tokens << " tokens";
  ScheduledRequest entry;
  entry.request_id = id_;
  entry.phase = next_phase();
  // The chunk [num_computed_, num_computed_ + num_tokens): at increment, the last generated
  // token at the position right after everything already in the KV cache.
  entry.input_token_ids.assign(token_ids_.begin() + num_computed_, token_ids_.begin() + num_computed_ + num_tokens);
  entry.start_position = num_computed_;
  entry.sample = num_tokens == uncomputed;
  entry.new_block_ids = std::move(new_block_ids);
  if (!on_workers_) {
    NewRequestData data;
    data.kv_reservation_slots = static_cast<int32_t>(kv_reservation_slots_);
    data.sampling = spec_.sampling;
    data.prompt_token_ids = spec_.prompt_token_ids;
    data.output_token_ids.assign(token_ids_.begin() + num_prompt_tokens(), token_ids_.end());
    data.kv_block_size = kv_block_size;
    entry.new_request = std::move(data);
    on_workers_ = true;
  }
  state_ = RequestState::kRunning;
  in_flight_iteration_ = iteration_id;
  in_flight_tokens_ = num_tokens;
  in_flight_samples_ = entry.sample;
  ++num_iterations_scheduled_;
  return entry;
}

void Request::TakeNewPromptLogprobs(int32_t first_position, const std::vector<SampledToken>& logprobs,
                                    std::vector<SampledToken>* out) {
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const int64_t position = static_cast<int64_t>(first_position) + static_cast<int64_t>(i);
    if (position != next_prompt_logprob_position_ || position >= num_prompt_tokens()) continue;
    out->push_back(logprobs[i]);
    ++next_prompt_logprob_position_;
  }
}

void Request::CompleteChunk() {
  ORCA_CHECK(state_ == RequestState::kRunning && !in_flight_samples_)
      << "request " << id_ << " completed a prompt chunk in state " << RequestStateName(state_);
  state_ = RequestState::kWaitingNextIteration;
  in_flight_iteration_.reset();
  ++num_iterations_completed_;
  num_computed_ += in_flight_tokens_;
  in_flight_tokens_ = 0;
}

FinishCause Request::CompleteIteration(const SampledToken& token, absl::Time now) {
  ORCA_CHECK(state_ == RequestState::kRunning && in_flight_samples_)
      << "request " << id_ << " completed an iteration in state " << RequestStateName(state_);
  state_ = RequestState::kWaitingNextIteration;
  in_flight_iteration_.reset();
  ++num_iterations_completed_;
  num_computed_ += in_flight_tokens_;
  in_flight_tokens_ = 0;
  in_flight_samples_ = false;
  prefilling_ = false;
  token_ids_.push_back(token.token_id);
  if (padding_out()) return FinishCause::kNone;  // computed, never counted nor delivered
  ++num_generated_;
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

void Request::BeginPadOut(FinishCause cause) {
  ORCA_CHECK(state_ == RequestState::kWaitingNextIteration && !padding_out() && !prefilling_)
      << "request " << id_ << " pads out in state " << RequestStateName(state_);
  ORCA_CHECK(cause != FinishCause::kNone) << "request " << id_ << " pads out without a cause";
  pad_out_cause_ = cause;
}

void Request::Preempt() {
  ORCA_CHECK(state_ == RequestState::kWaitingNextIteration && !padding_out())
      << "request " << id_ << " preempted in state " << RequestStateName(state_);
  state_ = RequestState::kQueued;
  num_computed_ = 0;
  num_cached_ = 0;
  prefilling_ = true;
  on_workers_ = false;
  ++num_preemptions_;
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
  on_workers_ = false;
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
