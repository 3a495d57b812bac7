#include "services/gateway/grpc_generation_service.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/common/sampling_limits.h"
#include "core/common/status_macros.h"
#include "services/common/grpc_status.h"
#include "services/common/sampling_proto.h"
#include "services/gateway/api_error.h"
#include "services/gateway/structured_output_request.h"

namespace orca::gateway {
namespace {

using orca::v1::TextGenerateRequest;
using orca::v1::TextGenerateResponse;

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(services::ToGrpcStatus(status));
  return reactor;
}

// The write side of one Generate call. The pipeline's events are queued and
// written one at a time (a ServerWriteReactor allows one outstanding write).
// The reactor deletes itself in OnDone; the pipeline may still hold the
// observer, which then finds the reactor gone and drops events. Keeps gRPC's
// reactor rules (services/common/server_stream_writer.h) with its own queue.
class GenerateReactor : public grpc::ServerWriteReactor<TextGenerateResponse> {
 public:
  class Observer : public GenerationObserver {
   public:
    Observer(GenerateReactor* reactor, std::vector<std::string> echo_texts, int n, std::string request_id,
             AdmissionTicket ticket)
        : reactor_(reactor),
          echo_texts_(std::move(echo_texts)),
          n_(n),
          request_id_(std::move(request_id)),
          ticket_(std::move(ticket)) {}

    void OnDelta(const ChoiceDelta& delta) override {
      TextGenerateResponse message;
      message.set_index(delta.index);
      message.set_request_id(request_id_);
      std::string text = delta.text;
      if (!echo_texts_.empty() && started_.insert(delta.index).second) {
        const size_t prompt = static_cast<size_t>(delta.index / std::max(n_, 1));
        if (prompt < echo_texts_.size()) text = echo_texts_[prompt] + text;
      }
      message.set_text(std::move(text));
      for (const GeneratedToken& token : delta.tokens) {
        orca::v1::SampledToken* out = message.add_tokens();
        out->set_token_id(token.id);
        out->set_logprob(token.logprob);
        for (const TokenAlternative& alt : token.top) {
          orca::v1::TopLogprob* top = out->add_top_logprobs();
          top->set_token_id(alt.id);
          top->set_logprob(alt.logprob);
        }
      }
      if (delta.finish_reason) {
        message.set_finish_reason(*delta.finish_reason == FinishReason::kStop ? orca::v1::FINISH_REASON_STOP
                                                                              : orca::v1::FINISH_REASON_LENGTH);
        message.set_prompt_tokens(delta.prompt_tokens);
        message.set_completion_tokens(delta.completion_tokens);
      }
      Enqueue(std::move(message), std::nullopt);
    }
    void OnComplete(const GenerationUsage&) override {
      ticket_.Release();
      Enqueue(std::nullopt, grpc::Status::OK);
    }
    void OnError(const absl::Status& status) override {
      ticket_.Release();
      Enqueue(std::nullopt, services::ToGrpcStatus(status));
    }

    // Reactor side.
    void OnWriteDone(bool ok) { Pump(/*write_done=*/true, ok); }
    /// The call was cancelled: drop queued output and finish (after the write
    /// in flight, if any). The request itself is cancelled by the caller.
    void Abort() {
      {
        absl::MutexLock lock(&mu_);
        // The front stays while gRPC may still hold it (written or being written).
        queue_.erase(queue_.begin() + std::min<size_t>(queue_.size(), writing_ || written_ ? 1 : 0), queue_.end());
        finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled");
      }
      Pump(/*write_done=*/false, true);
    }
    void Detach() {
      absl::MutexLock lock(&mu_);
      reactor_ = nullptr;
    }

   private:
    void Enqueue(std::optional<TextGenerateResponse> message, std::optional<grpc::Status> finish) {
      {
        absl::MutexLock lock(&mu_);
        if (message) queue_.push_back(std::move(*message));
        if (finish) finish_ = std::move(finish);
      }
      Pump(/*write_done=*/false, true);
    }

