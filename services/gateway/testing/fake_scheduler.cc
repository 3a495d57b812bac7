#include "services/gateway/testing/fake_scheduler.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/split_mix64.h"
#include "services/common/server_stream_writer.h"  // ORCA_GRPC_HANDS_OFF / ORCA_GRPC_REACTS

namespace orca::gateway::testing {
namespace {

using orca::v1::GenerateRequest;
using orca::v1::GenerateResponse;

uint64_t Mix(uint64_t h, uint64_t v) {
  // Combine (as boost::hash_combine), then a SplitMix64 step over the running hash.
  h ^= v + kSplitMix64Increment + (h << 6) + (h >> 2);
  return SplitMix64Hash(h);
}

uint64_t Salt(const GenerateRequest& request) {
  if (request.sampling().temperature() > 0.0f && request.sampling().has_seed()) {
    return Mix(1, request.sampling().seed());
  }
  return 0;
}

// Finishes at once with an error; deletes itself.
class ErrorReactor : public grpc::ServerWriteReactor<GenerateResponse> {
 public:
  explicit ErrorReactor(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

// ---- One Generate call ---------------------------------------------------------

class FakeScheduler::Stream : public grpc::ServerWriteReactor<GenerateResponse> {
 public:
  Stream(FakeScheduler* owner, GenerateRequest request, uint64_t salt, int64_t slots, std::optional<Failure> failure)
      : owner_(owner), request(std::move(request)), salt(salt), slots(slots), failure(std::move(failure)) {}

  void OnWriteDone(bool ok) override {
    ORCA_GRPC_REACTS(this);
    bool finish = false;
    {
      absl::MutexLock lock(&owner_->mu_);
      writing = false;
      if (!ok) {
        cancelled = true;
      } else if (finishing) {
        finished = true;
        finish = true;
        owner_->kv_slots_used_ -= slots;
      }
    }
    if (finish) Finish(grpc::Status::OK);
  }
  void OnCancel() override {
    ORCA_GRPC_REACTS(this);
    absl::MutexLock lock(&owner_->mu_);
    cancelled = true;
  }
  void OnDone() override {
    ORCA_GRPC_REACTS(this);
    {
      absl::MutexLock lock(&owner_->mu_);
      auto& streams = owner_->streams_;
      streams.erase(std::remove(streams.begin(), streams.end(), this), streams.end());
    }
    delete this;
  }

  FakeScheduler* const owner_;
  // Guarded by owner_->mu_.
  const GenerateRequest request;
  const uint64_t salt;
  const int64_t slots;
  const std::optional<Failure> failure;
  int generated = 0;
  bool writing = false;
  bool cancelled = false;
  bool finishing = false;  // the last message is being written
  bool finished = false;   // Finish called
  GenerateResponse out;    // the message in flight
};

// ---- The service ---------------------------------------------------------------

class FakeScheduler::Service : public orca::v1::Scheduler::CallbackService {
 public:
  explicit Service(FakeScheduler* owner) : owner_(owner) {}

  grpc::ServerWriteReactor<GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                       const GenerateRequest* request) override {
    FakeScheduler& s = *owner_;
    const Options& o = s.options_;
    grpc::Status error;
    Stream* stream = nullptr;
    {
      absl::MutexLock lock(&s.mu_);
      ++s.num_generate_calls_;
      auto auth = context->client_metadata().find("authorization");
      s.last_authorization_ =
          auth == context->client_metadata().end() ? "" : std::string(auth->second.data(), auth->second.size());
      s.requests_.push_back(*request);
      std::optional<Failure> failure;
      if (!s.failures_.empty()) {
        failure = s.failures_.front();
        s.failures_.erase(s.failures_.begin());
      }
      const int64_t prompt = request->prompt_token_ids_size();
      const int64_t need = prompt + request->max_new_tokens();
      if (s.stopping_ || !s.ready_) {
        error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake scheduler not ready");
      } else if (failure && failure->after_tokens == 0) {
        error = grpc::Status(failure->code, failure->message);
      } else if (prompt == 0 || request->max_new_tokens() <= 0) {
        error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty prompt or max_new_tokens <= 0");
      } else if (need > o.max_context) {
        error = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             absl::StrCat("prompt (", prompt, ") + max_new_tokens (", request->max_new_tokens(),
                                          ") exceeds max_context (", o.max_context, ")"));
      } else if ((o.max_running > 0 && static_cast<int>(s.streams_.size()) >= o.max_running) ||
                 s.kv_slots_used_ + need > o.n_slots) {
        error = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             absl::StrCat("queue full: ", s.streams_.size(), " running, ", s.kv_slots_used_, " of ",
                                          o.n_slots, " KV slots reserved"));
      } else {
        uint64_t salt = Salt(*request);
        if (request->sampling().temperature() > 0.0f && !request->sampling().has_seed()) {
          salt = Mix(2, ++s.unseeded_counter_);
        }
        stream = new Stream(owner_, *request, salt, need, failure);
        s.streams_.push_back(stream);
        s.kv_slots_used_ += need;
      }
    }
    if (stream == nullptr) return new ErrorReactor(error);
    ORCA_GRPC_HANDS_OFF(stream);  // to gRPC, which may run OnCancel/OnDone on another thread
    return stream;
  }

  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context, const orca::v1::CancelRequest* request,
                                   orca::v1::CancelResponse* response) override {
    {
      absl::MutexLock lock(&owner_->mu_);
      for (Stream* stream : owner_->streams_) {
        if (stream->request.request_id() == request->request_id() && !stream->finished) {
          stream->cancelled = true;
          response->set_found(true);
        }
      }
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context, const orca::v1::StatsRequest*,
                                     orca::v1::SchedulerStats* stats) override {
    const Options& o = owner_->options_;
    absl::Duration delay;
    {
      absl::MutexLock lock(&owner_->mu_);
      delay = owner_->stats_delay_;
    }
    absl::SleepFor(delay);  // on the callback thread: this fake serves tests, not load
    {
      absl::MutexLock lock(&owner_->mu_);
      stats->set_ready(owner_->ready_ && !owner_->stopping_);
      if (!owner_->ready_) stats->set_not_ready_reason("fake scheduler set not ready");
      stats->set_num_requests_running(static_cast<int32_t>(owner_->streams_.size()));
      stats->set_kv_slots_used(owner_->kv_slots_used_);
      stats->set_iterations(owner_->iterations_);
    }
    stats->set_kv_slots_total(o.n_slots);
    stats->set_max_request_kv_slots(o.max_request_kv_slots);
    stats->set_kv_block_size(o.kv_block_size);
    stats->set_shares_group_prompts(o.shares_group_prompts);
    stats->set_model_name(o.model_name);
    stats->set_max_context(o.max_context);
    stats->set_vocab_size(o.vocab_size);
    stats->set_max_batch_size(o.max_running);
    stats->set_num_workers(1);
    stats->set_policy("fake");
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  FakeScheduler* const owner_;
};

// ---- FakeScheduler ---------------------------------------------------------------

FakeScheduler::FakeScheduler(Options options) : options_(std::move(options)) { ready_ = options_.ready; }

absl::StatusOr<std::unique_ptr<FakeScheduler>> FakeScheduler::Start(Options options) {
  if (options.token_max <= options.token_min || options.token_min < 0 || options.token_max > options.vocab_size) {
    return absl::InvalidArgumentError("token range must be a non-empty part of the vocabulary");
  }
  std::unique_ptr<FakeScheduler> scheduler(new FakeScheduler(std::move(options)));
  scheduler->service_ = std::make_unique<Service>(scheduler.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(scheduler->options_.listen, grpc::InsecureServerCredentials(), &scheduler->port_);
  builder.RegisterService(scheduler->service_.get());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a used port is an error, as in every Orca server
  scheduler->server_ = builder.BuildAndStart();
  if (scheduler->server_ == nullptr || scheduler->port_ == 0) {
    return absl::UnavailableError("fake scheduler cannot listen on " + scheduler->options_.listen);
  }
  scheduler->loop_ = std::thread([s = scheduler.get()] { s->IterationLoop(); });
  return scheduler;
}

FakeScheduler::~FakeScheduler() { Shutdown(); }

void FakeScheduler::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !loop_.joinable()) return;
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
}

int32_t FakeScheduler::TokenAt(const GenerateRequest& request, int position) const {
  return TokenFor(Salt(request), request, position);
}

int32_t FakeScheduler::TokenFor(uint64_t salt, const GenerateRequest& request, int position) const {
  if (!options_.script.empty()) return options_.script[static_cast<size_t>(position) % options_.script.size()];
  uint64_t h = Mix(salt, static_cast<uint64_t>(position));
  for (int32_t id : request.prompt_token_ids()) h = Mix(h, static_cast<uint64_t>(id));
  const uint64_t range = static_cast<uint64_t>(options_.token_max - options_.token_min);
  return options_.token_min + static_cast<int32_t>(h % range);
}

void FakeScheduler::Step(Stream* stream) {
  const GenerateRequest& request = stream->request;
  GenerateResponse& out = stream->out;
  out.Clear();
  const int position = stream->generated;
  stream->writing = true;
  if (stream->failure && position >= stream->failure->after_tokens) {
    out.set_finish_reason(orca::v1::FINISH_REASON_ERROR);
    out.set_error(stream->failure->message);
    out.set_error_code(static_cast<int32_t>(stream->failure->code));
    stream->finishing = true;
    return;
  }
  orca::v1::FinishReason finish = orca::v1::FINISH_REASON_UNSPECIFIED;
  int32_t token = 0;
  const bool eos_allowed = !request.ignore_eos() && position + 1 > request.min_new_tokens();
  if (options_.eos_id >= 0 && eos_allowed && position + 1 == options_.eos_after) {
    token = options_.eos_id;
    finish = orca::v1::FINISH_REASON_STOP;
  } else {
    token = TokenFor(stream->salt, request, position);
    const auto& stops = request.stop_token_ids();
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) finish = orca::v1::FINISH_REASON_STOP;
  }
  if (position == 0 && request.sampling().has_prompt_logprobs()) {
    // Prompt position p (from 1) scores -p / 2 with rank (p % 3) + 1, and k alternatives below it.
    for (int p = 1; p < request.prompt_token_ids_size(); ++p) {
      orca::v1::SampledToken* lp = out.add_prompt_logprobs();
      lp->set_token_id(request.prompt_token_ids(p));
      lp->set_logprob(-0.5f * static_cast<float>(p));
      lp->set_rank(p % 3 + 1);
      for (int k = 0; k < request.sampling().prompt_logprobs(); ++k) {
        orca::v1::TopLogprob* top = lp->add_top_logprobs();
        top->set_token_id(options_.token_min + k);
        top->set_logprob(-0.1f * static_cast<float>(k + 1));
      }
    }
  }
  orca::v1::SampledToken* sampled = out.add_tokens();
  sampled->set_token_id(token);
  const uint64_t lp_hash = Mix(static_cast<uint64_t>(token), static_cast<uint64_t>(position));
  if (request.sampling().logprobs() || request.sampling().top_logprobs() > 0) {
    const float logprob = -0.01f - static_cast<float>(lp_hash % 1000) / 500.0f;
    sampled->set_logprob(logprob);
    const uint64_t range = static_cast<uint64_t>(options_.token_max - options_.token_min);
    for (int k = 0; k < request.sampling().top_logprobs(); ++k) {
      orca::v1::TopLogprob* top = sampled->add_top_logprobs();
      top->set_token_id(k == 0 ? token : options_.token_min + static_cast<int32_t>((lp_hash + 7919u * k) % range));
      top->set_logprob(logprob - static_cast<float>(k));
    }
  }
  ++stream->generated;
  if (finish == orca::v1::FINISH_REASON_UNSPECIFIED && stream->generated >= request.max_new_tokens()) {
    finish = orca::v1::FINISH_REASON_LENGTH;
  }
  if (finish != orca::v1::FINISH_REASON_UNSPECIFIED) {
    out.set_finish_reason(finish);
    out.set_prompt_tokens(request.prompt_token_ids_size());
    out.set_completion_tokens(stream->generated);
    if (finish == orca::v1::FINISH_REASON_STOP) out.set_matched_stop_token_id(static_cast<uint32_t>(token));
    stream->finishing = true;
  }
}

