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

void SimulatedEngine::ExtendHashes(LiveRequest& live) {
  while (live.prefix_hash.size() < live.tokens.size()) {
    const size_t p = live.prefix_hash.size();
    const uint64_t parent = p == 0 ? 0x5eed : live.prefix_hash[p - 1];
    SplitMix64 mix(parent ^ (static_cast<uint64_t>(static_cast<uint32_t>(live.tokens[p])) << 1));
    live.prefix_hash.push_back(mix.Next());
  }
}

int64_t SimulatedEngine::SlotOf(const LiveRequest& live, int32_t position) const {
  const int32_t bs = live.block_size;
  return static_cast<int64_t>(live.blocks[position / bs]) * bs + position % bs;
}

absl::Status SimulatedEngine::ValidateTable(const sched::ScheduledRequest& request, const LiveRequest& live,
                                            int32_t num_old_blocks) const {
  const sched::RequestId id = request.request_id;
  const int32_t bs = live.block_size;
  const int32_t end = request.start_position + static_cast<int32_t>(request.input_token_ids.size());
  if (static_cast<int64_t>(live.blocks.size()) * bs < end) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " block table (", live.blocks.size(),
                                                      " blocks of ", bs, ") does not cover position ", end - 1));
  }
  const int64_t num_blocks = options_.n_slots > 0 ? options_.n_slots / bs : INT32_MAX;
  absl::flat_hash_set<int32_t> seen;
  for (int32_t b : live.blocks) {
    if (b < 0 || b >= num_blocks) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " block ", b, " outside the pool"));
    }
    if (!seen.insert(b).second) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " holds block ", b, " twice"));
    }
  }
  // Reads: every earlier position must hold exactly this request's prefix.
  for (int32_t p = 0; p < request.start_position; ++p) {
    auto it = slot_content_.find(SlotOf(live, p));
    if (it == slot_content_.end() || it->second != live.prefix_hash[p]) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " reads position ", p, " from block ",
                                                        live.blocks[p / bs], ", which does not hold its prefix"));
    }
  }
  // Writes: only into blocks no other request's table holds.
  for (int32_t p = request.start_position; p < end; ++p) {
    const int32_t b = live.blocks[p / bs];
    auto refs = block_refs_.find(b);
    const int32_t own = p / bs < num_old_blocks ? 1 : 0;  // its own reference, already counted
    const int32_t others = (refs == block_refs_.end() ? 0 : refs->second) - own;
    if (others > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("request ", id, " writes position ", p, " into block ", b, ", which another request holds"));
    }
  }
  return absl::OkStatus();
}

absl::Status SimulatedEngine::Validate(const sched::ScheduledRequest& request, const LiveRequest* live) const {
  const sched::RequestId id = request.request_id;
  const auto n = static_cast<int32_t>(request.input_token_ids.size());
  if (n < 1) return absl::FailedPreconditionError(absl::StrCat("request ", id, " has no input tokens"));
  LiveRequest fresh;
  if (request.new_request.has_value()) {
    const sched::NewRequestData& data = *request.new_request;
    if (live != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("request ", id, " sent as new while the workers still hold it"));
    }
    if (request.phase != sched::Phase::kInitiation || data.prompt_token_ids.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " first schedule is not an initiation"));
    }
    fresh.kv_reservation_slots = data.kv_reservation_slots;
    fresh.tokens = data.prompt_token_ids;
    fresh.tokens.insert(fresh.tokens.end(), data.output_token_ids.begin(), data.output_token_ids.end());
    fresh.block_size = data.kv_block_size;
    fresh.blocks = request.new_block_ids;
    ExtendHashes(fresh);
    if (static_cast<int32_t>(fresh.tokens.size()) >= data.kv_reservation_slots) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " tokens (", fresh.tokens.size(),
                                                        ") leave no room in kv_reservation_slots (",
                                                        data.kv_reservation_slots, ")"));
    }
    if (data.kv_block_size > 0 && options_.kv_block_size > 0 && data.kv_block_size != options_.kv_block_size) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " uses KV blocks of ", data.kv_block_size,
                                                        " tokens, the workers' are ", options_.kv_block_size));
    }
    if (request.start_position != 0 && (data.kv_block_size == 0 || request.start_position % data.kv_block_size != 0)) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " starts at ", request.start_position,
                                                        " without a cached prefix of whole blocks"));
    }
    live = &fresh;
  } else if (live == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " scheduled without sched::NewRequestData and unknown to workers"));
  } else if (request.start_position != live->next_position) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " at position ", request.start_position,
                                                      " but its KV ends at ", live->next_position));
  }
  const int32_t end = request.start_position + n;
  if (end > static_cast<int32_t>(live->tokens.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " computes up to position ", end, " of its ", live->tokens.size(), " tokens"));
  }
  for (int32_t i = 0; i < n; ++i) {
    if (request.input_token_ids[i] != live->tokens[request.start_position + i]) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " fed token ", request.input_token_ids[i],
                                                        " at position ", request.start_position + i, " which holds ",
                                                        live->tokens[request.start_position + i]));
    }
  }
  if (request.sample != (end == static_cast<int32_t>(live->tokens.size()))) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id,
                                                      (request.sample ? " samples" : " does not sample"),
                                                      " after position ", end - 1, " of ", live->tokens.size()));
  }
  if (end > live->kv_reservation_slots) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", id, " position ", end - 1, " beyond its reservation of ", live->kv_reservation_slots));
  }
  if (live->block_size == 0) {
    if (!request.new_block_ids.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("request ", id, " got block ids without a block table"));
    }
    return absl::OkStatus();
  }
  if (live == &fresh) return ValidateTable(request, fresh, 0);
  LiveRequest grown = *live;
  grown.blocks.insert(grown.blocks.end(), request.new_block_ids.begin(), request.new_block_ids.end());
  return ValidateTable(request, grown, static_cast<int32_t>(live->blocks.size()));
}

