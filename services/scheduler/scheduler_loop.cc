#include "services/scheduler/scheduler_loop.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"

namespace orca::scheduler {
namespace {

// How long the loop sleeps with nothing to do; deadlines are checked at this pace.
constexpr absl::Duration kIdleWake = absl::Milliseconds(20);

const char* FinishedReason(sched::RequestState state) {
  switch (state) {
    case sched::RequestState::kFinishedStop:
      return "stop";
    case sched::RequestState::kFinishedLength:
      return "length";
    case sched::RequestState::kFinishedCancelled:
      return "cancelled";
    default:
      return "error";
  }
}

}  // namespace

std::string SchedulingConfigJson(const LoopStats& s) {
  const sched::SchedulerOptions& o = s.options;
  return absl::StrCat(
      "{\"policy\":\"", sched::PolicyKindName(o.policy), "\",\"max_bs\":", o.max_bs, ",\"n_slots\":", o.n_slots,
      ",\"n_workers\":", o.n_workers, ",\"num_microbatches\":", o.num_microbatches,
      ",\"faster_transformer\":", o.faster_transformer ? "true" : "false", ",\"kv_block_size\":", o.kv_block_size,
      ",\"max_num_batched_tokens\":", o.max_num_batched_tokens, ",\"max_prefill_slowdown\":", o.max_prefill_slowdown,
      ",\"long_prefill_token_threshold\":", o.long_prefill_token_threshold,
      ",\"enable_prefix_caching\":", o.enable_prefix_caching ? "true" : "false", ",\"scheduling_order\":\"",
      sched::SchedulingOrderName(o.scheduling_order),
      "\",\"priority_aging_ms\":", absl::ToInt64Milliseconds(o.priority_aging),
      ",\"max_request_kv_share\":", o.max_request_kv_share, ",\"sliding_window\":", o.sliding_window,
      ",\"kv_local_slots\":", o.kv_local_slots, "}");
}

absl::StatusOr<std::unique_ptr<SchedulerLoop>> SchedulerLoop::Create(Options options,
                                                                     std::unique_ptr<EngineClient> engine,
                                                                     metrics::Registry* registry) {
  const EngineInfo info = engine->info();
  if (info.kv_slots > 0 && options.scheduler.n_slots > info.kv_slots)
    return absl::InvalidArgumentError(absl::StrCat("n_slots (", options.scheduler.n_slots, ") exceeds the ",
                                                   info.kv_slots, " KV slots each engine stage holds"));
  options.scheduler.max_context = info.max_context;
  options.scheduler.vocab_size = info.vocab_size;
  // KV by layer type: the workers' pool for sliding-window layers is counted too (and
  // refused with prefix caching, naming --swa-full: sched::Scheduler::Create).
  options.scheduler.sliding_window = info.sliding_window;
  options.scheduler.kv_local_slots = info.kv_local_slots;
  if (options.model_name.empty()) options.model_name = info.model_name;
  ORCA_ASSIGN_OR_RETURN(auto sched, sched::Scheduler::Create(options.scheduler));
  ORCA_ASSIGN_OR_RETURN(auto metrics, metrics::SchedulerMetrics::Create(registry, options.model_name));
  metrics->SetKvSlots(0, options.scheduler.n_slots);
  metrics->SetKvLocalSlots(0, options.scheduler.kv_local_slots);
  return std::unique_ptr<SchedulerLoop>(
      new SchedulerLoop(std::move(options), std::move(engine), std::move(sched), std::move(metrics)));
}

SchedulerLoop::SchedulerLoop(Options options, std::unique_ptr<EngineClient> engine,
                             std::unique_ptr<sched::Scheduler> scheduler,
                             std::unique_ptr<metrics::SchedulerMetrics> metrics)
    : options_(std::move(options)),
      engine_(std::move(engine)),
      scheduler_(std::move(scheduler)),
      metrics_(std::move(metrics)) {
  Publish();
}

SchedulerLoop::~SchedulerLoop() { Stop(); }

absl::Status SchedulerLoop::Start() {
  ORCA_RETURN_IF_ERROR(engine_->Start([this](IterationOutcome o) { Post(std::move(o)); },
                                      [this](bool ready, const std::string& reason, uint64_t session) {
                                        Post(StateCmd{ready, reason, session});
                                      }));
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void SchedulerLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  engine_->Stop();
}

void SchedulerLoop::Post(Command cmd) {
  absl::MutexLock lock(&mu_);
  inbox_.push_back(std::move(cmd));
}

SchedulerLoop::Ticket SchedulerLoop::Submit(sched::RequestSpec spec, std::shared_ptr<RequestSink> sink,
                                            GroupTag group) {
  absl::MutexLock lock(&mu_);
  const Ticket t = next_ticket_++;
  inbox_.push_back(SubmitCmd{t, std::move(spec), std::move(sink), std::move(group)});
  return t;
}

void SchedulerLoop::Cancel(Ticket ticket) { Post(CancelCmd{ticket}); }
void SchedulerLoop::CancelByCallerId(std::string caller_id, std::function<void(bool)> done) {
  Post(CancelCallerCmd{std::move(caller_id), std::move(done)});
}
void SchedulerLoop::BeginDrain() { Post(DrainCmd{}); }
void SchedulerLoop::CancelAll() { Post(CancelAllCmd{}); }

LoopStats SchedulerLoop::stats() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

absl::Status SchedulerLoop::Ready() const {
  LoopStats s = stats();
  if (s.draining) return absl::UnavailableError("draining: not admitting new requests");
  if (!s.engine_ready) return absl::UnavailableError(absl::StrCat("engine not ready: ", s.not_ready_reason));
  return absl::OkStatus();
}

void SchedulerLoop::Run() {
  while (true) {
    std::deque<Command> commands;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](SchedulerLoop* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return l->stop_ || !l->inbox_.empty(); },
              this),
          kIdleWake);
      if (stop_) break;
      commands.swap(inbox_);
    }
    const absl::Time now = absl::Now();
    for (Command& cmd : commands) {
      std::visit(
          [&](auto& c) {
            using T = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<T, DrainCmd>) {
              scheduler_->BeginDrain();
              ORCA_LOG(INFO) << "draining: no longer admitting requests";
            } else if constexpr (std::is_same_v<T, CancelAllCmd>) {
              CancelEverything(now);
            } else {
              Handle(c, now);
            }
          },
          cmd);
    }
    Deliver(scheduler_->ExpireDeadlines(now), now);
    ExpirePendingGroups(now);
    ExpireWhileDown(now);
    ScheduleIterations(now);
    // The tokens of the iterations that returned go out after the next iteration has
    // started: the engine computes while they are streamed.
    FlushDeferred();
    Publish();
  }
  CancelEverything(absl::Now());
  // Commands that arrived too late still get an answer: every RPC must end.
  std::deque<Command> late;
  {
    absl::MutexLock lock(&mu_);
    late.swap(inbox_);
  }
  for (Command& cmd : late) {
    if (auto* s = std::get_if<SubmitCmd>(&cmd)) s->sink->OnRejected(absl::UnavailableError("scheduler shutting down"));
    if (auto* c = std::get_if<CancelCallerCmd>(&cmd); c && c->done) c->done(false);
  }
  Publish();
}

