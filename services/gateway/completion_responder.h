#pragma once
/// Turns a generation's events into the HTTP response of /v1/completions or
/// /v1/chat/completions: SSE chunks as they come (streaming), or one JSON body
/// assembled from the same events (non-streaming).
///
/// The response status is chosen when the first event arrives, so an error
/// before any output (e.g. the scheduler's RESOURCE_EXHAUSTED) is a proper
/// 429/503 with Retry-After; an error after the stream began is an SSE
/// `{"error": ...}` event followed by `[DONE]`.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/gateway/admission_controller.h"
#include "services/gateway/generation_request.h"
#include "services/gateway/http_exchange.h"
#include "services/gateway/openai_response.h"
#include "services/gateway/tool_call_parser.h"

namespace orca::gateway {

class CompletionResponder : public GenerationObserver {
 public:
  struct Options {
    OpenAiResponseBuilder::Options format;
    bool stream = false;
    /// n: choices per prompt (choice i belongs to prompt i / n).
    int n = 1;
    /// Completions `echo`: each prompt's text, put in front of its choices' text.
    std::vector<std::string> echo_texts;
    std::string request_id;
    /// Chat with tools (tool_choice not "none"): the output is parsed for calls in this
    /// format, of these tools, per choice.
    std::optional<ToolCallFormat> tool_format;
    std::vector<std::string> tool_names;
    /// When the gateway began handling the request (its body parsed): the request's log
    /// line reports the time to its first output from there.
    absl::Time received = absl::InfinitePast();
  };

  CompletionResponder(Options options, std::shared_ptr<HttpExchange> exchange, AdmissionTicket ticket);

  void OnDelta(const ChoiceDelta& delta) override;
  void OnComplete(const GenerationUsage& usage) override;
  void OnError(const absl::Status& status) override;
  /// Streaming: the exchange's backpressure (the gateway's output budget).
  bool ReadyForMore(std::function<void(const absl::Status&)> on_ready) override;

 private:
  void StartStreamIfNeeded();
  /// The echo prefix for a choice's first delta ("" after that or without echo).
  std::string TakeEcho(int index);

  const Options options_;
  const std::shared_ptr<HttpExchange> exchange_;
  AdmissionTicket ticket_;
  OpenAiResponseBuilder builder_;
  bool stream_started_ = false;
  std::optional<absl::Time> first_output_;  // first delta with something to send
  std::vector<bool> choice_started_;
  std::vector<ChoiceResult> results_;                          // non-streaming
  std::vector<std::unique_ptr<ToolCallParser>> tool_parsers_;  // per choice, with tools
};

}  // namespace orca::gateway
