#include "core/sched/scheduler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/common/kv_footprint.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"

namespace orca::sched {

/// Events of one scheduler call, one per request, in the order requests were first touched.
class Scheduler::EventList {
 public:
  RequestEvent& For(const Request& request) {
    auto [it, inserted] = index_.try_emplace(request.id(), events_.size());
    if (inserted) {
      RequestEvent& event = events_.emplace_back();
      event.request_id = request.id();
      event.caller_id = request.caller_id();
    }
    return events_[it->second];
  }
  std::vector<RequestEvent> Take() && { return std::move(events_); }

 private:
  std::vector<RequestEvent> events_;
  absl::flat_hash_map<RequestId, size_t> index_;
};

namespace {

absl::Status CheckTokenIds(const std::vector<int32_t>& ids, const char* field, int32_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] = ", ids[i], " is negative"));
    }
    if (vocab_size > 0 && ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] = ", ids[i], " is out of range for vocab_size (", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

std::string ErrorText(const absl::Status& error, const char* fallback) {
  return error.message().empty() ? std::string(fallback) : std::string(error.message());
}

}  // namespace

absl::Status Scheduler::ValidateOptions(const SchedulerOptions& options) {
  if (options.max_bs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_bs must be >= 1 (got ", options.max_bs, ")"));
  }
  if (options.n_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("n_workers must be >= 1 (got ", options.n_workers, ")"));
  }
  if (options.max_context < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_context must be >= 0, 0 = no limit (got ", options.max_context, ")"));
  }
  if (options.vocab_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size must be >= 0, 0 = unchecked (got ", options.vocab_size, ")"));
  }
  if (options.max_queued_requests < 0 || options.max_queued_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_requests and max_queued_tokens must be >= 0, 0 = unlimited (got ",
                     options.max_queued_requests, " and ", options.max_queued_tokens, ")"));
  }
  if (options.max_num_batched_tokens < 0 ||
      (options.max_num_batched_tokens > 0 && options.max_num_batched_tokens < options.max_bs)) {
    return absl::InvalidArgumentError(absl::StrCat("max_num_batched_tokens must be 0 (off) or >= max_bs (",
                                                   options.max_bs, ") so that every decode fits (got ",
                                                   options.max_num_batched_tokens, ")"));
  }
  if (!(options.max_prefill_slowdown == 0 ||
        (options.max_prefill_slowdown > 1 && options.max_prefill_slowdown <= 1000))) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_prefill_slowdown must be 0 (off) or in (1, 1000] (got ", options.max_prefill_slowdown, ")"));
  }
  if (options.long_prefill_token_threshold < 0) {
    return absl::InvalidArgumentError(absl::StrCat("long_prefill_token_threshold must be >= 0, 0 = off (got ",
                                                   options.long_prefill_token_threshold, ")"));
  }
  if (options.policy == PolicyKind::kRequestLevel &&
      (options.max_num_batched_tokens > 0 || options.max_prefill_slowdown > 0 ||
       options.long_prefill_token_threshold > 0 || options.scheduling_order != SchedulingOrder::kFcfs)) {
    return absl::InvalidArgumentError(
        "the request-level baseline takes neither max_num_batched_tokens, max_prefill_slowdown, "
        "long_prefill_token_threshold nor scheduling_order priority");
  }
  if (options.num_microbatches < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches must be >= 0, 0 = n_workers (got ", options.num_microbatches, ")"));
  }
  if (options.policy != PolicyKind::kRequestLevel && (options.num_microbatches > 0 || options.faster_transformer)) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches and faster_transformer apply to the "
                     "request-level baseline only (policy is ",
                     PolicyKindName(options.policy), ")"));
  }
  if (options.faster_transformer && options.enable_prefix_caching) {
    return absl::InvalidArgumentError(
        "faster_transformer pads prompts with engine-owned KV: it does not combine with enable_prefix_caching");
  }
  if (!(options.max_request_kv_share > 0 && options.max_request_kv_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_request_kv_share must be in (0, 1], 1 = no cap (got ", options.max_request_kv_share, ")"));
  }
  if (options.sliding_window < 0 || options.kv_local_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sliding_window (", options.sliding_window, ") and kv_local_slots (",
                                                   options.kv_local_slots, ") must be >= 0, 0 = none"));
  }
  if (options.kv_local_slots > 0 && options.sliding_window == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_local_slots (", options.kv_local_slots,
                                                   ") is a pool for sliding-window layers but sliding_window is 0"));
  }
  if (options.kv_local_slots > 0 && options.enable_prefix_caching) {
    return absl::InvalidArgumentError(absl::StrCat(
        "enable_prefix_caching needs every cached position's KV, but the workers keep only the last ",
        options.sliding_window, " positions of the model's sliding-window layers (a separate pool of ",
        options.kv_local_slots,
        " KV slots): a cached prefix's window would be gone. Start the workers with --swa-full (those layers then "
        "keep every position in the main pool) or turn prefix caching off"));
  }
  if (options.priority_aging < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("priority_aging must be >= 0, 0 = strict priority (got ",
                                                   absl::FormatDuration(options.priority_aging), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(SchedulerOptions options) {
  ORCA_RETURN_IF_ERROR(ValidateOptions(options));
  KvManager::Options kv_options;
  kv_options.n_slots = options.n_slots;
  kv_options.block_size = options.kv_block_size;
  kv_options.mode = options.policy == PolicyKind::kPaged ? KvMode::kPaged : KvMode::kReserved;
  kv_options.prefix_caching = options.enable_prefix_caching;
  // A static batch cannot wait for a leader's prompt blocks.
  kv_options.share_group_prompts = options.policy != PolicyKind::kRequestLevel;
  kv_options.sliding_window = options.sliding_window;
  kv_options.n_local_slots = options.kv_local_slots;
  // The most prompt tokens TokenBudgetPolicy computes for one request in one iteration.
  for (int32_t cap : {options.max_num_batched_tokens, options.long_prefill_token_threshold}) {
    if (cap > 0 && (kv_options.max_prefill_chunk == 0 || cap < kv_options.max_prefill_chunk)) {
      kv_options.max_prefill_chunk = cap;
    }
  }
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<KvManager> kv, KvManager::Create(kv_options));
  PolicyOptions policy_options;
  policy_options.kind = options.policy;
  policy_options.n_workers = options.n_workers;
  policy_options.num_microbatches = options.num_microbatches;
  policy_options.faster_transformer = options.faster_transformer;
  policy_options.max_context = options.max_context;
  policy_options.max_num_batched_tokens = options.max_num_batched_tokens;
  policy_options.max_prefill_slowdown = options.max_prefill_slowdown;
  policy_options.long_prefill_token_threshold = options.long_prefill_token_threshold;
  policy_options.order = options.scheduling_order;
  policy_options.priority_aging = options.priority_aging;
  std::unique_ptr<SchedulingPolicy> policy = CreatePolicy(policy_options);
  if (policy == nullptr) return absl::InvalidArgumentError("unknown scheduling policy");
  return std::unique_ptr<Scheduler>(new Scheduler(options, std::move(kv), std::move(policy)));
}

Scheduler::Scheduler(SchedulerOptions options, std::unique_ptr<KvManager> kv, std::unique_ptr<SchedulingPolicy> policy)
    : options_(options), kv_(std::move(kv)), policy_(std::move(policy)) {}

absl::Status Scheduler::ValidateSpec(const RequestSpec& spec) const {
  if (spec.prompt_token_ids.empty()) {
    return absl::InvalidArgumentError("prompt_token_ids must not be empty");
  }
  if (spec.prompt_token_ids.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("prompt_token_ids has ", spec.prompt_token_ids.size(), " tokens"));
  }
  ORCA_RETURN_IF_ERROR(CheckTokenIds(spec.prompt_token_ids, "prompt_token_ids", options_.vocab_size));
  ORCA_RETURN_IF_ERROR(CheckTokenIds(spec.stop_token_ids, "stop_token_ids", 0));
  ORCA_RETURN_IF_ERROR(CheckTokenIds(spec.eos_token_ids, "eos_token_ids", 0));
  if (spec.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_new_tokens must be >= 1 (got ", spec.max_new_tokens, ")"));
  }
  if (spec.min_new_tokens < 0 || spec.min_new_tokens > spec.max_new_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("min_new_tokens (", spec.min_new_tokens,
                                                   ") must be in [0, max_new_tokens (", spec.max_new_tokens, ")]"));
  }
  if (std::string problem = spec.sampling.Validate(); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", problem));
  }
  if (spec.priority < -kMaxPriority || spec.priority > kMaxPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority must be in [", -kMaxPriority, ", ", kMaxPriority, "] (got ", spec.priority, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> Scheduler::EffectiveMaxNewTokens(const RequestSpec& spec) const {
  const int64_t prompt = static_cast<int64_t>(spec.prompt_token_ids.size());
  if (options_.max_context == 0) return spec.max_new_tokens;
  if (prompt >= options_.max_context) {
    return absl::OutOfRangeError(absl::StrCat("prompt (", prompt,
                                              " tokens) leaves no room for new tokens within "
                                              "the model context (max_context ",
                                              options_.max_context, ")"));
  }
  const int64_t context_remaining = options_.max_context - prompt;
  return static_cast<int32_t>(std::min<int64_t>(spec.max_new_tokens, context_remaining));
}

absl::Status Scheduler::CheckQueueLimits(int64_t num_requests, int64_t prompt_tokens) const {
  const int64_t prompt = prompt_tokens;
  if (options_.max_queued_tokens > 0 && prompt > options_.max_queued_tokens) {
    // Could never be queued, however empty the queue: not a transient condition.
    return absl::InvalidArgumentError(absl::StrCat("prompt", num_requests > 1 ? "s" : "", " (", prompt,
                                                   " tokens) exceed", num_requests > 1 ? "" : "s",
                                                   " max_queued_tokens (", options_.max_queued_tokens, ")"));
  }
  if (options_.max_queued_requests > 0 && num_queued_ + num_requests > options_.max_queued_requests) {
    return absl::ResourceExhaustedError(absl::StrCat("queue is full: ", num_queued_, " requests waiting",
                                                     num_requests > 1 ? absl::StrCat(" + ", num_requests) : "",
                                                     " (max_queued_requests ", options_.max_queued_requests, ")"));
  }
  if (options_.max_queued_tokens > 0 && queued_tokens_ + prompt > options_.max_queued_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat("queue is full: ", queued_tokens_, " prompt tokens waiting + ",
                                                     prompt, " would exceed max_queued_tokens (",
                                                     options_.max_queued_tokens, ")"));
  }
  return absl::OkStatus();
}