void SchedulerLoop::Handle(SubmitCmd& cmd, absl::Time now) {
  if (!engine_ready_ && options_.engine_down_wait <= absl::ZeroDuration()) {
    cmd.sink->OnRejected(absl::UnavailableError(absl::StrCat("engine not ready: ", not_ready_reason_)));
    return;
  }
  if (cmd.spec.eos_token_ids.empty()) cmd.spec.eos_token_ids = engine_->info().eos_token_ids;
  if (cmd.spec.deadline == absl::InfiniteFuture() && options_.default_deadline > absl::ZeroDuration())
    cmd.spec.deadline = now + options_.default_deadline;
  if (cmd.group.size > 1) {
    Gather(cmd, now);
    return;
  }
  std::vector<SubmitCmd> alone;
  alone.push_back(std::move(cmd));
  SubmitNow(std::move(alone), now);
}

void SchedulerLoop::SubmitNow(std::vector<SubmitCmd> members, absl::Time now) {
  std::vector<sched::RequestSpec> specs;
  specs.reserve(members.size());
  for (SubmitCmd& m : members) specs.push_back(std::move(m.spec));
  absl::StatusOr<std::vector<sched::RequestId>> ids = scheduler_->SubmitGroup(std::move(specs), now);
  if (!ids.ok()) {
    absl::Status s = ids.status();
    if (s.code() == absl::StatusCode::kFailedPrecondition && scheduler_->draining())
      s = absl::UnavailableError("scheduler is draining: not admitting new requests");
    for (SubmitCmd& m : members) m.sink->OnRejected(s);
    return;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    tracked_[(*ids)[i]] = Tracked{members[i].ticket, std::move(members[i].sink), now, now, false};
    tickets_[members[i].ticket] = (*ids)[i];
  }
}