SimulatedEngine::LiveRequest& SimulatedEngine::Admit(const sched::ScheduledRequest& request) {
  const sched::NewRequestData& data = *request.new_request;
  LiveRequest& live = live_[request.request_id];
  live.kv_reservation_slots = data.kv_reservation_slots;
  live.num_prompt = static_cast<int32_t>(data.prompt_token_ids.size());
  live.tokens = data.prompt_token_ids;
  live.tokens.insert(live.tokens.end(), data.output_token_ids.begin(), data.output_token_ids.end());
  ExtendHashes(live);
  live.block_size = data.kv_block_size;
  if (live.block_size == 0) num_allocated_slots_ += data.kv_reservation_slots;
  return live;
}

void SimulatedEngine::Forget(sched::RequestId id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  const LiveRequest& live = it->second;
  if (live.block_size == 0) {
    num_allocated_slots_ -= live.kv_reservation_slots;
  } else {
    // The slots keep their content: a cached prefix outlives the request that wrote it.
    for (int32_t b : live.blocks) {
      if (--block_refs_[b] == 0) {
        block_refs_.erase(b);
        num_allocated_slots_ -= live.block_size;
      }
    }
  }
  live_.erase(it);
}

absl::StatusOr<StepOutcome> SimulatedEngine::Run(const sched::IterationPlan& plan) {
  ORCA_RETURN_IF_ERROR(Release(plan.released_request_ids));
  if (plan.requests.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("iteration ", plan.iteration_id, " is empty"));
  }
  absl::flat_hash_set<sched::RequestId> seen;
  int64_t new_slots = 0;
  for (const sched::ScheduledRequest& request : plan.requests) {
    if (!seen.insert(request.request_id).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("request ", request.request_id, " appears twice in iteration ", plan.iteration_id));
    }
    auto it = live_.find(request.request_id);
    ORCA_RETURN_IF_ERROR(Validate(request, it == live_.end() ? nullptr : &it->second));
    if (request.new_request.has_value() && request.new_request->kv_block_size == 0) {
      new_slots += request.new_request->kv_reservation_slots;
    }
  }
  if (options_.n_slots > 0 && num_allocated_slots_ + new_slots > options_.n_slots) {
    return absl::ResourceExhaustedError(absl::StrCat("iteration ", plan.iteration_id, " needs ", new_slots,
                                                     " more KV slots; ", num_allocated_slots_, " of ", options_.n_slots,
                                                     " already allocated"));
  }

  StepOutcome outcome;
  outcome.results.reserve(plan.requests.size());
  for (const sched::ScheduledRequest& request : plan.requests) {
    LiveRequest& live = request.new_request.has_value() ? Admit(request) : live_[request.request_id];
    for (int32_t b : request.new_block_ids) {
      live.blocks.push_back(b);
      if (block_refs_[b]++ == 0) num_allocated_slots_ += live.block_size;
    }
    const int32_t end = request.start_position + static_cast<int32_t>(request.input_token_ids.size());
    if (live.block_size > 0) {
      for (int32_t p = request.start_position; p < end; ++p) slot_content_[SlotOf(live, p)] = live.prefix_hash[p];
    }
    live.next_position = end;
    if (!request.sample) continue;
    const auto index = static_cast<int32_t>(live.tokens.size()) - live.num_prompt;
    const int32_t token =
        options_.token_fn ? options_.token_fn(request.request_id, index) : DefaultToken(request.request_id, index);
    live.tokens.push_back(token);
    ExtendHashes(live);
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
  for (sched::RequestId id : request_ids) Forget(id);
  return absl::OkStatus();
}

}  // namespace orca::sim