int64_t Scheduler::max_request_kv_slots() const {
  return MaxRequestKvSlots(options_.n_slots, options_.max_request_kv_share, options_.kv_block_size);
}

absl::StatusOr<Scheduler::Checked> Scheduler::CheckSpec(const RequestSpec& spec, absl::Time now) const {
  ORCA_RETURN_IF_ERROR(ValidateSpec(spec));
  Checked checked;
  ORCA_ASSIGN_OR_RETURN(checked.max_new_tokens, EffectiveMaxNewTokens(spec));
  const int64_t prompt = static_cast<int64_t>(spec.prompt_token_ids.size());
  const int64_t num_tokens = prompt + checked.max_new_tokens;
  const KvSlotBudget& budget = kv_->slot_budget();
  checked.kv_reservation_slots = budget.ReservationFor(num_tokens);
  if (checked.kv_reservation_slots > budget.n_slots()) {
    std::string message = absl::StrCat("prompt (", prompt, " tokens) + max_new_tokens (", spec.max_new_tokens);
    if (checked.max_new_tokens != spec.max_new_tokens) {
      absl::StrAppend(&message, ", capped to ", checked.max_new_tokens, " by max_context ", options_.max_context);
    }
    absl::StrAppend(&message, ") = ", num_tokens);
    if (checked.kv_reservation_slots != num_tokens) {
      absl::StrAppend(&message, " (", checked.kv_reservation_slots, " rounded up to kv_block_size ",
                      budget.kv_block_size(), ")");
    }
    absl::StrAppend(&message, " exceeds n_slots (", budget.n_slots(), ")");
    if (kv_->has_local_pool()) absl::StrAppend(&message, ", the full-attention layers' KV pool");
    return absl::InvalidArgumentError(message);
  }
  ORCA_RETURN_IF_ERROR(CheckLocalFit(prompt, checked.max_new_tokens));
  if (spec.deadline <= now) {
    return absl::DeadlineExceededError("deadline had already passed at submit");
  }
  if (!spec.caller_id.empty() && pool_.FindByCallerId(spec.caller_id).has_value()) {
    return absl::AlreadyExistsError(absl::StrCat("request id '", spec.caller_id, "' is already in use"));
  }
  return checked;
}