void SchedulerLoop::Gather(SubmitCmd& cmd, absl::Time now) {
  const GroupTag& tag = cmd.group;
  if (tag.id.empty() || tag.size > sched::Scheduler::kMaxGroupSize || tag.index < 0 || tag.index >= tag.size) {
    cmd.sink->OnRejected(absl::InvalidArgumentError(
        absl::StrCat("a group member needs a non-empty group_id, group_size in [2, ", sched::Scheduler::kMaxGroupSize,
                     "] and group_index in [0, group_size) (got group_id '", tag.id, "', group_size ", tag.size,
                     ", group_index ", tag.index, ")")));
    return;
  }
  if (submitted_partial_groups_.contains(tag.id)) {
    // Its group went without it (group_wait): it runs alone.
    std::vector<SubmitCmd> alone;
    alone.push_back(std::move(cmd));
    SubmitNow(std::move(alone), now);
    return;
  }
  auto [it, inserted] = pending_groups_.try_emplace(tag.id);
  PendingGroup& group = it->second;
  if (inserted) {
    group.size = tag.size;
    group.first_arrival = now;
  }
  if (group.size != tag.size) {
    cmd.sink->OnRejected(
        absl::InvalidArgumentError(absl::StrCat("group_size ", tag.size, " differs from the ", group.size,
                                                " of group '", tag.id, "' given by its first member")));
    return;
  }
  if (group.members.contains(tag.index)) {
    cmd.sink->OnRejected(
        absl::AlreadyExistsError(absl::StrCat("group_index ", tag.index, " of group '", tag.id, "' arrived twice")));
    return;
  }
  pending_tickets_[cmd.ticket] = tag.id;
  const int32_t index = tag.index;
  group.members.emplace(index, std::move(cmd));
  if (static_cast<int32_t>(group.members.size()) + group.num_cancelled == group.size) {
    SubmitPendingGroup(it->first, now);
  }
}

void SchedulerLoop::SubmitPendingGroup(const std::string& group_id, absl::Time now) {
  auto it = pending_groups_.find(group_id);
  if (it == pending_groups_.end()) return;
  PendingGroup group = std::move(it->second);
  const std::string id = it->first;
  pending_groups_.erase(it);
  if (static_cast<int32_t>(group.members.size()) + group.num_cancelled < group.size) {
    submitted_partial_groups_[id] = now;
  }
  std::vector<SubmitCmd> members;
  for (auto& [index, member] : group.members) {
    pending_tickets_.erase(member.ticket);
    members.push_back(std::move(member));
  }
  if (!members.empty()) SubmitNow(std::move(members), now);
}

void SchedulerLoop::ExpirePendingGroups(absl::Time now) {
  std::vector<std::string> expired;
  for (const auto& [id, group] : pending_groups_) {
    if (now - group.first_arrival >= options_.group_wait) expired.push_back(id);
  }
  for (const std::string& id : expired) {
    ORCA_LOG(WARNING).With("group_id", id) << "group incomplete after " << absl::FormatDuration(options_.group_wait)
                                           << ": submitting the members that arrived";
    SubmitPendingGroup(id, now);
  }
  // Late members of a partial group arrive within moments; forget the group after a while.
  absl::erase_if(submitted_partial_groups_,
                 [&](const auto& entry) { return now - entry.second > 10 * options_.group_wait; });
}