    // Starts the next write or the Finish, outside the lock (gRPC may run
    // reactions inline).
    //
    // gRPC serializes the message in flight (the queue's front) inside StartWrite, and the
    // write's OnWriteDone may run on another thread before StartWrite has returned here.
    // So the written message is popped, and the next write or the Finish started, only once
    // StartWrite has returned, ordered by the lock (ThreadSanitizer sees that order too;
    // gRPC's own is inside Debian's uninstrumented libgrpc). A Pump that finds StartWrite
    // still running leaves the work to the thread running it, which looks again when it
    // returns (the loop). As in services/common/server_stream_writer.h.
    void Pump(bool write_done, bool ok) {
      for (;;) {
        GenerateReactor* reactor = nullptr;
        const TextGenerateResponse* to_write = nullptr;
        std::optional<grpc::Status> to_finish;
        {
          absl::MutexLock lock(&mu_);
          if (write_done) {
            write_done = false;
            writing_ = false;
            written_ = true;
            if (!ok) {  // the client is gone: nothing more can be written
              queue_.erase(queue_.begin() + std::min<size_t>(queue_.size(), 1), queue_.end());
              if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
            }
          }
          if (!start_returned_) return;
          if (written_) {
            queue_.pop_front();
            written_ = false;
          }
          if (reactor_ == nullptr || writing_ || finished_) return;
          if (!queue_.empty()) {
            writing_ = true;
            start_returned_ = false;
            to_write = &queue_.front();  // stays put until popped after OnWriteDone
          } else if (finish_) {
            finished_ = true;
            to_finish = finish_;
          } else {
            return;
          }
          reactor = reactor_;
        }
        if (to_finish) {
          reactor->Finish(*to_finish);
          return;
        }
        reactor->StartWrite(to_write);
        absl::MutexLock lock(&mu_);
        start_returned_ = true;
      }
    }

    absl::Mutex mu_;
    GenerateReactor* reactor_ ABSL_GUARDED_BY(mu_);
    std::deque<TextGenerateResponse> queue_ ABSL_GUARDED_BY(mu_);
    std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
    bool writing_ ABSL_GUARDED_BY(mu_) = false;
    bool written_ ABSL_GUARDED_BY(mu_) = false;        // the front was written, not yet popped
    bool start_returned_ ABSL_GUARDED_BY(mu_) = true;  // the last StartWrite has returned
    bool finished_ ABSL_GUARDED_BY(mu_) = false;
    // Touched only from OnDelta (serialized by the pipeline).
    std::set<int> started_;
    const std::vector<std::string> echo_texts_;
    const int n_;
    const std::string request_id_;
    AdmissionTicket ticket_;
  };

  /// Finishes at once with `status`.
  explicit GenerateReactor(const absl::Status& status) { Fail(status); }
  GenerateReactor() = default;

  /// Finishes with `status` before anything was written (any thread).
  void Fail(const absl::Status& status) { Finish(services::ToGrpcStatus(status)); }
  /// True once the client cancelled the call.
  bool cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  /// Sets up the observer (on the CPU pool, while gRPC may call OnCancel);
  /// call Attach() with the running request after Start.
  std::shared_ptr<Observer> MakeObserver(std::vector<std::string> echo_texts, int n, std::string request_id,
                                         AdmissionTicket ticket) {
    auto observer =
        std::make_shared<Observer>(this, std::move(echo_texts), n, std::move(request_id), std::move(ticket));
    absl::MutexLock lock(&mu_);
    observer_ = observer;
    return observer;
  }
  void Attach(std::shared_ptr<GenerationHandle> handle) {
    std::shared_ptr<Observer> observer;
    {
      absl::MutexLock lock(&mu_);
      handle_ = handle;
      if (!cancelled_) return;
      observer = observer_;
    }
    // Cancelled before the observer existed: OnCancel could not finish the call.
    handle->Cancel();
    if (observer) observer->Abort();
  }