void FakeScheduler::IterationLoop() {
  while (true) {
    std::vector<Stream*> writes;
    std::vector<Stream*> cancels;
    bool exit = false;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (stopping_) return true;
        for (Stream* s : streams_) {
          if (!s->writing && !s->finished) return true;
        }
        return false;
      };
      mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Milliseconds(50));
      ++iterations_;
      for (Stream* s : streams_) {
        if (s->finished || s->writing) continue;
        if (s->cancelled || stopping_) {
          // Released at this iteration, as the real scheduler does.
          s->finished = true;
          kv_slots_used_ -= s->slots;
          ++num_cancelled_;
          cancels.push_back(s);
          continue;
        }
        Step(s);
        writes.push_back(s);
      }
      exit = stopping_ && streams_.empty();
    }
    // Outside the lock: gRPC may run reactions inline. Streams cannot go away
    // here: they are neither finished nor (for writes) able to finish until
    // their write completes.
    for (Stream* s : writes) {
      ORCA_GRPC_HANDS_OFF(s);  // gRPC runs OnWriteDone after this, on its own thread
      s->StartWrite(&s->out);
    }
    for (Stream* s : cancels) s->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled"));
    if (exit) return;
    if (options_.iteration_interval > absl::ZeroDuration()) {
      absl::SleepFor(options_.iteration_interval);
    } else if (writes.empty() && cancels.empty()) {
      absl::SleepFor(absl::Milliseconds(1));  // stopping: waiting for OnDone
    }
  }
}

