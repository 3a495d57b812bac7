#include "sim/simulated_engine.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/split_mix64.h"
#include "core/common/status_macros.h"

namespace orca::sim {

absl::StatusOr<std::unique_ptr<SimulatedEngine>> SimulatedEngine::Create(SimulatedEngineOptions options) {
  if (options.cost.num_stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cost.num_stages must be >= 1 (got ", options.cost.num_stages, ")"));
  }
  if (options.n_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat("n_slots must be >= 0 (got ", options.n_slots, ")"));
  }
  if (options.vocab_size < 1 || static_cast<int64_t>(options.avoid_token_ids.size()) >= options.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size (", options.vocab_size, ") must exceed the number of avoided tokens"));
  }
  return std::unique_ptr<SimulatedEngine>(new SimulatedEngine(std::move(options)));
}

int32_t SimulatedEngine::DefaultToken(sched::RequestId request_id, int32_t index) const {
  SplitMix64 rng(request_id * 0x100000001b3ULL + static_cast<uint64_t>(index));
  for (;;) {
    const auto token = static_cast<int32_t>(rng.NextInt(0, options_.vocab_size - 1));
    const auto& avoid = options_.avoid_token_ids;
    if (std::find(avoid.begin(), avoid.end(), token) == avoid.end()) return token;
  }
}

absl::Status SimulatedEngine::Validate(const sched::ScheduledRequest& request, const LiveRequest* live) const {
  const sched::RequestId id = request.request_id;
  const auto num_inputs = static_cast<int32_t>(request.input_token_ids.size());
  if (request.new_request.has_value()) {
    const sched::NewRequestData& data = *request.new_request;
    if (live != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("request ", id, " sent as new while the workers still hold it"));
    }
    if (request.phase != sched::Phase::kInitiation || request.start_position != 0 ||
        request.input_token_ids != data.prompt_token_ids) {
      return absl::FailedPreconditionError(
          absl::StrCat("request ", id, " first schedule is not the initiation of its prompt"));
    }
    if (num_inputs < 1 || num_inputs >= data.max_tokens) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " prompt (", num_inputs,
                                                        ") leaves no room in max_tokens (", data.max_tokens, ")"));
    }
    return absl::OkStatus();
  }
  if (live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " scheduled without NewRequestData and unknown to workers"));
  }
  if (request.phase != sched::Phase::kIncrement || num_inputs != 1) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " must be an increment of one token"));
  }
  if (request.start_position != live->next_position) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " at position ", request.start_position,
                                                      " but its KV ends at ", live->next_position));
  }
  if (request.input_token_ids[0] != live->last_token_id) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " fed token ", request.input_token_ids[0],
                                                      " but generated ", live->last_token_id));
  }
  if (request.start_position + 1 > live->max_tokens) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " position ", request.start_position,
                                                      " beyond its reservation of ", live->max_tokens));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepOutcome> SimulatedEngine::Run(const sched::IterationPlan& plan) {
  ORCA_RETURN_IF_ERROR(Release(plan.released_request_ids));
  if (plan.requests.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("iteration ", plan.iteration_id, " is empty"));
  }
  absl::flat_hash_set<sched::RequestId> seen;
  for (const sched::ScheduledRequest& request : plan.requests) {
    if (!seen.insert(request.request_id).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("request ", request.request_id, " appears twice in iteration ", plan.iteration_id));
    }
    auto it = live_.find(request.request_id);
    ORCA_RETURN_IF_ERROR(Validate(request, it == live_.end() ? nullptr : &it->second));
  }

  StepOutcome outcome;
  outcome.results.reserve(plan.requests.size());
  for (const sched::ScheduledRequest& request : plan.requests) {
    LiveRequest* live;
    if (request.new_request.has_value()) {
      const int32_t max_tokens = request.new_request->max_tokens;
      if (options_.n_slots > 0 && num_allocated_slots_ + max_tokens > options_.n_slots) {
        return absl::ResourceExhaustedError(absl::StrCat("request ", request.request_id, " needs ", max_tokens,
                                                         " KV slots; ", num_allocated_slots_, " of ", options_.n_slots,
                                                         " already allocated"));
      }
      num_allocated_slots_ += max_tokens;
      live = &live_[request.request_id];
      live->max_tokens = max_tokens;
    } else {
      live = &live_[request.request_id];
    }
    live->next_position = request.start_position + static_cast<int32_t>(request.input_token_ids.size());
    const int32_t token = options_.token_fn ? options_.token_fn(request.request_id, live->num_generated)
                                            : DefaultToken(request.request_id, live->num_generated);
    ++live->num_generated;
    live->last_token_id = token;
    sched::RequestResult& result = outcome.results.emplace_back();
    result.request_id = request.request_id;
    result.token.token_id = token;
    result.token.logprob = -1.0f;
  }
  outcome.elapsed = options_.cost.IterationTime(plan);
  ++num_iterations_;
  return outcome;
}

absl::Status SimulatedEngine::Release(absl::Span<const sched::RequestId> request_ids) {
  // Unknown ids are ignored, as the workers do (a request may be released twice after a
  // pipeline restart).
  for (sched::RequestId id : request_ids) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    num_allocated_slots_ -= it->second.max_tokens;
    live_.erase(it);
  }
  return absl::OkStatus();
}

}  // namespace orca::sim