absl::Status Scheduler::CheckLocalFit(int64_t prompt, int32_t max_new_tokens) const {
  if (!kv_->has_local_pool()) return absl::OkStatus();
  const int64_t num_tokens = prompt + max_new_tokens;
  // Its longest iteration: the prompt (reserved mode is never preempted), or with paged KV
  // a readmission's prompt + generated tokens, each capped by the policy's prefill chunk.
  const int64_t need = kv_->LocalBlocksBound(num_tokens, kv_->paged() ? num_tokens : prompt);
  if (need <= kv_->num_local_blocks()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "prompt (", prompt, " tokens) + max_new_tokens (", max_new_tokens, ") need ", need, " blocks of ",
      kv_->block_size(), " tokens at once in the sliding-window layers' KV pool (window ", kv_->sliding_window(),
      " tokens plus one iteration's tokens), more than its ", kv_->num_local_blocks(), " (kv_local_slots ",
      options_.kv_local_slots, ")"));
}

absl::Status Scheduler::CheckKvShare(const std::vector<RequestSpec>& specs, const std::vector<Checked>& checked) const {
  const auto n = static_cast<int64_t>(specs.size());
  const int64_t prompt = static_cast<int64_t>(specs.front().prompt_token_ids.size());
  bool prompt_logprobs = false;
  int64_t footprint = 0;
  int32_t max_new_tokens = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    prompt_logprobs |= specs[i].sampling.WantsPromptLogprobs();
    footprint += checked[i].kv_reservation_slots;
    max_new_tokens = std::max(max_new_tokens, checked[i].max_new_tokens);
  }
  const int64_t shared = kv_->SharedPromptSlots(prompt, n, prompt_logprobs);
  footprint -= (n - 1) * shared;
  const int64_t cap = max_request_kv_slots();
  if (footprint <= cap) return absl::OkStatus();
  std::string message =
      n == 1 ? absl::StrCat("prompt (", prompt, " tokens) + max_new_tokens (", max_new_tokens, ") take ", footprint)
             : absl::StrCat("n = ", n, " sequences of one prompt (", prompt, " tokens, ",
                            shared > 0 ? "its full blocks shared" : "each its own copy", ") with max_new_tokens (",
                            max_new_tokens, ") take ", footprint);
  absl::StrAppend(&message, " KV slots, over the per-request limit of ", cap, " (max_request_kv_share ",
                  options_.max_request_kv_share, " of n_slots ", options_.n_slots, ")");
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<RequestId> Scheduler::Submit(RequestSpec spec, absl::Time now) {
  std::vector<RequestSpec> specs;
  specs.push_back(std::move(spec));
  ORCA_ASSIGN_OR_RETURN(std::vector<RequestId> ids, SubmitGroup(std::move(specs), now));
  return ids.front();
}