  void OnWriteDone(bool ok) override {
    if (auto observer = observer_ptr()) observer->OnWriteDone(ok);
  }
  void OnCancel() override {
    std::shared_ptr<GenerationHandle> handle;
    std::shared_ptr<Observer> observer;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      handle = handle_.lock();
      observer = observer_;
    }
    if (handle) handle->Cancel();
    // No more events come after a cancel; the call still has to be finished.
    if (observer) observer->Abort();
  }
  void OnDone() override {
    if (auto observer = observer_ptr()) observer->Detach();
    delete this;
  }

 private:
  std::shared_ptr<Observer> observer_ptr() {
    absl::MutexLock lock(&mu_);
    return observer_;
  }

  absl::Mutex mu_;
  std::shared_ptr<Observer> observer_ ABSL_GUARDED_BY(mu_);
  std::weak_ptr<GenerationHandle> handle_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// The request's options, checked against the same table as the HTTP API's (core/common/sampling_limits.h),
// with the same messages (naming max_new_tokens 'max_tokens', as the HTTP API spells it). proto3 cannot leave a
// scalar unset: max_new_tokens 0 is the default (the rest of the context), n 0 is 1.
absl::Status ToOptions(const TextGenerateRequest& request, GenerationOptions* options) {
  if (request.max_new_tokens() != 0) {
    if (std::string error = limits::kMaxNewTokens.Check(request.max_new_tokens()); !error.empty())
      return InvalidFieldError("max_tokens", error);
    options->max_new_tokens = request.max_new_tokens();
  }
  options->n = request.n() == 0 ? 1 : request.n();
  if (std::string error = limits::kN.Check(options->n); !error.empty()) return InvalidFieldError("n", error);
  const SamplingParams sampling = services::SamplingFromProto(request.sampling());  // all zero: greedy
  if (std::string problem = sampling.Validate(); !problem.empty()) return InvalidFieldError("sampling", problem);
  if (sampling.WantsPromptLogprobs()) {
    return InvalidFieldError("sampling",
                             "sampling.prompt_logprobs is not supported by the gRPC API (its responses "
                             "carry generated tokens only); use the HTTP API");
  }
  ORCA_RETURN_IF_ERROR(
      ValidateStructuredOutput(sampling.structured, std::string(StructuredOutputField(sampling.structured.kind))));
  options->sampling = sampling;
  if (std::string error = limits::kStopStrings.Check(request.stop_size()); !error.empty())
    return InvalidFieldError("stop", error);
  for (int i = 0; i < request.stop_size(); ++i) {
    const std::string& stop = request.stop(i);
    if (stop.empty()) return InvalidFieldError("stop", absl::StrCat("'stop[", i, "]' must not be empty"));
    if (std::string error =
            limits::kStopStringBytes.Check(absl::StrCat("stop[", i, "]"), static_cast<int64_t>(stop.size()));
        !error.empty())
      return InvalidFieldError("stop", error);
    options->stop.push_back(stop);
  }
  if (std::string error = limits::kStopTokenIds.Check(request.stop_token_ids_size()); !error.empty())
    return InvalidFieldError("stop_token_ids", error);
  for (int i = 0; i < request.stop_token_ids_size(); ++i) {
    if (std::string error = TokenIdError(limits::kStopTokenIds.field, i, request.stop_token_ids(i), 0); !error.empty())
      return InvalidFieldError("stop_token_ids", error);
  }
  options->stop_token_ids.assign(request.stop_token_ids().begin(), request.stop_token_ids().end());
  options->ignore_eos = request.ignore_eos();
  if (std::string error = limits::kPriority.Check(request.priority()); !error.empty())
    return InvalidFieldError("priority", error);
  options->priority = request.priority();
  return absl::OkStatus();
}

}  // namespace

GrpcGenerationService::GrpcGenerationService(Options options)
    : options_(options), resolver_(options.model, options.router, options.chat_template_timeout) {}

