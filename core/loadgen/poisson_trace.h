#pragma once
/// Synthetic request traces (paper §6.2): Poisson arrivals, uniform prompt and output lengths.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace orca::loadgen {

/// The paper's trace shape: Poisson arrivals at `arrival_rate` requests/s, prompt length
/// U(32, 512) and max new tokens U(1, 128) (both inclusive), every request generating
/// exactly its max new tokens (no early EOS).
struct TraceOptions {
  uint64_t seed = 1;
  /// Requests per second (> 0).
  double arrival_rate = 1.0;
  int32_t num_requests = 1000;
  int32_t min_prompt_tokens = 32;
  int32_t max_prompt_tokens = 512;
  int32_t min_new_tokens = 1;
  int32_t max_new_tokens = 128;
};

/// A run of prompt tokens named by a key: equal keys stand for identical tokens (a shared
/// system prompt, an earlier turn of the same conversation), so a prefix cache can reuse them.
struct PromptSegment {
  uint64_t key = 0;
  int32_t num_tokens = 0;
};

struct TraceRequest {
  /// Offset from the start of the trace; non-decreasing along the trace.
  absl::Duration arrival;
  int32_t num_prompt_tokens = 0;
  int32_t max_new_tokens = 0;
  /// The prompt's structure, summing to num_prompt_tokens; empty = tokens unique to the
  /// request (no shared prefix).
  std::vector<PromptSegment> segments = {};
};

/// Deterministic for a given TraceOptions on every platform (own generator and
/// distributions, not <random>'s implementation-defined ones). The lengths depend on the
/// seed only, not on the rate, so a sweep over rates replays the same requests faster.
/// INVALID_ARGUMENT names the bad field.
absl::StatusOr<std::vector<TraceRequest>> GeneratePoissonTrace(const TraceOptions& options);

}  // namespace orca::loadgen