absl::StatusOr<std::vector<RequestId>> Scheduler::SubmitGroup(std::vector<RequestSpec> specs, absl::Time now) {
  if (draining_) {
    return absl::FailedPreconditionError("scheduler is draining: not admitting new requests");
  }
  const auto n = static_cast<int64_t>(specs.size());
  if (n < 1 || n > kMaxGroupSize) {
    return absl::InvalidArgumentError(absl::StrCat("a group has 1 to ", kMaxGroupSize, " requests (got ", n, ")"));
  }
  std::vector<Checked> checked;
  checked.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StatusOr<Checked> c = CheckSpec(specs[i], now);
    if (!c.ok() && n > 1) {
      return absl::Status(c.status().code(), absl::StrCat("group member ", i, ": ", c.status().message()));
    }
    ORCA_RETURN_IF_ERROR(c.status());
    if (i > 0 && specs[i].prompt_token_ids != specs[0].prompt_token_ids) {
      return absl::InvalidArgumentError(absl::StrCat("group member ", i, "'s prompt differs from member 0's"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (!specs[i].caller_id.empty() && specs[i].caller_id == specs[j].caller_id) {
        return absl::AlreadyExistsError(
            absl::StrCat("request id '", specs[i].caller_id, "' is used twice in the group"));
      }
    }
    checked.push_back(*c);
  }
  ORCA_RETURN_IF_ERROR(CheckKvShare(specs, checked));
  const int64_t prompt = static_cast<int64_t>(specs.front().prompt_token_ids.size());
  ORCA_RETURN_IF_ERROR(CheckQueueLimits(n, n * prompt));

  std::vector<RequestId> ids;
  std::vector<const Request*> members;
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestId id = next_request_id_++;
    auto request = std::make_unique<Request>(id, std::move(specs[i]), checked[i].max_new_tokens,
                                             checked[i].kv_reservation_slots, now);
    if (n > 1) request->set_group_id(ids.empty() ? id : ids.front());
    members.push_back(request.get());
    pool_.Add(std::move(request));
    ids.push_back(id);
  }
  num_queued_ += static_cast<int32_t>(n);
  queued_tokens_ += n * prompt;
  if (n > 1) kv_->AddGroup(members);  // false: they do not share, and are ordinary requests
  return ids;
}

