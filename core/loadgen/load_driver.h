#pragma once
/// Open-loop load against an OpenAI-compatible server: each trace request is sent at its
/// arrival time as POST /v1/completions with stream=true, and its SSE stream is timed. One
/// thread drives every stream through a libcurl multi handle, so hundreds of concurrent
/// streams cost one process and no thread per request.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/loadgen/load_trace.h"
#include "core/loadgen/prompt_builder.h"
#include "core/loadgen/request_record.h"

namespace orca::loadgen {

struct LoadDriverOptions {
  std::string base_url = "http://127.0.0.1:8000";
  /// The "model" of every request (the server's served model name).
  std::string model;
  std::string api_key;
  std::string endpoint = "/v1/completions";
  /// The paper's setup: every request generates exactly its max_new_tokens.
  bool ignore_eos = true;
  /// stream_options.include_usage: the server reports the exact generated-token count.
  bool include_usage = true;
  /// Ask for logprobs (0 alternatives) so that every token arrives in its own chunk with its
  /// count, instead of one chunk per piece of text (servers may hold back partial UTF-8).
  bool logprobs = false;
  /// Sent when set; the server's default otherwise.
  std::optional<double> temperature;
  std::optional<double> top_p;
  /// The run stops by itself after this long: requests still streaming are cut off
  /// (RequestOutcome::kUnfinished) and later arrivals are not sent.
  absl::Duration max_duration = absl::Minutes(10);
  /// Per-request limit (0 = only max_duration).
  absl::Duration request_timeout = absl::ZeroDuration();
  /// Cap on concurrent requests (0 = none: a pure open loop, arrivals never wait).
  int32_t max_concurrency = 0;
  bool show_progress = true;
  std::string progress_label;
};

struct LoadRunResult {
  std::vector<RequestRecord> records;  ///< In trace order.
  double run_duration_s = 0;           ///< Start of the run → last stream closed.
  absl::Time start_time;               ///< Wall clock at the start of the run.
};

class LoadDriver {
 public:
  /// INVALID_ARGUMENT for bad options (the field named).
  static absl::StatusOr<std::unique_ptr<LoadDriver>> Create(LoadDriverOptions options, PromptBuilder prompts);
  ~LoadDriver();
  LoadDriver(const LoadDriver&) = delete;
  LoadDriver& operator=(const LoadDriver&) = delete;

  /// Replays `trace` in real time. Failures of single requests are recorded in their rows;
  /// an error here means the driver itself could not run (libcurl setup).
  absl::StatusOr<LoadRunResult> Run(const std::vector<TraceRequest>& trace);

  /// Closed-loop chat: conversation c's first turn is sent at its arrival, each later turn
  /// `think_time` after the previous one completed, with the prompt: the previous turn's
  /// prompt, the token ids the server returned for it (requests ask for them with
  /// `return_token_ids`), then the new user message. A turn that fails, or whose server sent
  /// no `token_ids`, ends its conversation (the rest stay kNotSent, their error saying why).
  /// Records: every turn of conversation 0, then of conversation 1, ...; scheduled_s is when
  /// the turn became ready (arrival, or completion + think time), prompt_tokens its actual
  /// length.
  absl::StatusOr<LoadRunResult> RunClosedLoop(const std::vector<ChatConversation>& conversations,
                                              absl::Duration think_time);

  /// The JSON body of trace request `index` (exposed for tests and --dry-run).
  std::string RequestBody(int64_t index, const TraceRequest& request) const;
  /// The JSON body of a prompt of explicit ids (closed-loop turns: return_token_ids set).
  std::string RequestBody(const std::vector<int32_t>& prompt_ids, int32_t max_new_tokens, bool return_token_ids) const;

 private:
  LoadDriver(LoadDriverOptions options, PromptBuilder prompts)
      : options_(std::move(options)), prompts_(std::move(prompts)) {}

  LoadDriverOptions options_;
  PromptBuilder prompts_;
};

}  // namespace orca::loadgen
