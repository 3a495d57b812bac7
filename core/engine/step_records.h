#pragma once
/// Plain records that cross the engine boundary, one pipeline stage's view of
/// one iteration (paper §4.1's control message, as the engine consumes it):
///  - StepInput: what Engine::Step runs; built from the scheduler's
///    sched::IterationPlan in process, or from orca.v1.ControlMessage on a worker.
///  - StepOutput: what it returns; the last stage's SequenceSamples become
///    sched::RequestResult / orca.v1.IterationResult.
/// A light header on purpose: converters include it without the model runner.
/// The scheduler's records (core/sched/scheduler_output.h) carry the same
/// iteration with its own names; services/common/control_convert maps them.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "core/common/sampling_params.h"

namespace orca::engine {

/// The id of the throwaway sequence that carries a request's prompt padding (the
/// FasterTransformer baseline, sched::ScheduledRequest::num_padding_tokens): the padding
/// tokens run through every layer like any prompt, sample nothing, and their KV lives until
/// the request itself is released (Engine::Release frees both). Scheduler ids never reach
/// the top bit.
constexpr uint64_t PaddingSequenceId(uint64_t request_id) { return request_id | (uint64_t{1} << 63); }

/// Sent with a sequence the first time a stage sees it (again after the
/// scheduler preempted it): every stage sets up its KV — reserves
/// `kv_reservation_slots` slots, or takes the scheduler's block table — and the
/// last stage creates its sampler.
struct SequenceSetup {
  int32_t kv_reservation_slots = 0;  ///< KV reservation (or bound): prompt + max new tokens, block-rounded
  SamplingParams sampling;
  std::vector<int32_t> prompt_token_ids;  ///< for the repetition penalty
  /// Tokens generated before a preemption: the sampler resumes from them
  /// (penalty counts; a seeded generator skips the draws already made).
  std::vector<int32_t> output_token_ids = {};
  /// > 0: the scheduler owns the block table (StepSequence::block_ids), in
  /// blocks of this many tokens, which must be this stage's block size; the
  /// positions before the first step's start_position are already in them (a
  /// prefix-cache hit). 0: this stage reserves kv_reservation_slots slots itself.
  int32_t kv_block_size = 0;
};

/// One sequence (request) of a step.
struct StepSequence {
  uint64_t request_id = 0;
  std::vector<int32_t> token_ids;  ///< input tokens this iteration (ids are unused past stage 0)
  int32_t start_position = 0;
  bool sample = true;  ///< false: a prompt chunk that does not reach the end (no token)
  /// Present the first time the sequence is scheduled only (and after a preemption).
  std::optional<SequenceSetup> new_request;
  /// Scheduler-owned tables only: KV blocks appended to the table this step.
  std::vector<int32_t> block_ids = {};
};

/// One iteration of one stage.
struct StepInput {
  uint64_t iteration_id = 0;
  std::vector<StepSequence> seqs;      ///< batch order = flattened token order
  std::vector<uint64_t> released_ids;  ///< applied before this iteration's reservations
};

/// One logprob: a token and its log-probability under the raw model distribution.
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

/// One sampled token.
struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;  ///< filled when logprobs or top_logprobs were asked
  std::vector<TokenLogprob> top_logprobs;
  /// Prompt logprobs only: token_id's 1-based rank in the distribution (0 = not computed).
  int32_t rank = 0;
};

/// The token the last stage sampled for one sequence.
struct SequenceSample {
  uint64_t request_id = 0;
  SampleResult sample;
};

/// Prompt logprobs of one sequence computed this step (SamplingParams::prompt_logprobs):
/// entry i is the prompt token at position first_position + i, its logprob given the
/// tokens before it, and the top alternatives there. A prefill in chunks yields one
/// record per chunk; a recomputed (preempted) request yields its positions again.
struct PromptLogprobs {
  uint64_t request_id = 0;
  int32_t first_position = 1;  ///< >= 1: the first prompt token has no logprob
  std::vector<SampleResult> tokens;
};

/// Where one shard's forward pass spent its time.
struct ForwardTimings {
  int64_t compute_micros = 0;
  int64_t comm_micros = 0;  ///< time inside tensor-parallel all-reduces
};

/// What one step returns.
/// A request the engine cannot serve although the step ran (e.g. its structured-output
/// constraint cannot be built): it gets no token, and the scheduler ends it with `status`;
/// the other requests of the batch go on.
struct RequestFailure {
  uint64_t request_id = 0;
  absl::Status status;
};

struct StepOutput {
  std::vector<SequenceSample> samples;   ///< last stage: one per sampling sequence, in batch order
  std::vector<RequestFailure> failures;  ///< last stage: requests that get no token, and why
  std::vector<float> hidden;             ///< other stages: [ΣL, hidden] for the next stage
  std::vector<float> logits;             ///< last stage with Engine::Options::keep_logits: [sampled, vocab]
  /// Last stage: the prompt positions this step computed for requests that asked.
  std::vector<PromptLogprobs> prompt_logprobs;
  ForwardTimings timings;
  void Clear() {
    samples.clear();
    failures.clear();
    prompt_logprobs.clear();
    hidden.clear();
    logits.clear();
    timings = {};
  }
};

}  // namespace orca::engine