std::optional<IterationPlan> Scheduler::Schedule(absl::Time now) {
  if (static_cast<int32_t>(in_flight_.size()) >= options_.n_workers) return std::nullopt;
  Selection selection = policy_->Select(pool_, *kv_, options_.max_bs);
  for (RequestId id : selection.preempted) PreemptRequest(id);
  if (selection.batch.empty() && !selection.preempted.empty()) {
    // What the preemption freed may let someone run right away.
    selection = policy_->Select(pool_, *kv_, options_.max_bs);
    for (RequestId id : selection.preempted) PreemptRequest(id);
  }
  if (selection.batch.empty()) return std::nullopt;
  ORCA_CHECK(static_cast<int32_t>(selection.batch.size()) <= options_.max_bs)
      << "policy selected " << selection.batch.size() << " requests with max_bs " << options_.max_bs;

  IterationPlan plan;
  plan.iteration_id = next_iteration_id_++;
  plan.requests.reserve(selection.batch.size());
  std::vector<RequestId> members;
  members.reserve(selection.batch.size());
  for (const BatchEntry& entry : selection.batch) {
    plan.requests.push_back(StartEntry(entry, plan.iteration_id, now));
    members.push_back(entry.request_id);
  }
  num_in_flight_requests_ += static_cast<int32_t>(members.size());
  plan.released_request_ids = std::move(pending_releases_);
  pending_releases_.clear();
  in_flight_.emplace(plan.iteration_id, InFlightIteration{std::move(members), plan.NumTokens(), now});
  return plan;
}

ScheduledRequest Scheduler::StartEntry(const BatchEntry& entry, IterationId iteration_id, absl::Time now) {
  const RequestId id = entry.request_id;
  Request* request = pool_.Find(id);
  ORCA_CHECK(request != nullptr && !request->finished() && !request->in_flight())
      << "policy selected request " << id << " which is not selectable";
  ORCA_CHECK(kv_->holds(id)) << "policy selected request " << id << " without its KV";
  if (request->state() == RequestState::kQueued) {
    request->Admit(now, kv_->num_cached_tokens(id));
    --num_queued_;
    queued_tokens_ -= request->num_prompt_tokens();
    ++num_admitted_;
  }
  const int32_t block_size = kv_->owns_block_tables() ? kv_->block_size() : 0;
  ScheduledRequest scheduled =
      request->StartIteration(iteration_id, entry.num_tokens, kv_->TakeNewBlockIds(id), block_size);
  kv_->OnIterationStarted(*request, scheduled.start_position, static_cast<int32_t>(scheduled.input_token_ids.size()));
  // The FasterTransformer baseline: padding at a new member's initiation, and the KV bound
  // of a member that decodes until its batch ends.
  if (scheduled.new_request.has_value()) {
    scheduled.num_padding_tokens = entry.num_padding_tokens;
    if (entry.kv_reservation_slots > 0) scheduled.new_request->kv_reservation_slots = entry.kv_reservation_slots;
  }
  return scheduled;
}

