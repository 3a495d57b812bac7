#include "services/scheduler/scheduler_service.h"

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/common/logging.h"
#include "core/common/sampling_limits.h"
#include "core/common/status_macros.h"
#include "services/common/control_convert.h"
#include "services/common/grpc_status.h"

namespace orca::scheduler {
namespace {

constexpr int64_t kMaxStoreWaitMillis = 600'000;
constexpr size_t kMaxStoreValueBytes = 1 << 20;

v1::FinishReason ToWire(sched::RequestState state) {
  switch (state) {
    case sched::RequestState::kFinishedStop:
      return v1::FINISH_REASON_STOP;
    case sched::RequestState::kFinishedLength:
      return v1::FINISH_REASON_LENGTH;
    case sched::RequestState::kFinishedCancelled:
      return v1::FINISH_REASON_CANCELLED;
    default:
      return v1::FINISH_REASON_ERROR;
  }
}

void AppendTokens(const std::vector<sched::SampledToken>& tokens,
                  google::protobuf::RepeatedPtrField<v1::SampledToken>* out) {
  for (const sched::SampledToken& t : tokens) {
    v1::SampledToken* s = out->Add();
    s->set_token_id(t.token_id);
    s->set_logprob(t.logprob);
    if (t.rank > 0) s->set_rank(t.rank);
    for (const sched::TopLogprob& lp : t.top_logprobs) {
      v1::TopLogprob* top = s->add_top_logprobs();
      top->set_token_id(lp.token_id);
      top->set_logprob(lp.logprob);
    }
  }
}

// One Generate stream. The loop (via the sink) enqueues responses; writes go
// out one at a time, and tokens that arrive while a write is in progress are
// coalesced into the next message so a slow client never grows the queue.
// Keeps gRPC's reactor rules (services/common/server_stream_writer.h) with its
// own queue, for the coalescing.
class GenerateStream final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                             public RequestSink,
                             public std::enable_shared_from_this<GenerateStream> {
 public:
  explicit GenerateStream(SchedulerLoop* loop) : loop_(loop) {}

  // n > 1 on the wire: the group it belongs to (before Begin or Hold).
  void SetGroup(const v1::GenerateRequest& request) {
    group_ = {request.group_id(), request.group_size(), request.group_index()};
  }

  void Begin(std::shared_ptr<GenerateStream> self, sched::RequestSpec spec) {
    self_ = std::move(self);
    const SchedulerLoop::Ticket t = loop_->Submit(std::move(spec), self_, group_);
    absl::MutexLock lock(&mu_);
    ticket_ = t;
    if (cancel_before_ticket_) loop_->Cancel(t);
  }

  // Finishes at once with an error; the stream owns itself until OnDone.
  void Reject(std::shared_ptr<GenerateStream> self, const absl::Status& status) {
    self_ = std::move(self);
    OnRejected(status);
  }

  // The request waits for its constraint to compile: the stream owns itself until OnDone,
  // and Admit or OnRejected follows from the compiler's thread.
  void Hold(std::shared_ptr<GenerateStream> self) { self_ = std::move(self); }
  // After Hold: submits the request unless the call already ended (a client that left while
  // its constraint compiled costs nothing more).
  void Admit(sched::RequestSpec spec) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || done_) return;
    }
    const SchedulerLoop::Ticket t = loop_->Submit(std::move(spec), shared_from_this(), group_);
    absl::MutexLock lock(&mu_);
    ticket_ = t;
    if (cancel_before_ticket_) loop_->Cancel(t);
  }

  // RequestSink (loop thread):
  void OnEvent(const sched::RequestEvent& e) override {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    if (pending_.empty() || pending_.back().finish_reason() != v1::FINISH_REASON_UNSPECIFIED) pending_.emplace_back();
    v1::GenerateResponse& r = pending_.back();
    AppendTokens(e.new_tokens, r.mutable_tokens());
    AppendTokens(e.new_prompt_logprobs, r.mutable_prompt_logprobs());
    r.set_engine_request_id(e.request_id);
    if (e.finish.has_value()) {
      const sched::FinishInfo& f = *e.finish;
      r.set_finish_reason(ToWire(f.state));
      r.set_error(f.error_message);
      if (f.state == sched::RequestState::kFinishedError) r.set_error_code(static_cast<int32_t>(f.error_code));
      r.set_prompt_tokens(f.num_prompt_tokens);
      r.set_completion_tokens(f.num_generated_tokens);
      r.set_queue_seconds(absl::ToDoubleSeconds(f.timings.queue));
      r.set_prefill_seconds(absl::ToDoubleSeconds(f.timings.prefill));
      r.set_decode_seconds(absl::ToDoubleSeconds(f.timings.decode));
      if (f.matched_stop_token_id.has_value())
        r.set_matched_stop_token_id(static_cast<uint32_t>(*f.matched_stop_token_id));
      finish_after_writes_ = true;
    }
    MaybeWriteLocked();
  }
  void OnRejected(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    if (done_) return;
    FinishLocked(services::ToGrpcStatus(status));
  }

  // gRPC reactor:
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // the client is gone: end the call (the request is cancelled in OnCancel)
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    MaybeWriteLocked();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (ticket_ == 0)
      cancel_before_ticket_ = true;
    else
      loop_->Cancel(ticket_);
    // Every call must end with Finish; a write in progress finishes it in OnWriteDone.
    if (!writing_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }
  void OnDone() override {
    std::shared_ptr<GenerateStream> keep;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      keep = std::move(self_);  // the loop may still hold the sink; it outlives the RPC safely
    }
  }

 private:
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!pending_.empty()) {
      current_ = std::move(pending_.front());
      pending_.pop_front();
      writing_ = true;
      StartWrite(&current_);
      return;
    }
    if (finish_after_writes_) FinishLocked(grpc::Status::OK);
  }
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  SchedulerLoop* loop_;
  SchedulerLoop::GroupTag group_;  // set before Begin / Hold, read by Begin / Admit
  absl::Mutex mu_;
  // Set in Begin/Reject before any callback can run; moved out (under mu_) in OnDone.
  std::shared_ptr<GenerateStream> self_;
  SchedulerLoop::Ticket ticket_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancel_before_ticket_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);
  v1::GenerateResponse current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_after_writes_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