absl::Status GrpcGenerationService::CheckCall(grpc::CallbackServerContext* context, const std::string& model) const {
  if (options_.authenticator != nullptr && options_.authenticator->enabled()) {
    std::string header;
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end())
      header.assign(it->second.data(), it->second.size());
    ORCA_RETURN_IF_ERROR(options_.authenticator->Authenticate(header));
  }
  return resolver_.CheckModel(model);
}

absl::StatusOr<GenerationRequest> GrpcGenerationService::Resolve(const TextGenerateRequest& request,
                                                                 std::vector<std::string>* echo_texts) const {
  GenerationOptions options;
  ORCA_RETURN_IF_ERROR(ToOptions(request, &options));
  ORCA_ASSIGN_OR_RETURN(int32_t max_model_len, resolver_.MaxModelLen());
  GenerationRequest out;
  switch (request.input_case()) {
    case TextGenerateRequest::kPrompt:
    case TextGenerateRequest::kPromptTokenIds: {
      CompletionRequest completion;
      if (request.has_prompt_token_ids()) {
        if (request.prompt_token_ids().ids().empty()) return InvalidFieldError("prompt_token_ids", "no token ids");
        completion.prompt_token_ids.emplace_back(request.prompt_token_ids().ids().begin(),
                                                 request.prompt_token_ids().ids().end());
      } else {
        completion.prompt_texts.push_back(request.prompt());
      }
      completion.echo = request.echo();
      completion.options = std::move(options);
      ORCA_ASSIGN_OR_RETURN(out, resolver_.Completion(completion, max_model_len, echo_texts));
      if (!request.echo()) echo_texts->clear();
      break;
    }
    case TextGenerateRequest::kMessages: {
      ChatRequest chat;
      if (request.messages().messages().empty()) return InvalidFieldError("messages", "no messages");
      for (const orca::v1::ChatMessage& m : request.messages().messages()) {
        if (m.role().empty()) return InvalidFieldError("messages", "every message needs a role");
        chat.messages.push_back(text::ChatMessage{m.role(), m.content()});
      }
      chat.options = std::move(options);
      ORCA_ASSIGN_OR_RETURN(out, resolver_.Chat(chat, max_model_len));
      break;
    }
    default:
      return InvalidFieldError("input", "one of 'prompt', 'messages' or 'prompt_token_ids' is required");
  }
  out.request_id = NewRequestId("gen-");
  return out;
}

grpc::ServerWriteReactor<TextGenerateResponse>* GrpcGenerationService::Generate(grpc::CallbackServerContext* context,
                                                                                const TextGenerateRequest* request) {
  absl::Status status = CheckCall(context, request->model());
  if (!status.ok()) return new GenerateReactor(status);
  std::optional<AdmissionTicket> ticket = options_.admission->TryAdmit();
  if (!ticket) return new GenerateReactor(AtCapacity());
  // `request` and the reactor live until the reactor finishes, which only this task or the observer it starts does.
  auto* reactor = new GenerateReactor();
  const bool queued =
      options_.cpu_pool->TrySubmit([this, request, reactor, ticket = std::move(*ticket)](CpuPool::Mode mode) mutable {
        if (mode == CpuPool::Mode::kCancelled) {
          ticket.Release();
          reactor->Fail(absl::UnavailableError("The gateway is shutting down; retry the request"));
          return;
        }
        if (reactor->cancelled()) {  // the client left while the work waited
          ticket.Release();
          reactor->Fail(absl::CancelledError("call cancelled"));
          return;
        }
        std::vector<std::string> echo_texts;
        absl::StatusOr<GenerationRequest> generation = Resolve(*request, &echo_texts);
        if (!generation.ok()) {
          ticket.Release();
          reactor->Fail(generation.status());
          return;
        }
        const std::string request_id = generation->request_id;
        const int n = generation->n;
        auto observer = reactor->MakeObserver(std::move(echo_texts), n, request_id, std::move(ticket));
        absl::StatusOr<std::shared_ptr<GenerationHandle>> handle =
            options_.pipeline->Start(std::move(generation).value(), observer);
        if (!handle.ok()) {
          observer->OnError(handle.status());
        } else {
          reactor->Attach(*handle);
        }
      });
  if (!queued) reactor->Fail(Busy());
  return reactor;
}