void Scheduler::PreemptRequest(RequestId id) {
  Request* request = pool_.Find(id);
  ORCA_CHECK(request != nullptr && request->state() == RequestState::kWaitingNextIteration)
      << "policy preempted request " << id << " which is not between iterations";
  ORCA_CHECK(!kv_->holds(id)) << "policy preempted request " << id << " without freeing its KV";
  if (request->sent_to_engine()) pending_releases_.push_back(id);
  request->Preempt();
  --num_admitted_;
  ++num_queued_;
  queued_tokens_ += request->num_prompt_tokens();
  ++num_preemptions_;
}

absl::StatusOr<Scheduler::InFlightIteration> Scheduler::TakeInFlight(IterationId iteration_id) {
  auto it = in_flight_.find(iteration_id);
  if (it == in_flight_.end()) {
    return absl::NotFoundError(absl::StrCat("iteration ", iteration_id, " is not in flight"));
  }
  InFlightIteration iteration = std::move(it->second);
  in_flight_.erase(it);
  num_in_flight_requests_ -= static_cast<int32_t>(iteration.members.size());
  return iteration;
}

absl::StatusOr<std::vector<RequestEvent>> Scheduler::OnIterationDone(IterationId iteration_id,
                                                                     absl::Span<const RequestResult> results,
                                                                     absl::Time now) {
  ORCA_ASSIGN_OR_RETURN(const InFlightIteration iteration, TakeInFlight(iteration_id));
  const std::vector<RequestId>& members = iteration.members;
  ++num_iterations_completed_;
  policy_->OnIterationMeasured(iteration.num_tokens, now - iteration.scheduled_at);

  absl::flat_hash_map<RequestId, const SampledToken*> tokens;
  absl::flat_hash_map<RequestId, const RequestResult*> prompt_logprobs;
  absl::flat_hash_map<RequestId, const absl::Status*> failures;
  tokens.reserve(results.size());
  for (const RequestResult& result : results) {
    if (!result.error.ok()) failures.emplace(result.request_id, &result.error);
    if (result.has_token) tokens.emplace(result.request_id, &result.token);
    if (!result.prompt_logprobs.empty()) prompt_logprobs.emplace(result.request_id, &result);
  }

  EventList events;
  for (RequestId id : members) {
    Request* request = pool_.Find(id);
    ORCA_CHECK(request != nullptr && request->in_flight())
        << "member " << id << " of iteration " << iteration_id << " is not in flight";
    if (request->cancel_requested()) {
      // Cancelled while in flight: the token it brings back is discarded.
      FinishRequest(*request, request->pending_cancel_cause(), "", now, events);
      continue;
    }
    if (auto f = failures.find(id); f != failures.end()) {
      // The engine cannot serve this request; the others of the batch go on.
      FinishRequest(*request, FinishCause::kError, std::string(f->second->message()), now, events, f->second->code());
      continue;
    }
    if (auto p = prompt_logprobs.find(id);
        p != prompt_logprobs.end() && request->spec().sampling.WantsPromptLogprobs()) {
      std::vector<SampledToken> fresh;
      request->TakeNewPromptLogprobs(p->second->prompt_first_position, p->second->prompt_logprobs, &fresh);
      if (!fresh.empty()) events.For(*request).new_prompt_logprobs = std::move(fresh);
    }
    if (!request->in_flight_samples()) {
      // A prompt chunk that does not reach the end of the prompt: no token to expect.
      request->CompleteChunk();
      kv_->OnTokensComputed(*request);
      continue;
    }
    auto found = tokens.find(id);
    if (found == tokens.end()) {
      FinishRequest(*request, FinishCause::kError,
                    absl::StrCat("the engine returned no token for request ", id, " in iteration ", iteration_id), now,
                    events);
      continue;
    }
    const SampledToken& token = *found->second;
    if (token.token_id < 0 || (options_.vocab_size > 0 && token.token_id >= options_.vocab_size)) {
      FinishRequest(
          *request, FinishCause::kError,
          absl::StrCat("the engine returned token id ", token.token_id, " outside the vocabulary for request ", id),
          now, events);
      continue;
    }
    // A member padding out with its static batch (FasterTransformer): computed, discarded.
    const bool discarded = request->padding_out();
    const FinishCause cause = request->CompleteIteration(token, now);
    kv_->OnTokensComputed(*request);
    if (discarded) continue;
    events.For(*request).new_tokens.push_back(token);
    if (cause == FinishCause::kNone) continue;
    if (policy_->KeepsFinishedMembersComputing()) {
      request->BeginPadOut(cause);
    } else {
      FinishRequest(*request, cause, "", now, events);
    }
  }
  FinishEndedMembers(now, events);
  return std::move(events).Take();
}

