#include "services/gateway/completion_responder.h"

#include "core/common/logging.h"

namespace orca::gateway {

CompletionResponder::CompletionResponder(Options options, std::shared_ptr<HttpExchange> exchange,
                                         AdmissionTicket ticket)
    : options_(std::move(options)),
      exchange_(std::move(exchange)),
      ticket_(std::move(ticket)),
      builder_(options_.format),
      choice_started_(static_cast<size_t>(options_.format.num_choices), false),
      results_(static_cast<size_t>(options_.format.num_choices)) {
  for (size_t i = 0; i < results_.size(); ++i) results_[i].index = static_cast<int>(i);
  if (options_.tool_format && options_.format.api == OpenAiApi::kChat) {
    for (size_t i = 0; i < results_.size(); ++i) {
      tool_parsers_.push_back(std::make_unique<ToolCallParser>(*options_.tool_format, options_.tool_names));
    }
  }
}

std::string CompletionResponder::TakeEcho(int index) {
  if (index < 0 || static_cast<size_t>(index) >= choice_started_.size() || choice_started_[index]) return "";
  choice_started_[index] = true;
  const size_t prompt = static_cast<size_t>(index) / static_cast<size_t>(std::max(options_.n, 1));
  return prompt < options_.echo_texts.size() ? options_.echo_texts[prompt] : "";
}

void CompletionResponder::StartStreamIfNeeded() {
  if (stream_started_) return;
  stream_started_ = true;
  exchange_->StartStream(200, "text/event-stream; charset=utf-8",
                         {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
}

void CompletionResponder::OnDelta(const ChoiceDelta& delta) {
  const bool first =
      delta.index >= 0 && static_cast<size_t>(delta.index) < choice_started_.size() && !choice_started_[delta.index];
  ChoiceDelta out = delta;
  if (options_.format.api == OpenAiApi::kCompletions) {
    out.text = TakeEcho(delta.index) + delta.text;
  } else if (first) {
    choice_started_[delta.index] = true;
  }

  const bool valid = out.index >= 0 && static_cast<size_t>(out.index) < results_.size();
  ToolParseOutput tools;
  bool produced_calls = false;
  if (valid && !tool_parsers_.empty()) {
    // The text is content only as far as it cannot be a tool call.
    ToolCallParser& parser = *tool_parsers_[out.index];
    tools = parser.Feed(out.text);
    if (out.finish_reason) {
      ToolParseOutput rest = parser.Finish();
      tools.content += rest.content;
      for (ToolCall& call : rest.calls) tools.calls.push_back(std::move(call));
    }
    out.text = std::move(tools.content);
    produced_calls = parser.produced_calls();
  }
  if (!options_.stream) {
    if (valid) {
      results_[out.index].Append(out);
      for (ToolCall& call : tools.calls) results_[out.index].tool_calls.push_back(std::move(call));
    }
    return;
  }
  StartStreamIfNeeded();
  std::string data;
  if (first && options_.format.api == OpenAiApi::kChat) data += builder_.RoleChunk(delta.index);
  // Held-back text makes deltas with nothing to say: they are not sent.
  const bool empty = out.text.empty() && tools.calls.empty() && !out.finish_reason && out.prompt_logprobs.empty() &&
                     (out.tokens.empty() || !options_.format.logprobs) && out.token_ids.empty();
  if (!empty || tool_parsers_.empty()) data += builder_.DeltaChunk(out, tools.calls, produced_calls);
  if (!data.empty()) {
    if (!first_output_.has_value()) first_output_ = absl::Now();
    exchange_->Write(std::move(data));
  }
}

void CompletionResponder::OnComplete(const GenerationUsage& usage) {
  ticket_.Release();
  ORCA_LOG(INFO)
          .With("request_id", options_.request_id)
          .With("prompt_tokens", usage.prompt_tokens)
          .With("completion_tokens", usage.completion_tokens)
          .With("stream", options_.stream ? "true" : "false")
          .With("first_output_ms", first_output_.has_value() && options_.received != absl::InfinitePast()
                                       ? absl::ToDoubleMilliseconds(*first_output_ - options_.received)
                                       : -1.0)
      << "request finished";
  if (!options_.stream) {
    HttpResponse response;
    response.body = builder_.FullResponse(results_, usage);
    exchange_->Respond(std::move(response));
    return;
  }
  StartStreamIfNeeded();
  std::string data;
  if (options_.format.include_usage) data += builder_.UsageChunk(usage);
  data += OpenAiResponseBuilder::DoneChunk();
  exchange_->Write(std::move(data));
  exchange_->EndStream();
}

bool CompletionResponder::ReadyForMore(std::function<void(const absl::Status&)> on_ready) {
  // A non-streaming answer is assembled here and sent once: nothing to pace.
  if (!options_.stream) return true;
  return exchange_->ReadyForMore(std::move(on_ready));
}

void CompletionResponder::OnError(const absl::Status& status) {
  ticket_.Release();
  const ApiError error = ApiError::FromStatus(status);
  if (error.http_status >= 500) {
    ORCA_LOG(WARNING).With("request_id", options_.request_id) << "generation failed: " << status.ToString();
  }
  if (!stream_started_) {
    exchange_->Respond(error.ToHttpResponse());
    return;
  }
  exchange_->Write(OpenAiResponseBuilder::ErrorChunk(error) + OpenAiResponseBuilder::DoneChunk());
  exchange_->EndStream();
}

}  // namespace orca::gateway
