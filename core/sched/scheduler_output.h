#pragma once
/// Plain records that cross the scheduler boundary (vLLM's sched/output.py):
///  - IterationPlan: what the engine runs next; becomes orca.v1.ControlMessage.
///  - RequestResult: what the engine returns per request; from orca.v1.IterationResult.
///  - RequestEvent: what the caller streams to clients; becomes orca.v1.GenerateResponse.
/// No invariants live here; they are values.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/common/sampling_params.h"
#include "core/sched/request_state.h"

namespace orca::sched {

/// Sent the first time a request is scheduled (vLLM's scheduled_new_reqs), and again when
/// it is readmitted after a preemption: every stage sets up its KV (reserves
/// `kv_reservation_slots` slots, or takes the scheduler's block table) and the last stage
/// creates its sampler.
struct NewRequestData {
  /// The request's KV reservation (Request::kv_reservation_slots): prompt + max new tokens
  /// (capped by the model context), rounded up to the scheduler's kv_block_size. What the
  /// workers reserve when they allocate, else a bound no position of this request ever
  /// reaches.
  int32_t kv_reservation_slots = 0;
  SamplingParams sampling;
  /// The whole prompt (for repetition penalties at the last stage).
  std::vector<int32_t> prompt_token_ids;
  /// Tokens it generated before a preemption (empty on its first schedule): the last
  /// stage's sampler resumes from them (penalties, seeded generator).
  std::vector<int32_t> output_token_ids;
  /// > 0: the scheduler owns this request's block table (paged KV or prefix caching) in
  /// blocks of this many tokens, sent in ScheduledRequest::new_block_ids; every stage must
  /// use the same block size. 0: the workers reserve kv_reservation_slots slots themselves.
  int32_t kv_block_size = 0;
};

/// One request of one iteration. Requests scheduled before carry only the diff: the
/// tokens of this iteration, their position and the KV blocks added to their table.
struct ScheduledRequest {
  RequestId request_id = 0;
  Phase phase = Phase::kInitiation;
  /// Input tokens of this iteration: the whole prompt (or the next chunk of it, with
  /// chunked prefill) at initiation, the last generated token at increment.
  std::vector<int32_t> input_token_ids;
  /// Position of input_token_ids[0]: 0 for a whole prompt; the end of the cached prefix on a
  /// prefix-cache hit; where the previous chunk ended for a later chunk.
  int32_t start_position = 0;
  /// The last stage samples a token for it: false for a prompt chunk that does not reach
  /// the end of the prompt.
  bool sample = true;
  /// KV blocks appended to its block table for this iteration (scheduler-owned tables only:
  /// NewRequestData::kv_block_size > 0). On a new request, its whole initial table,
  /// starting with the prefix-cache hits.
  std::vector<int32_t> new_block_ids;
  /// Present when the workers do not hold the request: its first schedule, and its first
  /// schedule after a preemption.
  std::optional<NewRequestData> new_request;
  /// The FasterTransformer baseline only (0 otherwise): at its initiation the engine also
  /// computes this many padding tokens for the request — its prompt padded to the batch's
  /// longest. They are real work in the flattened batch (every stage runs them through
  /// every layer; engine::PaddingSequenceId) whose outputs are thrown away; their KV is
  /// held until the request is released, as a padded batch holds it.
  int32_t num_padding_tokens = 0;
};

/// One iteration for the engine (paper §4.2, the batch Algorithm 1 selects).
struct IterationPlan {
  IterationId iteration_id = 0;
  /// Batch order = flattened token order for selective batching.
  std::vector<ScheduledRequest> requests;
  /// Requests whose KV (and sampler state) every stage must free, finished, cancelled or
  /// preempted since the previous plan. Workers apply these before allocating for new requests of
  /// the same plan (the scheduler already reused their slots) and ignore unknown ids.
  std::vector<RequestId> released_request_ids;

  /// Tokens in the flattened batch (sum of input_token_ids sizes), padding not counted.
  int64_t NumTokens() const {
    int64_t n = 0;
    for (const ScheduledRequest& r : requests) n += static_cast<int64_t>(r.input_token_ids.size());
    return n;
  }
  /// Padding tokens the engine computes besides (the FasterTransformer baseline).
  int64_t NumPaddingTokens() const {
    int64_t n = 0;
    for (const ScheduledRequest& r : requests) n += r.num_padding_tokens;
    return n;
  }
};

struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

/// One generated token as the engine's last stage samples it.
struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TopLogprob> top_logprobs;
  /// Prompt logprobs only: the token's 1-based rank in the distribution (0 = not computed).
  int32_t rank = 0;
};

/// The engine's output for one request of one iteration: the token it sampled and/or the
/// prompt logprobs it computed (SamplingParams::prompt_logprobs), one record per request.
struct RequestResult {
  RequestId request_id = 0;
  SampledToken token;
  /// False for a record that carries prompt logprobs only (a prompt chunk that does not sample).
  bool has_token = true;
  /// Prompt logprobs: entry i scores the prompt token at position prompt_first_position + i.
  /// A recomputed request repeats positions; the scheduler reports each once.
  int32_t prompt_first_position = 0;
  std::vector<SampledToken> prompt_logprobs;
  /// Not OK: the engine cannot serve this request (no token); it finishes with this error.
  absl::Status error;
};

/// Per-request timings reported when it finishes. Durations not reached are zero
/// (e.g. a request cancelled while queued has only queue time).
struct RequestTimings {
  absl::Duration queue;    ///< Arrival → admission (first schedule).
  absl::Duration prefill;  ///< Admission → first token returned.
  absl::Duration decode;   ///< First token → finish.
  absl::Duration ttft;     ///< Arrival → first token returned.
  absl::Duration total;    ///< Arrival → finish (what clients see as latency).
};

/// How a request ended.
struct FinishInfo {
  RequestState state = RequestState::kFinishedError;
  FinishCause cause = FinishCause::kNone;
  /// For kFinishedError: what failed, and its status code (kUnavailable when
  /// the pipeline failed and a retry may well succeed; kInternal otherwise).
  std::string error_message;
  absl::StatusCode error_code = absl::StatusCode::kInternal;
  /// For kStopToken / kEosToken: the token that stopped it.
  std::optional<int32_t> matched_stop_token_id;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  RequestTimings timings;
};

/// What the caller streams for one request after a scheduler call: the new tokens and,
/// on its last event, how it finished. A request produces exactly one event with `finish`.
struct RequestEvent {
  RequestId request_id = 0;
  std::string caller_id;
  std::vector<SampledToken> new_tokens;
  /// Prompt logprobs not reported before, in position order from position 1 (the first prompt
  /// token has none); only for requests whose sampling asks for prompt_logprobs.
  std::vector<SampledToken> new_prompt_logprobs;
  std::optional<FinishInfo> finish;
};

}  // namespace orca::sched