bool SchedulerLoop::CancelPending(Ticket ticket, absl::Time now) {
  auto t = pending_tickets_.find(ticket);
  if (t == pending_tickets_.end()) return false;
  const std::string group_id = t->second;
  pending_tickets_.erase(t);
  PendingGroup& group = pending_groups_.at(group_id);
  for (auto it = group.members.begin(); it != group.members.end(); ++it) {
    if (it->second.ticket != ticket) continue;
    it->second.sink->OnRejected(absl::CancelledError("cancelled while its group was arriving"));
    group.members.erase(it);
    ++group.num_cancelled;
    break;
  }
  if (group.members.empty() || static_cast<int32_t>(group.members.size()) + group.num_cancelled == group.size) {
    SubmitPendingGroup(group_id, now);  // the rest need not wait for it
  }
  return true;
}

void SchedulerLoop::Handle(const CancelCmd& cmd, absl::Time now) {
  if (CancelPending(cmd.ticket, now)) return;
  auto it = tickets_.find(cmd.ticket);
  if (it == tickets_.end()) return;  // already finished
  sched::CancelResult r = scheduler_->Cancel(it->second, now);
  Deliver(std::move(r.events), now);
}

void SchedulerLoop::Handle(CancelCallerCmd& cmd, absl::Time now) {
  for (const auto& [group_id, group] : pending_groups_) {
    for (const auto& [index, member] : group.members) {
      if (member.spec.caller_id.empty() || member.spec.caller_id != cmd.caller_id) continue;
      const Ticket ticket = member.ticket;
      CancelPending(ticket, now);  // may end the group: nothing of it is used after
      if (cmd.done) cmd.done(true);
      return;
    }
  }
  std::optional<sched::RequestId> id = scheduler_->FindRequest(cmd.caller_id);
  bool found = false;
  if (id.has_value()) {
    sched::CancelResult r = scheduler_->Cancel(*id, now);
    found = r.found;
    Deliver(std::move(r.events), now);
  }
  if (cmd.done) cmd.done(found);
}

void SchedulerLoop::Handle(IterationOutcome& outcome, absl::Time now) {
  if (auto it = iteration_start_.find(outcome.iteration_id); it != iteration_start_.end()) {
    const IterationInFlight& f = it->second;
    metrics_->iteration_duration_seconds().Observe(absl::ToDoubleSeconds(now - f.start));
    // One line per iteration at debug level: what it carried against what it cost (the
    // scheduler's round trip and every stage's compute), to find where latency tails come from.
    if (::orca::GetLogLevel() <= ::orca::LogLevel::kDebug) {
      int64_t compute_us = 0;
      for (const StageTiming& t : outcome.stage_timings) compute_us += t.compute_micros;
      ORCA_LOG(DEBUG)
              .With("iteration", outcome.iteration_id)
              .With("requests", f.num_requests)
              .With("decodes", f.num_decodes)
              .With("prompt_tokens", f.num_prompt_tokens)
              .With("max_context", f.max_context)
              .With("round_trip_us", absl::ToInt64Microseconds(now - f.start))
              .With("compute_us", compute_us)
          << "iteration done";
    }
    iteration_start_.erase(it);
  }
  absl::StatusOr<std::vector<sched::RequestEvent>> events =
      outcome.status.ok() ? scheduler_->OnIterationDone(outcome.iteration_id, outcome.results, now)
                          : scheduler_->OnIterationFailed(outcome.iteration_id, outcome.status, now);
  if (!events.ok()) {
    // Dropped by FailAll after a pipeline failure: nothing waits for it.
    ORCA_LOG(DEBUG) << "late outcome of iteration " << outcome.iteration_id << ": " << events.status();
    return;
  }
  // Streamed after ScheduleIterations (Run), unless another delivery comes first (Deliver
  // flushes these before its own, so a request's events keep their order).
  for (sched::RequestEvent& e : *events) deferred_.push_back(Deferred{std::move(e), now});
}

