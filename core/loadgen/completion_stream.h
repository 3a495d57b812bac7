#pragma once
/// Reads one streamed OpenAI completion (POST /v1/completions with stream=true): SSE events
/// of JSON chunks ending with "data: [DONE]". Measures time to first token, the gaps between
/// token-carrying chunks and the number of generated tokens. Pure: the caller passes the
/// time at which each piece of the body arrived.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/loadgen/request_record.h"
#include "core/loadgen/sse_parser.h"

namespace orca::loadgen {

class CompletionStream {
 public:
  CompletionStream() = default;

  /// Body bytes that arrived `elapsed_s` seconds after the request was sent. An error event,
  /// a chunk that is not JSON, or an oversized event is an error (the request failed); the
  /// stream should not be fed after one.
  absl::Status OnBytes(absl::string_view bytes, double elapsed_s);

  /// The body ended at `elapsed_s`. Fills the timing and token fields of `record` (ttft_s,
  /// e2e_s, itl_s, output_tokens, counted_tokens, num_chunks, usage_reported,
  /// finish_reason, and output_token_ids when the chunks carried `token_ids`). DATA_LOSS when the stream ended before
  /// "[DONE]" or without a token.
  absl::Status Finish(double elapsed_s, RequestRecord* record) const;

  bool done() const { return done_; }
  int32_t counted_tokens() const { return counted_tokens_; }

 private:
  absl::Status OnEvent(const SseEvent& event, double elapsed_s);

  SseParser parser_;
  std::vector<SseEvent> events_;  ///< Scratch for OnBytes.
  bool done_ = false;
  std::optional<double> first_token_s_;
  double last_token_s_ = 0;
  std::vector<double> itl_s_;
  int32_t counted_tokens_ = 0;
  int32_t num_chunks_ = 0;
  std::optional<int32_t> usage_completion_tokens_;
  std::vector<int32_t> token_ids_;  ///< From the chunks' `token_ids` (return_token_ids).
  bool token_ids_seen_ = false;
  std::string finish_reason_;
};

}  // namespace orca::loadgen
