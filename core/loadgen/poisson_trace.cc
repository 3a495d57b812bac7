#include "core/loadgen/poisson_trace.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/split_mix64.h"

namespace orca::loadgen {

absl::StatusOr<std::vector<TraceRequest>> GeneratePoissonTrace(const TraceOptions& options) {
  if (!(options.arrival_rate > 0.0) || !std::isfinite(options.arrival_rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("arrival_rate must be a positive number (got ", options.arrival_rate, ")"));
  }
  if (options.num_requests < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_requests must be >= 0 (got ", options.num_requests, ")"));
  }
  if (options.min_prompt_tokens < 1 || options.max_prompt_tokens < options.min_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt lengths need 1 <= min_prompt_tokens <= max_prompt_tokens (got ", options.min_prompt_tokens,
                     ", ", options.max_prompt_tokens, ")"));
  }
  if (options.min_new_tokens < 1 || options.max_new_tokens < options.min_new_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("output lengths need 1 <= min_new_tokens <= max_new_tokens (got ",
                                                   options.min_new_tokens, ", ", options.max_new_tokens, ")"));
  }
  // Separate streams: the arrival process must not shift the lengths when the rate changes.
  SplitMix64 arrivals(options.seed * 2 + 1);
  SplitMix64 lengths(options.seed * 2 + 2);
  std::vector<TraceRequest> trace;
  trace.reserve(options.num_requests);
  double t = 0.0;
  for (int32_t i = 0; i < options.num_requests; ++i) {
    t += arrivals.NextExponential(options.arrival_rate);
    TraceRequest request;
    request.arrival = absl::Seconds(t);
    request.num_prompt_tokens =
        static_cast<int32_t>(lengths.NextInt(options.min_prompt_tokens, options.max_prompt_tokens));
    request.max_new_tokens = static_cast<int32_t>(lengths.NextInt(options.min_new_tokens, options.max_new_tokens));
    trace.push_back(request);
  }
  return trace;
}

}  // namespace orca::loadgen