void SchedulerLoop::Handle(const StateCmd& cmd, absl::Time now) {
  if (engine_ready_ == cmd.ready && not_ready_reason_ == cmd.reason && engine_session_ == cmd.session) return;
  const bool was_ready = engine_ready_;
  engine_ready_ = cmd.ready;
  not_ready_reason_ = cmd.reason;
  if (cmd.ready) {
    engine_session_ = cmd.session;
    ORCA_LOG(INFO) << "engine pipeline ready";
    return;
  }
  if (was_ready) engine_down_since_ = now;
  ORCA_LOG(WARNING) << "engine pipeline not ready: " << cmd.reason;
  // Every admitted request dies with the pipeline; queued ones wait for it to
  // return, for engine_down_wait at most (ExpireWhileDown).
  iteration_start_.clear();
  Deliver(scheduler_->FailAll(absl::UnavailableError(absl::StrCat("engine pipeline failed: ", cmd.reason)), now), now);
  (void)scheduler_->TakeReleasedRequestIds();  // restarted workers hold nothing
}

void SchedulerLoop::ExpireWhileDown(absl::Time now) {
  if (engine_ready_ || tracked_.empty()) return;
  std::vector<sched::RequestId> expired;
  for (const auto& [id, t] : tracked_)
    if (now - std::max(t.arrival, engine_down_since_) >= options_.engine_down_wait) expired.push_back(id);
  for (sched::RequestId id : expired) {
    auto it = tracked_.find(id);
    // Nothing was admitted while down (FailAll), so these are all QUEUED: the
    // client gets UNAVAILABLE (HTTP 503 + Retry-After at the gateway), not a
    // finished stream.
    (void)scheduler_->Cancel(id, now);
    std::shared_ptr<RequestSink> sink = std::move(it->second.sink);
    tickets_.erase(it->second.ticket);
    tracked_.erase(it);
    sink->OnRejected(absl::UnavailableError(
        absl::StrCat("the engine pipeline has been unavailable for ",
                     absl::FormatDuration(absl::Trunc(now - engine_down_since_, absl::Milliseconds(100))), " (",
                     not_ready_reason_, "); retry later")));
  }
  (void)scheduler_->TakeReleasedRequestIds();  // queued requests hold nothing on the workers
}

void SchedulerLoop::CancelEverything(absl::Time now) {
  FlushDeferred();
  for (auto& [id, group] : pending_groups_) {
    for (auto& [index, member] : group.members)
      member.sink->OnRejected(absl::CancelledError("scheduler shutting down"));
  }
  pending_groups_.clear();
  pending_tickets_.clear();
  std::vector<sched::RequestId> ids;
  for (const auto& [id, t] : tracked_) ids.push_back(id);
  for (sched::RequestId id : ids) {
    sched::CancelResult r = scheduler_->Cancel(id, now);
    Deliver(std::move(r.events), now);
  }
  // In-flight ones finish when their iteration returns; with the engine
  // stopping they are failed here so no stream is left open.
  Deliver(scheduler_->FailAll(absl::CancelledError("scheduler shutting down"), now), now);
  for (auto& [id, t] : tracked_) {
    t.sink->OnRejected(absl::CancelledError("scheduler shutting down"));
  }
  tracked_.clear();
  tickets_.clear();
}

void SchedulerLoop::ScheduleIterations(absl::Time now) {
  if (!engine_ready_) return;
  bool submitted = false;
  while (std::optional<sched::IterationPlan> plan = scheduler_->Schedule(now)) {
    IterationInFlight f{now, static_cast<int32_t>(plan->requests.size())};
    for (const auto& r : plan->requests) {
      const auto n = static_cast<int64_t>(r.input_token_ids.size());
      if (r.phase == sched::Phase::kInitiation) {
        f.num_prompt_tokens += n;
      } else {
        ++f.num_decodes;
      }
      f.max_context = std::max(f.max_context, r.start_position + n);
    }
    metrics_->prompt_tokens().Increment(static_cast<double>(f.num_prompt_tokens));
    metrics_->batch_size().Observe(static_cast<double>(plan->requests.size()));
    metrics_->iteration_tokens().Observe(static_cast<double>(plan->NumTokens()));
    iteration_start_[plan->iteration_id] = f;
    engine_->Submit(std::move(*plan), engine_session_);
    submitted = true;
  }
  if (!submitted) {
    std::vector<sched::RequestId> released = scheduler_->TakeReleasedRequestIds();
    if (!released.empty()) engine_->Release(std::move(released), engine_session_);
  }
}

void SchedulerLoop::FlushDeferred() {
  std::vector<Deferred> deferred;
  deferred.swap(deferred_);
  for (Deferred& d : deferred) DeliverOne(d.event, d.now);
}