void Scheduler::FinishEndedMembers(absl::Time now, EventList& events) {
  for (RequestId id : policy_->FinishedMembers(pool_)) {
    Request* request = pool_.Find(id);
    ORCA_CHECK(request != nullptr && request->padding_out() && !request->in_flight() && !request->finished())
        << "policy ended request " << id << " which is not padding out between iterations";
    FinishRequest(*request, request->pad_out_cause(), "", now, events);
  }
}

absl::StatusOr<std::vector<RequestEvent>> Scheduler::OnIterationFailed(IterationId iteration_id,
                                                                       const absl::Status& error, absl::Time now) {
  ORCA_ASSIGN_OR_RETURN(const InFlightIteration iteration, TakeInFlight(iteration_id));
  EventList events;
  FailBatch(iteration.members, ErrorText(error, "iteration failed"), error.code(), now, events);
  FinishEndedMembers(now, events);
  return std::move(events).Take();
}

std::vector<RequestEvent> Scheduler::FailAll(const absl::Status& error, absl::Time now) {
  const std::string message = ErrorText(error, "the engine pipeline failed");
  EventList events;
  auto batches = std::move(in_flight_);
  in_flight_.clear();
  num_in_flight_requests_ = 0;
  for (const auto& [iteration_id, iteration] : batches) {
    FailBatch(iteration.members, message, error.code(), now, events);
  }
  std::vector<RequestId> waiting;
  for (const auto& [id, request] : pool_) {
    if (request->state() == RequestState::kWaitingNextIteration) waiting.push_back(id);
  }
  FailBatch(waiting, message, error.code(), now, events);
  kv_->ClearPrefixCache();
  return std::move(events).Take();
}

void Scheduler::FailBatch(const std::vector<RequestId>& members, const std::string& error_message,
                          absl::StatusCode error_code, absl::Time now, EventList& events) {
  for (RequestId id : members) {
    Request* request = pool_.Find(id);
    if (request == nullptr || request->finished()) continue;
    if (request->cancel_requested()) {
      FinishRequest(*request, request->pending_cancel_cause(), "", now, events);
    } else {
      FinishRequest(*request, FinishCause::kError, error_message, now, events,
                    error_code == absl::StatusCode::kOk ? absl::StatusCode::kInternal : error_code);
    }
  }
}

CancelResult Scheduler::Cancel(RequestId id, absl::Time now) {
  return CancelWithCause(id, FinishCause::kCancelled, now);
}

CancelResult Scheduler::CancelWithCause(RequestId id, FinishCause cause, absl::Time now) {
  CancelResult result;
  Request* request = pool_.Find(id);
  if (request == nullptr) return result;
  result.found = true;
  if (request->finished()) return result;
  if (request->in_flight()) {
    request->RequestCancel(cause);
    return result;
  }
  EventList events;
  FinishRequest(*request, cause, "", now, events);
  FinishEndedMembers(now, events);
  result.events = std::move(events).Take();
  return result;
}

std::vector<RequestEvent> Scheduler::ExpireDeadlines(absl::Time now) {
  std::vector<RequestId> expired;
  for (const auto& [id, request] : pool_) {
    if (!request->finished() && !request->cancel_requested() && request->spec().deadline <= now) {
      expired.push_back(id);
    }
  }
  std::vector<RequestEvent> events;
  for (RequestId id : expired) {
    CancelResult result = CancelWithCause(id, FinishCause::kDeadlineExceeded, now);
    for (RequestEvent& event : result.events) events.push_back(std::move(event));
  }
  return events;
}

