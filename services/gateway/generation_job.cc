#include "services/gateway/generation_job.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "services/common/grpc_status.h"
#include "services/common/sampling_proto.h"
#include "services/gateway/api_error.h"

namespace orca::gateway {
namespace {

// What a client learns of a failed scheduler call. The scheduler's own refusals
// (a full queue, an invalid request) keep their words; a broken transport
// (the scheduler died, the connection reset or cannot be made) says only that
// the engine is unavailable: its text ("recvmsg:Connection reset by peer")
// means nothing to a client and is logged instead.
absl::Status SchedulerCallError(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNKNOWN:
      return WithRetryAfter(absl::UnavailableError(
                                "The engine is unavailable: the connection to its scheduler failed; retry the request"),
                            1);
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
      // A protocol failure ("Received RST_STREAM ...") or the scheduler's own bug: no detail for the client.
      return absl::InternalError("The engine's scheduler failed the request (an internal error)");
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      // The gateway's credential, not the client's: never a 401 to the client.
      return absl::InternalError("The engine refused the gateway's internal credential");
    default:
      return services::FromGrpcStatus(status);
  }
}

}  // namespace

GenerationJob::GenerationJob(uint64_t id, GenerationPipeline* pipeline, const text::Tokenizer* tokenizer,
                             GenerationRequest request, std::shared_ptr<GenerationObserver> observer)
    : id_(id),
      pipeline_(pipeline),
      tokenizer_(tokenizer),
      request_(std::move(request)),
      eos_ids_(tokenizer->eos_ids()),
      observer_(std::move(observer)) {}

GenerationJob::~GenerationJob() = default;

orca::v1::GenerateRequest GenerationJob::SchedulerRequest(const Choice& choice) const {
  const PromptInput& prompt = request_.prompts[choice.prompt_index];
  const int sample = choice.index % request_.n;
  orca::v1::GenerateRequest out;
  out.set_request_id(request_.num_choices() == 1 ? request_.request_id
                                                 : absl::StrCat(request_.request_id, "-", choice.index));
  out.mutable_prompt_token_ids()->Assign(prompt.token_ids.begin(), prompt.token_ids.end());
  out.set_max_new_tokens(prompt.max_new_tokens);
  out.set_min_new_tokens(std::min(request_.min_new_tokens, prompt.max_new_tokens));
  SamplingParams sampling = request_.sampling;
  if (sampling.seed) sampling.seed = *sampling.seed + static_cast<uint64_t>(sample);
  services::SamplingToProto(sampling, out.mutable_sampling());
  out.mutable_stop_token_ids()->Assign(request_.stop_token_ids.begin(), request_.stop_token_ids.end());
  out.set_ignore_eos(request_.ignore_eos);
  out.set_priority(request_.priority);
  if (request_.n > 1) {
    // The n sequences of one prompt: one group on one scheduler (Start), submitted together.
    out.set_group_id(absl::StrCat(request_.request_id, "/", choice.prompt_index));
    out.set_group_size(request_.n);
    out.set_group_index(sample);
  }
  return out;
}

absl::Status GenerationJob::Start(SchedulerRouter& router) {
  const int num_choices = request_.num_choices();
  std::vector<SchedulerLease> leases;
  leases.reserve(num_choices);
  for (int i = 0; i < num_choices; ++i) {
    // A prompt's n sequences share one scheduler: it counts their KV as one group and may
    // share the prompt's blocks among them (choices are prompt-major).
    if (i % request_.n != 0) {
      leases.push_back(leases.back().SameScheduler());
      continue;
    }
    absl::StatusOr<SchedulerLease> lease = router.Acquire();
    if (!lease.ok()) return lease.status();  // the leases taken so far are released
    leases.push_back(std::move(lease).value());
  }
  std::vector<orca::v1::GenerateRequest> requests;
  {
    absl::MutexLock lock(&mu_);
    choices_.resize(num_choices);
    for (int i = 0; i < num_choices; ++i) {
      Choice& c = choices_[i];
      c.index = i;
      c.prompt_index = i / request_.n;
      c.detokenizer = std::make_unique<text::IncrementalDetokenizer>(
          *tokenizer_, request_.prompts[c.prompt_index].token_ids, request_.skip_special_tokens);
      if (!request_.stop.empty()) c.stop_matcher = std::make_unique<text::StopMatcher>(request_.stop);
      requests.push_back(SchedulerRequest(c));
    }
  }
  // Calls start outside the lock: their callbacks take it.
  std::shared_ptr<GenerationJob> self = shared_from_this();
  for (int i = 0; i < num_choices; ++i) {
    std::shared_ptr<SchedulerCall> call = SchedulerCall::Start(std::move(leases[i]), std::move(requests[i]), i, self);
    absl::MutexLock lock(&mu_);
    choices_[i].call = call;
    // Cancelled, failed or stopped before the pointer was stored.
    if ((terminated_ || choices_[i].finished) && !choices_[i].call_done) call->Cancel();
  }
  return absl::OkStatus();
}

