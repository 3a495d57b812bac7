#pragma once
/// What a caller submits to the scheduler: one tokenized generation request.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/common/sampling_limits.h"
#include "core/common/sampling_params.h"

namespace orca::sched {

/// Bound on |RequestSpec::priority|; keeps priority × aging far from overflowing. The
/// parameter table's (limits::kPriority, core/common/sampling_limits.h), which every API
/// surface checks too.
inline constexpr int32_t kMaxPriority = static_cast<int32_t>(limits::kPriority.max);
static_assert(limits::kPriority.min == -limits::kPriority.max, "priorities are symmetric around 0");

/// Plain input record for Scheduler::Submit (the wire form is orca.v1.GenerateRequest).
/// Validated by Submit; every violation is an InvalidArgument naming the field.
struct RequestSpec {
  /// The caller's id (gateway request id). Optional; when non-empty it must be unique among
  /// unfinished requests and can be looked up with Scheduler::FindRequest.
  std::string caller_id;
  /// Prompt token ids; at least one, each >= 0 (and < vocab_size when the scheduler knows it).
  std::vector<int32_t> prompt_token_ids;
  /// Upper bound on generated tokens (>= 1). Capped by the model context when the prompt plus
  /// this exceed it; the request then finishes with FinishCause::kContextLimit.
  int32_t max_new_tokens = 16;
  /// Stop and EOS tokens are ignored until this many tokens were generated (0..max_new_tokens).
  int32_t min_new_tokens = 0;
  SamplingParams sampling;
  /// Caller's stop tokens (in addition to the model's EOS); honoured even with ignore_eos.
  std::vector<int32_t> stop_token_ids;
  /// The model's EOS ids (end-of-sequence); ignored when ignore_eos is set.
  std::vector<int32_t> eos_token_ids;
  bool ignore_eos = false;
  /// Scheduling priority (vLLM's `priority`): lower values are served first with
  /// SchedulingOrder::kPriority, ignored with kFcfs. In [-kMaxPriority, kMaxPriority].
  int32_t priority = 0;
  /// Absolute deadline; InfiniteFuture() = none. See Scheduler::ExpireDeadlines.
  absl::Time deadline = absl::InfiniteFuture();
};

}  // namespace orca::sched