namespace {

absl::Status Invalid(const std::string& error) {
  return error.empty() ? absl::OkStatus() : absl::InvalidArgumentError(error);
}

// Every token id of the request against the vocabulary (when known), and the
// lists' sizes against the table.
absl::Status CheckTokenIds(const sched::RequestSpec& spec, const ModelLimits& model) {
  if (spec.prompt_token_ids.empty()) return absl::InvalidArgumentError("'prompt_token_ids' must not be empty");
  for (size_t i = 0; i < spec.prompt_token_ids.size(); ++i)
    ORCA_RETURN_IF_ERROR(Invalid(TokenIdError("prompt_token_ids", i, spec.prompt_token_ids[i], model.vocab_size)));
  ORCA_RETURN_IF_ERROR(Invalid(limits::kStopTokenIds.Check(static_cast<int64_t>(spec.stop_token_ids.size()))));
  for (size_t i = 0; i < spec.stop_token_ids.size(); ++i) {
    ORCA_RETURN_IF_ERROR(
        Invalid(TokenIdError(limits::kStopTokenIds.field, i, spec.stop_token_ids[i], model.vocab_size)));
  }
  for (const auto& [id, bias] : spec.sampling.logit_bias)
    ORCA_RETURN_IF_ERROR(Invalid(LogitBiasTokenError(id, model.vocab_size)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<sched::RequestSpec> SpecFromProto(const v1::GenerateRequest& req, absl::Time grpc_deadline,
                                                 const ModelLimits& model) {
  sched::RequestSpec spec;
  spec.caller_id = req.request_id();
  spec.prompt_token_ids.assign(req.prompt_token_ids().begin(), req.prompt_token_ids().end());
  spec.max_new_tokens = req.max_new_tokens();
  spec.min_new_tokens = req.min_new_tokens();
  ORCA_RETURN_IF_ERROR(Invalid(limits::kMaxNewTokens.Check(spec.max_new_tokens)));
  ORCA_RETURN_IF_ERROR(Invalid(limits::kMinTokens.Check(spec.min_new_tokens)));
  if (spec.min_new_tokens > spec.max_new_tokens)
    return absl::InvalidArgumentError(MinTokensError(spec.min_new_tokens, spec.max_new_tokens));
  spec.sampling = services::SamplingFromProto(req.sampling());
  ORCA_RETURN_IF_ERROR(Invalid(spec.sampling.Validate()));
  ORCA_RETURN_IF_ERROR(Invalid(CheckStructuredOutputLimits(spec.sampling.structured, model.vocab_size)));
  spec.stop_token_ids.assign(req.stop_token_ids().begin(), req.stop_token_ids().end());
  ORCA_RETURN_IF_ERROR(CheckTokenIds(spec, model));
  spec.ignore_eos = req.ignore_eos();
  spec.priority = req.priority();
  ORCA_RETURN_IF_ERROR(Invalid(limits::kPriority.Check(spec.priority)));
  spec.deadline = grpc_deadline;
  if (req.deadline_unix_millis() > 0)
    spec.deadline = std::min(spec.deadline, absl::FromUnixMillis(req.deadline_unix_millis()));
  return spec;
}

std::unique_ptr<ConstraintCompiler> SchedulerService::NewConstraintCompiler() {
  absl::StatusOr<std::unique_ptr<ConstraintCompiler>> compiler = ConstraintCompiler::Create({});
  ORCA_CHECK(compiler.ok()) << compiler.status();  // the default options are valid
  return *std::move(compiler);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* SchedulerService::Generate(grpc::CallbackServerContext* context,
                                                                           const v1::GenerateRequest* request) {
  auto stream = std::make_shared<GenerateStream>(loop_);
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) {
    stream->Reject(stream, auth);
    return stream.get();
  }
  const auto deadline = context->deadline();
  const absl::Time grpc_deadline =
      deadline == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture() : absl::FromChrono(deadline);
  absl::StatusOr<sched::RequestSpec> spec = SpecFromProto(*request, grpc_deadline, {.vocab_size = loop_->vocab_size()});
  if (!spec.ok()) {
    stream->Reject(stream, spec.status());
    return stream.get();
  }
  stream->SetGroup(*request);
  if (!spec->sampling.structured.enabled()) {
    stream->Begin(stream, std::move(*spec));
    return stream.get();
  }
  // Admitted only once its constraint compiles, off this thread (ConstraintCompiler).
  stream->Hold(stream);
  StructuredOutputSpec constraint = spec->sampling.structured;
  constraints_->Compile(std::move(constraint), [stream, spec = *std::move(spec)](absl::Status compiled) mutable {
    if (compiled.ok()) {
      stream->Admit(std::move(spec));
    } else {
      stream->OnRejected(compiled);
    }
  });
  return stream.get();
}

grpc::ServerUnaryReactor* SchedulerService::Cancel(grpc::CallbackServerContext* context,
                                                   const v1::CancelRequest* request, v1::CancelResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) {
    reactor->Finish(services::ToGrpcStatus(auth));
    return reactor;
  }
  loop_->CancelByCallerId(request->request_id(), [reactor, response](bool found) {
    response->set_found(found);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* SchedulerService::GetStats(grpc::CallbackServerContext* context, const v1::StatsRequest*,
                                                     v1::SchedulerStats* r) {
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(services::ToGrpcStatus(auth));
    return reactor;
  }
  const LoopStats s = loop_->stats();
  r->set_num_requests_running(s.scheduler.num_running);
  r->set_num_requests_waiting(s.scheduler.num_queued);
  r->set_kv_slots_used(s.scheduler.n_rsrv);
  r->set_kv_slots_total(s.scheduler.n_slots);
  r->set_batches_in_flight(s.scheduler.num_batches_in_flight);
  r->set_max_batch_size(s.max_bs);
  r->set_num_workers(s.n_workers);
  r->set_ready(s.engine_ready && !s.draining);
  r->set_not_ready_reason(s.draining ? "draining" : s.not_ready_reason);
  r->set_model_name(s.engine.model_name);
  r->set_max_context(s.engine.max_context);
  r->set_vocab_size(s.engine.vocab_size);
  r->set_draining(s.draining);
  r->set_queued_tokens(s.scheduler.queued_tokens);
  r->set_iterations(s.scheduler.num_iterations_completed);
  r->set_policy(s.policy);
  const sched::SchedulerOptions& o = s.options;
  r->set_max_num_batched_tokens(o.max_num_batched_tokens);
  r->set_max_prefill_slowdown(o.max_prefill_slowdown);
  r->set_long_prefill_token_threshold(o.long_prefill_token_threshold);
  r->set_prefix_caching(o.enable_prefix_caching);
  r->set_scheduling_order(sched::SchedulingOrderName(o.scheduling_order));
  r->set_priority_aging_millis(absl::ToInt64Milliseconds(o.priority_aging));
  r->set_kv_block_size(o.kv_block_size);
  r->set_num_preemptions(s.scheduler.num_preemptions);
  r->set_prefix_cache_queries(s.scheduler.kv.prefix_cache_queries);
  r->set_prefix_cache_hits(s.scheduler.kv.prefix_cache_hits);
  r->set_kv_blocks_cached(s.scheduler.kv.num_cached_blocks);
  r->set_max_request_kv_slots(s.scheduler.max_request_kv_slots);
  r->set_shares_group_prompts(s.scheduler.shares_group_prompts);
  r->set_kv_local_slots_used(s.scheduler.n_local_rsrv);
  r->set_kv_local_slots_total(s.scheduler.n_local_slots);
  r->set_sliding_window(s.scheduler.sliding_window);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* SchedulerService::StoreSet(grpc::CallbackServerContext* context,
                                                     const v1::StoreSetRequest* req, v1::StoreSetResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) {
    reactor->Finish(services::ToGrpcStatus(auth));
    return reactor;
  }
  if (req->key().empty() || req->value().size() > kMaxStoreValueBytes) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "key must be non-empty and value at most 1 MiB"));
    return reactor;
  }
  store_.Set(req->key(), req->value());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* SchedulerService::StoreGet(grpc::CallbackServerContext* context,
                                                     const v1::StoreGetRequest* req, v1::StoreGetResponse* resp) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = auth_.CheckCall(*context); !auth.ok()) {
    reactor->Finish(services::ToGrpcStatus(auth));
    return reactor;
  }
  const int64_t wait = std::clamp<int64_t>(req->wait_millis(), 0, kMaxStoreWaitMillis);
  store_.Get(req->key(), absl::Milliseconds(wait), [reactor, resp](std::optional<std::string> value) {
    resp->set_found(value.has_value());
    if (value.has_value()) resp->set_value(std::move(*value));
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace orca::scheduler