void GenerationJob::Cancel() {
  absl::MutexLock lock(&mu_);
  if (terminated_) {
    CancelCalls();  // completed jobs may still have calls winding down
    return;
  }
  terminated_ = true;
  observer_.reset();
  CancelCalls();
}

void GenerationJob::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (terminated_) {
    CancelCalls();
    return;
  }
  Fail(status);
}

void GenerationJob::CancelCalls() {
  for (Choice& c : choices_) {
    if (c.call && !c.call_done) c.call->Cancel();
  }
}

bool GenerationJob::IsStopToken(int32_t id) const {
  if (!request_.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end()) return true;
  return std::find(request_.stop_token_ids.begin(), request_.stop_token_ids.end(), id) != request_.stop_token_ids.end();
}

GeneratedToken GenerationJob::MakeToken(const orca::v1::SampledToken& sampled) const {
  GeneratedToken token;
  token.id = sampled.token_id();
  token.logprob = sampled.logprob();
  token.rank = sampled.rank();
  token.text = tokenizer_->TokenBytes(token.id);
  for (const orca::v1::TopLogprob& top : sampled.top_logprobs()) {
    token.top.push_back(TokenAlternative{top.token_id(), top.logprob(), tokenizer_->TokenBytes(top.token_id())});
  }
  return token;
}

void GenerationJob::AddPromptLogprobs(Choice& choice, const orca::v1::GenerateResponse& response,
                                      ChoiceDelta* delta) const {
  if (!choice.prompt_logprobs_started) {
    choice.prompt_logprobs_started = true;
    GeneratedToken first;
    first.id = request_.prompts[choice.prompt_index].token_ids.front();
    first.has_logprob = false;
    first.text = tokenizer_->TokenBytes(first.id);
    delta->prompt_logprobs.push_back(std::move(first));
  }
  for (const orca::v1::SampledToken& sampled : response.prompt_logprobs())
    delta->prompt_logprobs.push_back(MakeToken(sampled));
}

bool GenerationJob::EmitText(Choice& choice, std::string_view text, ChoiceDelta* delta) {
  if (text.empty()) return false;
  if (!choice.stop_matcher) {
    delta->text.append(text.data(), text.size());
    return false;
  }
  text::StopMatcher::Result result = choice.stop_matcher->Push(text);
  delta->text += result.emit;
  if (!result.stopped) return false;
  if (request_.include_stop_str_in_output) delta->text += result.matched;
  delta->finish_reason = FinishReason::kStop;
  delta->stop_string = result.matched;
  return true;
}

void GenerationJob::OnSchedulerResponse(int index, const orca::v1::GenerateResponse& response) {
  absl::MutexLock lock(&mu_);
  if (terminated_) return;
  Choice& choice = choices_[index];
  if (choice.finished) return;
  ChoiceDelta delta;
  delta.index = choice.index;
  const bool last_message = response.finish_reason() != orca::v1::FINISH_REASON_UNSPECIFIED;
  const bool want_logprobs = request_.sampling.logprobs;
  if (request_.sampling.WantsPromptLogprobs()) AddPromptLogprobs(choice, response, &delta);
  const int num_tokens = response.tokens_size();
  for (int k = 0; k < num_tokens; ++k) {
    const orca::v1::SampledToken& sampled = response.tokens(k);
    ++choice.completion_tokens;
    if (want_logprobs) delta.tokens.push_back(MakeToken(sampled));
    if (request_.return_token_ids) delta.token_ids.push_back(sampled.token_id());
    // The EOS / stop token that ends a choice is not part of its text.
    const bool ends_choice = last_message && k == num_tokens - 1 &&
                             response.finish_reason() == orca::v1::FINISH_REASON_STOP &&
                             IsStopToken(sampled.token_id());
    if (ends_choice) {
      delta.stop_token = sampled.token_id();
      continue;
    }
    if (EmitText(choice, choice.detokenizer->Add(sampled.token_id()), &delta)) break;
  }
  if (!delta.finish_reason && last_message) {
    HandleFinish(choice, response, &delta);
    if (terminated_) return;  // failed
  }
  if (delta.finish_reason && !delta.stop_string.empty() && !last_message) {
    // A stop string ended the choice while the scheduler is still generating.
    if (choice.call) choice.call->Cancel();
  }
  Deliver(choice, delta);
}