absl::Status GrpcGenerationService::AtCapacity() const {
  return absl::ResourceExhaustedError(
      absl::StrCat("The server is at capacity (", options_.admission->max_in_flight(), " concurrent requests)"));
}

absl::Status GrpcGenerationService::Busy() const {
  return absl::ResourceExhaustedError(absl::StrCat("The server is busy (", options_.cpu_pool->num_threads(),
                                                   " CPU threads busy and ", options_.cpu_pool->max_queued(),
                                                   " requests waiting for them); retry later"));
}

grpc::ServerUnaryReactor* GrpcGenerationService::Offload(grpc::CallbackServerContext* context, const std::string& model,
                                                         absl::AnyInvocable<absl::Status()> work) {
  absl::Status status = CheckCall(context, model);
  if (!status.ok()) return FinishUnary(context, status);
  std::optional<AdmissionTicket> ticket = options_.admission->TryAdmit();
  if (!ticket) return FinishUnary(context, AtCapacity());
  // The request and response messages live until the reactor finishes, which only this task does.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool queued = options_.cpu_pool->TrySubmit(
      [context, reactor, ticket = std::move(*ticket), work = std::move(work)](CpuPool::Mode mode) mutable {
        absl::Status status = mode == CpuPool::Mode::kCancelled
                                  ? absl::UnavailableError("The gateway is shutting down; retry the request")
                              : context->IsCancelled() ? absl::CancelledError("call cancelled")
                                                       : work();
        ticket.Release();
        reactor->Finish(services::ToGrpcStatus(status));
      });
  if (!queued) reactor->Finish(services::ToGrpcStatus(Busy()));
  return reactor;
}

grpc::ServerUnaryReactor* GrpcGenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                          const orca::v1::TokenizeRequest* request,
                                                          orca::v1::TokenizeResponse* response) {
  return Offload(context, request->model(), [this, request, response]() -> absl::Status {
    std::vector<int32_t> ids = options_.model->tokenizer().Encode(request->text(), request->add_special_tokens());
    response->mutable_token_ids()->Assign(ids.begin(), ids.end());
    response->set_count(static_cast<int32_t>(ids.size()));
    absl::StatusOr<int32_t> max_len = resolver_.MaxModelLen();
    response->set_max_model_len(max_len.ok() ? *max_len : 0);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* GrpcGenerationService::Detokenize(grpc::CallbackServerContext* context,
                                                            const orca::v1::DetokenizeRequest* request,
                                                            orca::v1::DetokenizeResponse* response) {
  return Offload(context, request->model(), [this, request, response]() -> absl::Status {
    std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
    ORCA_RETURN_IF_ERROR(resolver_.CheckTokenIds(ids, "token_ids"));
    ORCA_ASSIGN_OR_RETURN(std::string text, options_.model->tokenizer().Decode(ids, request->skip_special_tokens()));
    response->set_text(std::move(text));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* GrpcGenerationService::ListModels(grpc::CallbackServerContext* context,
                                                            const orca::v1::ListModelsRequest* request,
                                                            orca::v1::ListModelsResponse* response) {
  absl::Status status = CheckCall(context, "");
  if (status.ok()) {
    orca::v1::ModelCard* card = response->add_models();
    card->set_id(options_.model->name());
    card->set_created(options_.model->created());
    card->set_owned_by("orca");
    absl::StatusOr<int32_t> max_len = resolver_.MaxModelLen();
    card->set_max_model_len(max_len.ok() ? *max_len : 0);
  }
  return FinishUnary(context, status);
}

}  // namespace orca::gateway