void FakeScheduler::StallStats(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  stats_delay_ = delay;
}

void FakeScheduler::SetReady(bool ready) {
  absl::MutexLock lock(&mu_);
  ready_ = ready;
}

void FakeScheduler::FailNextGenerate(grpc::StatusCode code, std::string message, int after_tokens) {
  absl::MutexLock lock(&mu_);
  failures_.push_back(Failure{code, std::move(message), after_tokens});
}

int FakeScheduler::num_running() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const Stream* s : streams_) n += s->finished ? 0 : 1;
  return n;
}

int64_t FakeScheduler::kv_slots_used() const {
  absl::MutexLock lock(&mu_);
  return kv_slots_used_;
}

std::string FakeScheduler::last_authorization() const {
  absl::MutexLock lock(&mu_);
  return last_authorization_;
}

int64_t FakeScheduler::num_cancelled() const {
  absl::MutexLock lock(&mu_);
  return num_cancelled_;
}

int64_t FakeScheduler::num_generate_calls() const {
  absl::MutexLock lock(&mu_);
  return num_generate_calls_;
}

uint64_t FakeScheduler::iterations() const {
  absl::MutexLock lock(&mu_);
  return iterations_;
}

std::vector<GenerateRequest> FakeScheduler::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

bool FakeScheduler::WaitFor(const std::function<bool()>& condition, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace orca::gateway::testing