void GenerationJob::HandleFinish(Choice& choice, const orca::v1::GenerateResponse& response, ChoiceDelta* delta) {
  switch (response.finish_reason()) {
    case orca::v1::FINISH_REASON_STOP:
    case orca::v1::FINISH_REASON_LENGTH: {
      if (EmitText(choice, choice.detokenizer->Flush(), delta)) return;
      if (choice.stop_matcher) delta->text += choice.stop_matcher->Flush();
      delta->finish_reason =
          response.finish_reason() == orca::v1::FINISH_REASON_STOP ? FinishReason::kStop : FinishReason::kLength;
      if (delta->finish_reason == FinishReason::kLength) delta->stop_token.reset();
      return;
    }
    case orca::v1::FINISH_REASON_CANCELLED:
      Fail(absl::UnavailableError("The scheduler cancelled the request (draining, deadline or shutdown)"));
      return;
    default: {
      // UNAVAILABLE (the pipeline failed; it re-forms) tells the client a retry may work: 503 / service_unavailable.
      // INVALID_ARGUMENT (the engine cannot take the request as given, e.g. its constraint) is the client's: 400.
      const auto code = static_cast<absl::StatusCode>(response.error_code());
      const bool retry = code == absl::StatusCode::kUnavailable;
      const bool keep = retry || code == absl::StatusCode::kInvalidArgument;
      Fail(absl::Status(keep ? code : absl::StatusCode::kInternal,
                        absl::StrCat("Generation failed in the engine", retry ? " (retry the request)" : "", ": ",
                                     response.error().empty() ? "unknown error" : response.error())));
      return;
    }
  }
}

void GenerationJob::Deliver(Choice& choice, ChoiceDelta& delta) {
  const bool finishing = delta.finish_reason.has_value();
  if (finishing) {
    choice.finished = true;
    ++num_finished_;
    delta.prompt_tokens = static_cast<int32_t>(request_.prompts[choice.prompt_index].token_ids.size());
    delta.completion_tokens = choice.completion_tokens;
  }
  if (delta.text.empty() && delta.tokens.empty() && delta.token_ids.empty() && delta.prompt_logprobs.empty() &&
      !finishing) {
    return;
  }
  observer_->OnDelta(delta);
  if (num_finished_ < static_cast<int>(choices_.size())) return;
  GenerationUsage usage;
  for (const PromptInput& prompt : request_.prompts)
    usage.prompt_tokens += static_cast<int32_t>(prompt.token_ids.size());
  for (const Choice& c : choices_) usage.completion_tokens += c.completion_tokens;
  terminated_ = true;
  std::shared_ptr<GenerationObserver> observer = std::move(observer_);
  observer->OnComplete(usage);
}

void GenerationJob::Fail(const absl::Status& status) {
  if (terminated_) return;
  terminated_ = true;
  CancelCalls();
  std::shared_ptr<GenerationObserver> observer = std::move(observer_);
  observer->OnError(status);
}

bool GenerationJob::ReadyForMore(int index, std::function<void()> resume) {
  std::shared_ptr<GenerationObserver> observer;
  {
    absl::MutexLock lock(&mu_);
    // Ended (its calls are being cancelled): read on to the end.
    if (terminated_ || choices_[index].finished || !observer_) return true;
    observer = observer_;
  }
  std::weak_ptr<GenerationJob> weak = weak_from_this();
  // Outside the lock: the observer may answer on another thread at once.
  return observer->ReadyForMore([weak, resume = std::move(resume)](const absl::Status& status) {
    if (!status.ok()) {
      if (std::shared_ptr<GenerationJob> job = weak.lock()) job->Abort(status);
    }
    resume();
  });
}

void GenerationJob::OnSchedulerDone(int index, const grpc::Status& status) {
  bool all_done = false;
  {
    absl::MutexLock lock(&mu_);
    Choice& choice = choices_[index];
    choice.call_done = true;
    all_done = ++num_calls_done_ == static_cast<int>(choices_.size());
    if (!terminated_ && !choice.finished) {
      if (status.ok()) {
        Fail(absl::InternalError("The scheduler ended the stream without a finish reason"));
      } else if (status.error_code() == grpc::StatusCode::CANCELLED) {
        Fail(
            absl::UnavailableError("The scheduler cancelled the request (it is shutting down or draining); retry "
                                   "the request"));
      } else {
        ORCA_LOG(WARNING)
                .With("request_id", request_.request_id)
                .With("scheduler", choice.call ? choice.call->scheduler_address() : "")
                .With("code", static_cast<int>(status.error_code()))
            << "scheduler call failed: " << status.error_message();
        Fail(SchedulerCallError(status));
      }
    }
  }
  if (all_done) pipeline_->Unregister(id_);
}

}  // namespace orca::gateway