void Scheduler::FinishRequest(Request& request, FinishCause cause, std::string error_message, absl::Time now,
                              EventList& events, absl::StatusCode error_code) {
  const RequestState before = request.state();
  if (before == RequestState::kQueued) {
    --num_queued_;
    queued_tokens_ -= request.num_prompt_tokens();
    kv_->ForgetQueued(request);
  } else if (IsAdmitted(before)) {
    kv_->Free(request.id());
    --num_admitted_;
  }
  if (request.sent_to_engine()) pending_releases_.push_back(request.id());
  request.Finish(cause, std::move(error_message), error_code);

  for (RequestId visible_id : policy_->OnRequestFinished(request)) {
    Request* visible = pool_.Find(visible_id);
    ORCA_CHECK(visible != nullptr && visible->finished())
        << "policy delivered request " << visible_id << " which has not finished";
    events.For(*visible).finish = visible->BuildFinishInfo(now);
    pool_.Remove(visible_id);
  }
}

std::vector<RequestId> Scheduler::TakeReleasedRequestIds() {
  std::vector<RequestId> released = std::move(pending_releases_);
  pending_releases_.clear();
  return released;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats stats;
  stats.num_queued = num_queued_;
  stats.num_running = num_admitted_;
  stats.num_in_flight_requests = num_in_flight_requests_;
  stats.num_batches_in_flight = static_cast<int32_t>(in_flight_.size());
  stats.kv = kv_->stats();
  stats.n_rsrv = stats.kv.num_used_slots;
  stats.n_slots = stats.kv.n_slots;
  stats.n_local_rsrv = stats.kv.num_local_used_slots;
  stats.n_local_slots = stats.kv.n_local_slots;
  stats.sliding_window = options_.sliding_window;
  stats.num_preemptions = num_preemptions_;
  stats.queued_tokens = queued_tokens_;
  stats.max_request_kv_slots = max_request_kv_slots();
  stats.shares_group_prompts = kv_->shares_group_prompts();
  stats.num_iterations_scheduled = next_iteration_id_ - 1;
  stats.num_iterations_completed = num_iterations_completed_;
  stats.num_pending_releases = static_cast<int32_t>(pending_releases_.size());
  stats.draining = draining_;
  return stats;
}

std::optional<RequestSnapshot> Scheduler::GetRequest(RequestId id) const {
  const Request* request = pool_.Find(id);
  if (request == nullptr) return std::nullopt;
  RequestSnapshot snapshot;
  snapshot.id = request->id();
  snapshot.caller_id = request->caller_id();
  snapshot.state = request->state();
  snapshot.next_phase = request->next_phase();
  snapshot.num_prompt_tokens = request->num_prompt_tokens();
  snapshot.num_generated_tokens = request->num_generated_tokens();
  snapshot.max_new_tokens = request->max_new_tokens();
  snapshot.reserved_slots = request->kv_reservation_slots();
  // What it reserves once admitted: the FasterTransformer baseline's padded footprint, a
  // sharing group member's own part.
  if (!kv_->paged() && kv_->holds(id)) snapshot.reserved_slots = kv_->reserved_slots(id);
  snapshot.local_blocks = kv_->local_blocks(id);
  if (request->state() == RequestState::kQueued) {
    snapshot.slots_to_admit = kv_->SlotsToAdmit(*request);
    if (!kv_->paged()) snapshot.local_blocks_to_admit = kv_->LocalBlocksToAdmit(*request, 0);
  }
  snapshot.group_id = request->group_id();
  snapshot.waits_for_shared_prompt = kv_->WaitsForSharedPrompt(*request);
  snapshot.kv_reserved_by_group = kv_->ReservedWithGroup(*request);
  snapshot.priority = request->priority();
  snapshot.arrival_time = request->arrival_time();
  snapshot.num_computed_tokens = request->num_computed_tokens();
  snapshot.num_cached_tokens = request->num_cached_tokens();
  snapshot.num_preemptions = request->num_preemptions();
  snapshot.num_iterations_scheduled = request->num_iterations_scheduled();
  snapshot.num_iterations_completed = request->num_iterations_completed();
  snapshot.in_flight_iteration = request->in_flight_iteration();
  snapshot.cancel_requested = request->cancel_requested();
  snapshot.padding_out = request->padding_out();
  return snapshot;
}

std::optional<RequestId> Scheduler::FindRequest(const std::string& caller_id) const {
  if (caller_id.empty()) return std::nullopt;
  return pool_.FindByCallerId(caller_id);
}

}  // namespace orca::sched
