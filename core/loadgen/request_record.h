#pragma once
/// What the load driver measured for one request of a trace.

#include <cstdint>
#include <string>
#include <vector>

namespace orca::loadgen {

/// How a request of the trace ended.
enum class RequestOutcome {
  kOk,          ///< The stream ended with [DONE] (or its usage) after at least one token.
  kFailed,      ///< HTTP error, error event, transport error or a malformed stream.
  kUnfinished,  ///< Still streaming when the run hit its time limit (cut off).
  kNotSent,     ///< Its arrival came after the run's time limit.
};

const char* RequestOutcomeName(RequestOutcome outcome);

/// One request. Times are seconds; `*_s` offsets are from the start of the run.
struct RequestRecord {
  int64_t index = 0;          ///< Position in the trace.
  double scheduled_s = 0;     ///< Arrival time in the trace.
  double sent_s = 0;          ///< When the request was handed to the transport.
  int32_t prompt_tokens = 0;  ///< As sent (token-id prompt of exactly this length).
  int32_t max_new_tokens = 0;  ///< As sent (the request's `max_tokens`).
  RequestOutcome outcome = RequestOutcome::kNotSent;
  int http_status = 0;
  std::string error;          ///< For kFailed: what went wrong (first bytes of the body).
  std::string finish_reason;  ///< From the last choice chunk ("length", "stop", ...).

  double ttft_s = 0;  ///< Sent → first chunk carrying a token.
  double e2e_s = 0;   ///< Sent → end of stream.
  /// Gaps between consecutive token-carrying chunks (one chunk = one token unless the
  /// server batches tokens; with logprobs the chunk's token count is exact).
  std::vector<double> itl_s;
  int32_t output_tokens = 0;    ///< Usage completion_tokens when reported, else counted.
  int32_t counted_tokens = 0;   ///< Tokens counted from the chunks.
  int32_t num_chunks = 0;       ///< Token-carrying chunks.
  bool usage_reported = false;  ///< output_tokens came from the server's usage.
  /// The generated ids, when the server sent them (return_token_ids: the chunks' `token_ids`).
  std::vector<int32_t> output_token_ids;
  bool token_ids_reported = false;

  /// The paper's metric: end-to-end latency / generated tokens (s/token); 0 if no token.
  double NormalizedLatencySeconds() const { return output_tokens > 0 ? e2e_s / output_tokens : 0.0; }
};

}  // namespace orca::loadgen