void SchedulerLoop::Deliver(std::vector<sched::RequestEvent> events, absl::Time now) {
  if (events.empty()) return;
  FlushDeferred();
  for (sched::RequestEvent& e : events) DeliverOne(e, now);
}

void SchedulerLoop::DeliverOne(sched::RequestEvent& e, absl::Time now) {
  auto it = tracked_.find(e.request_id);
  if (it == tracked_.end()) return;
  Tracked& t = it->second;
  if (!e.new_tokens.empty()) {
    metrics_->generation_tokens().Increment(static_cast<double>(e.new_tokens.size()));
    if (!t.first_token_seen) {
      metrics_->time_to_first_token_seconds().Observe(absl::ToDoubleSeconds(now - t.arrival));
      t.first_token_seen = true;
    } else {
      const double gap = absl::ToDoubleSeconds(now - t.last_token) / static_cast<double>(e.new_tokens.size());
      for (size_t i = 0; i < e.new_tokens.size(); ++i) metrics_->inter_token_latency_seconds().Observe(gap);
    }
    t.last_token = now;
  }
  if (e.finish.has_value()) {
    const sched::FinishInfo& f = *e.finish;
    ORCA_LOG(INFO)
            .With("request_id", e.caller_id)
            .With("engine_request_id", e.request_id)
            .With("finish", FinishedReason(f.state))
            .With("prompt_tokens", f.num_prompt_tokens)
            .With("generated_tokens", f.num_generated_tokens)
            .With("queue_ms", absl::ToDoubleMilliseconds(f.timings.queue))
            .With("ttft_ms", absl::ToDoubleMilliseconds(f.timings.ttft))
            .With("e2e_ms", absl::ToDoubleMilliseconds(f.timings.total))
        << "request finished" << (f.error_message.empty() ? "" : ": " + f.error_message);
    metrics_->request_success(FinishedReason(f.state)).Increment();
    metrics_->e2e_request_latency_seconds().Observe(absl::ToDoubleSeconds(f.timings.total));
    metrics_->request_queue_time_seconds().Observe(absl::ToDoubleSeconds(f.timings.queue));
    if (f.num_generated_tokens > 0) {
      metrics_->request_prefill_time_seconds().Observe(absl::ToDoubleSeconds(f.timings.prefill));
      metrics_->request_decode_time_seconds().Observe(absl::ToDoubleSeconds(f.timings.decode));
    }
  }
  t.sink->OnEvent(e);
  if (e.finish.has_value()) {
    tickets_.erase(t.ticket);
    tracked_.erase(it);
  }
}

void SchedulerLoop::Publish() {
  LoopStats s;
  s.scheduler = scheduler_->stats();
  s.engine = engine_->info();
  s.engine_ready = engine_ready_;
  s.not_ready_reason = not_ready_reason_;
  s.draining = scheduler_->draining();
  s.policy = sched::PolicyKindName(options_.scheduler.policy);
  s.max_bs = options_.scheduler.max_bs;
  s.n_workers = options_.scheduler.n_workers;
  s.options = scheduler_->options();
  metrics_->num_preemptions().Increment(static_cast<double>(s.scheduler.num_preemptions - exported_preemptions_));
  metrics_->prefix_cache_queries().Increment(
      static_cast<double>(s.scheduler.kv.prefix_cache_queries - exported_prefix_queries_));
  metrics_->prefix_cache_hits().Increment(
      static_cast<double>(s.scheduler.kv.prefix_cache_hits - exported_prefix_hits_));
  exported_preemptions_ = s.scheduler.num_preemptions;
  exported_prefix_queries_ = s.scheduler.kv.prefix_cache_queries;
  exported_prefix_hits_ = s.scheduler.kv.prefix_cache_hits;
  metrics_->num_requests_running().Set(s.scheduler.num_running);
  metrics_->num_requests_waiting().Set(s.scheduler.num_queued);
  metrics_->SetKvSlots(s.scheduler.n_rsrv, s.scheduler.n_slots);
  metrics_->SetKvLocalSlots(s.scheduler.n_local_rsrv, s.scheduler.n_local_slots);
  absl::MutexLock lock(&mu_);
  published_ = std::move(s);
}

}  // namespace orca::scheduler
