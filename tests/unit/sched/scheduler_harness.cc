#include "tests/unit/sched/scheduler_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/common/kv_footprint.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"

namespace orca::sched::testing {

SchedulerHarness::SchedulerHarness(SchedulerOptions options, sim::TokenFunction token_fn)
    : order_(options.scheduling_order, options.priority_aging) {
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(options);
  ORCA_CHECK(scheduler.ok()) << scheduler.status();
  scheduler_ = std::move(*scheduler);
  sim::SimulatedEngineOptions engine_options;
  engine_options.cost.description = "unit cost";
  engine_options.cost.fixed_seconds = 1e-3;
  engine_options.n_slots = options.n_slots;
  engine_options.kv_block_size = options.kv_block_size;
  engine_options.token_fn = std::move(token_fn);
  engine_options.avoid_token_ids = {0};
  absl::StatusOr<std::unique_ptr<sim::SimulatedEngine>> engine =
      sim::SimulatedEngine::Create(std::move(engine_options));
  ORCA_CHECK(engine.ok()) << engine.status();
  engine_ = std::move(*engine);
}

RequestId SchedulerHarness::Submit(const RequestSpec& spec) {
  absl::StatusOr<RequestId> id = TrySubmit(spec);
  if (!id.ok()) {
    ADD_FAILURE() << "Submit failed: " << id.status();
    return 0;
  }
  return *id;
}

absl::StatusOr<RequestId> SchedulerHarness::TrySubmit(const RequestSpec& spec) {
  ORCA_ASSIGN_OR_RETURN(std::vector<RequestId> ids, TrySubmitGroup({spec}));
  return ids.front();
}

absl::StatusOr<std::vector<RequestId>> SchedulerHarness::TrySubmitGroup(const std::vector<RequestSpec>& specs) {
  absl::StatusOr<std::vector<RequestId>> ids = scheduler_->SubmitGroup(specs, now_);
  if (!ids.ok()) return ids;
  for (size_t i = 0; i < ids->size(); ++i) {
    const RequestId id = (*ids)[i];
    submitted_.push_back(id);
    RequestLog& log = logs_[id];
    log.label = specs[i].caller_id.empty() ? absl::StrCat("#", id) : specs[i].caller_id;
    log.submitted_before_plan = static_cast<int64_t>(plans_.size());
  }
  return ids;
}

std::vector<IterationPlan> SchedulerHarness::ScheduleAll() {
  std::vector<IterationPlan> new_plans;
  while (true) {
    const std::vector<RequestSnapshot> before = Snapshots();
    std::optional<IterationPlan> plan = scheduler_->Schedule(now_);
    CheckPlan(plan, before);
    if (!plan.has_value()) break;
    absl::StatusOr<sim::StepOutcome> outcome = engine_->Run(*plan);
    if (!outcome.ok()) {
      ADD_FAILURE() << "engine rejected iteration " << plan->iteration_id << ": " << outcome.status();
      break;
    }
    ApplyToWorkerLocalPool(plan->released_request_ids, &*plan);
    pipeline_.push_back(InFlight{plan->iteration_id, std::move(outcome->results)});
    plans_.push_back(*plan);
    new_plans.push_back(*std::move(plan));
  }
  return new_plans;
}

void SchedulerHarness::ApplyToWorkerLocalPool(const std::vector<RequestId>& released, const IterationPlan* plan) {
  const SchedulerOptions& o = scheduler_->options();
  if (o.kv_local_slots == 0) return;
  // A worker applies the releases, then each request's iteration frees the blocks that left
  // its window and allocates the new ones; a padding sequence's stay until its release.
  for (RequestId id : released) worker_local_.erase(id);
  if (plan != nullptr) {
    for (const ScheduledRequest& r : plan->requests) {
      WorkerLocal& w = worker_local_[r.request_id];
      if (r.new_request.has_value()) w.padding_blocks = 0;
      if (r.num_padding_tokens > 0) {
        w.padding_blocks = SlidingWindowKvBlocks(0, r.num_padding_tokens, o.sliding_window, o.kv_block_size);
      }
      w.window_blocks = SlidingWindowKvBlocks(r.start_position, static_cast<int64_t>(r.input_token_ids.size()),
                                              o.sliding_window, o.kv_block_size);
    }
  }
  const int64_t held = worker_local_blocks();
  worker_local_peak_ = std::max(worker_local_peak_, held);
  const int64_t pool = o.kv_local_slots / o.kv_block_size;
  if (held > pool && plan_problem_.empty()) {
    plan_problem_ = absl::StrCat("the workers' sliding-window pool would hold ", held, " blocks of ", pool,
                                 plan != nullptr ? absl::StrCat(" after iteration ", plan->iteration_id) : "");
  }
}

int64_t SchedulerHarness::worker_local_blocks() const {
  int64_t held = 0;
  for (const auto& [id, w] : worker_local_) held += w.window_blocks + w.padding_blocks;
  return held;
}

bool SchedulerHarness::algorithm1() const {
  const SchedulerOptions& o = scheduler_->options();
  return o.policy == PolicyKind::kOrca && o.max_num_batched_tokens == 0 && o.long_prefill_token_threshold == 0 &&
         o.scheduling_order == SchedulingOrder::kFcfs;
}

std::vector<RequestSnapshot> SchedulerHarness::Snapshots() const {
  std::vector<RequestSnapshot> out;
  for (RequestId id : submitted_) {
    if (std::optional<RequestSnapshot> s = scheduler_->GetRequest(id); s.has_value()) out.push_back(*s);
  }
  return out;
}

void SchedulerHarness::CheckPlan(const std::optional<IterationPlan>& plan, const std::vector<RequestSnapshot>& before) {
  if (!plan_problem_.empty()) return;
  auto key = [](const RequestSnapshot& s) { return RequestOrder::Key{s.id, s.priority, s.arrival_time}; };
  const SchedulerOptions& o = scheduler_->options();
  absl::flat_hash_map<RequestId, const ScheduledRequest*> in_plan;
  if (plan.has_value()) {
    for (const ScheduledRequest& r : plan->requests) in_plan[r.request_id] = &r;
    if (o.max_num_batched_tokens > 0 && plan->NumTokens() > o.max_num_batched_tokens) {
      plan_problem_ = absl::StrCat("iteration ", plan->iteration_id, " has ", plan->NumTokens(),
                                   " tokens, over max_num_batched_tokens ", o.max_num_batched_tokens);
      return;
    }
    for (const ScheduledRequest& r : plan->requests) {
      if (o.long_prefill_token_threshold > 0 && r.phase == Phase::kInitiation &&
          static_cast<int64_t>(r.input_token_ids.size()) > o.long_prefill_token_threshold) {
        plan_problem_ = absl::StrCat("iteration ", plan->iteration_id, " runs a prompt chunk of ",
                                     r.input_token_ids.size(), " tokens of request ", r.request_id,
                                     ", over long_prefill_token_threshold ", o.long_prefill_token_threshold);
        return;
      }
    }
  }
  for (const RequestSnapshot& b : before) {
    const std::optional<RequestSnapshot> a = scheduler_->GetRequest(b.id);
    const bool preempted =
        a.has_value() && b.state == RequestState::kWaitingNextIteration && a->state == RequestState::kQueued;
    if (preempted) {
      preempted_at_plan_[static_cast<int64_t>(plans_.size())].push_back(b.id);
      // Latest first: everything served after it that still holds KV was in flight.
      for (const RequestSnapshot& w : Snapshots()) {
        const bool holds = w.state == RequestState::kWaitingNextIteration || w.state == RequestState::kRunning;
        if (!holds || w.id == b.id || !order_.Before(key(b), key(w))) continue;
        auto was = std::find_if(before.begin(), before.end(), [&](const RequestSnapshot& x) { return x.id == w.id; });
        if (was == before.end() || was->state != RequestState::kRunning) {
          plan_problem_ = absl::StrCat("request ", b.id, " was preempted while request ", w.id,
                                       ", served after it, kept its KV and was not in flight");
          return;
        }
      }
    }
    // Decodes first: a prompt chunk never displaces a request ready to decode. (With paged
    // KV a decode that needs a new block may wait for one while chunks that need none run.)
    const bool needs_block = o.policy == PolicyKind::kPaged && b.num_computed_tokens % o.kv_block_size == 0;
    if (plan.has_value() && !algorithm1() && o.policy != PolicyKind::kRequestLevel &&
        b.state == RequestState::kWaitingNextIteration && b.next_phase == Phase::kIncrement && !preempted &&
        !needs_block && !in_plan.contains(b.id) && static_cast<int32_t>(plan->requests.size()) < o.max_bs) {
      for (const ScheduledRequest& r : plan->requests) {
        if (r.phase == Phase::kInitiation) {
          plan_problem_ = absl::StrCat("iteration ", plan->iteration_id, " runs a prompt chunk of request ",
                                       r.request_id, " but leaves out request ", b.id, ", ready to decode");
          return;
        }
      }
    }
  }
  // Admission in order: no request still queued is served before one admitted now.
  if (!plan.has_value()) return;
  for (const ScheduledRequest& r : plan->requests) {
    if (!r.new_request.has_value()) continue;
    // A group member whose KV its leader's admission reserved was admitted with it.
    auto was =
        std::find_if(before.begin(), before.end(), [&](const RequestSnapshot& x) { return x.id == r.request_id; });
    if (was != before.end() && was->kv_reserved_by_group) continue;
    const std::optional<RequestSnapshot> admitted = scheduler_->GetRequest(r.request_id);
    for (const RequestSnapshot& q : before) {
      const std::optional<RequestSnapshot> now = scheduler_->GetRequest(q.id);
      if (q.state != RequestState::kQueued || !now.has_value() || now->state != RequestState::kQueued) continue;
      // A group member waiting for its leader's prompt blocks holds its place otherwise
      // (reserved mode: its KV is reserved with the leader's).
      if (q.waits_for_shared_prompt) continue;
      if (admitted.has_value() && order_.Before(key(q), key(*admitted))) {
        plan_problem_ = absl::StrCat("request ", r.request_id, " was admitted while request ", q.id,
                                     ", served before it, stayed queued");
        return;
      }
    }
  }
}

bool SchedulerHarness::CompleteOldest() {
  if (pipeline_.empty()) return false;
  InFlight done = std::move(pipeline_.front());
  pipeline_.pop_front();
  absl::StatusOr<std::vector<RequestEvent>> events = scheduler_->OnIterationDone(done.iteration_id, done.results, now_);
  if (!events.ok()) {
    ADD_FAILURE() << "OnIterationDone: " << events.status();
    return false;
  }
  Record(*events);
  return true;
}

bool SchedulerHarness::FailOldest(const absl::Status& error) {
  if (pipeline_.empty()) return false;
  InFlight done = std::move(pipeline_.front());
  pipeline_.pop_front();
  absl::StatusOr<std::vector<RequestEvent>> events = scheduler_->OnIterationFailed(done.iteration_id, error, now_);
  if (!events.ok()) {
    ADD_FAILURE() << "OnIterationFailed: " << events.status();
    return false;
  }
  Record(*events);
  return true;
}

void SchedulerHarness::Step() {
  Advance(absl::Milliseconds(1));
  CompleteOldest();
  ScheduleAll();
}

int64_t SchedulerHarness::RunToCompletion(int64_t max_steps) {
  ScheduleAll();
  int64_t steps = 0;
  while (!pipeline_.empty() && steps < max_steps) {
    Step();
    ++steps;
  }
  return steps;
}

bool SchedulerHarness::Cancel(RequestId id) {
  CancelResult result = scheduler_->Cancel(id, now_);
  Record(result.events);
  return result.found;
}

void SchedulerHarness::ExpireDeadlines() { Record(scheduler_->ExpireDeadlines(now_)); }

void SchedulerHarness::FailAll(const absl::Status& error) {
  Record(scheduler_->FailAll(error, now_));
  pipeline_.clear();
}

void SchedulerHarness::FlushReleases() {
  std::vector<RequestId> released = scheduler_->TakeReleasedRequestIds();
  ApplyToWorkerLocalPool(released, nullptr);
  EXPECT_TRUE(engine_->Release(released).ok());
}

void SchedulerHarness::Record(const std::vector<RequestEvent>& events) {
  for (const RequestEvent& event : events) {
    auto it = logs_.find(event.request_id);
    if (it == logs_.end()) {
      ADD_FAILURE() << "event for unknown request " << event.request_id;
      continue;
    }
    RequestLog& log = it->second;
    if (!log.finishes.empty()) ++log.num_events_after_finish;
    for (const SampledToken& token : event.new_tokens) log.tokens.push_back(token.token_id);
    if (event.finish.has_value()) {
      log.finishes.push_back(*event.finish);
      log.delivered_after_plan = static_cast<int64_t>(plans_.size());
    }
  }
}

RequestState SchedulerHarness::state(RequestId id) const {
  const RequestLog& log = logs_.at(id);
  if (!log.finishes.empty()) return log.finishes.front().state;
  std::optional<RequestSnapshot> snapshot = scheduler_->GetRequest(id);
  ORCA_CHECK(snapshot.has_value()) << "request " << id << " lost";
  return snapshot->state;
}

std::string SchedulerHarness::Timeline() const {
  std::vector<absl::flat_hash_map<RequestId, char>> marks(plans_.size());
  absl::flat_hash_map<RequestId, size_t> num_sampled;  // sampling iterations so far
  for (size_t k = 0; k < plans_.size(); ++k) {
    if (auto it = preempted_at_plan_.find(static_cast<int64_t>(k)); it != preempted_at_plan_.end()) {
      for (RequestId id : it->second) marks[k][id] = 'x';
    }
    for (const ScheduledRequest& r : plans_[k].requests) {
      char& c = marks[k][r.request_id];
      c = r.phase == Phase::kIncrement ? 'D' : (r.sample ? 'P' : 'c');
      // A sampled token the caller never saw: computed and discarded (a FasterTransformer
      // batch member padding out).
      auto log = logs_.find(r.request_id);
      if (scheduler_->options().faster_transformer && r.sample &&
          ++num_sampled[r.request_id] > (log == logs_.end() ? 0 : log->second.tokens.size()) && c == 'D') {
        c = 'd';
      }
    }
  }
  size_t width = 0;
  for (RequestId id : submitted_) width = std::max(width, logs_.at(id).label.size());
  std::string out;
  for (RequestId id : submitted_) {
    const RequestLog& log = logs_.at(id);
    std::string row = log.label + std::string(width - log.label.size(), ' ') + " |";
    for (size_t k = 0; k < plans_.size(); ++k) {
      const auto plan_index = static_cast<int64_t>(k);
      char c = '-';
      if (plan_index < log.submitted_before_plan ||
          (log.delivered_after_plan.has_value() && plan_index >= *log.delivered_after_plan)) {
        c = ' ';
      } else if (auto it = marks[k].find(id); it != marks[k].end()) {
        c = it->second;
      }
      row += ' ';
      row += c;
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + "\n";
  }
  return out;
}

std::string SchedulerHarness::CheckInvariants(bool scheduled_all) const {
  if (!plan_problem_.empty()) return plan_problem_;
  const SchedulerStats stats = scheduler_->stats();
  const SchedulerOptions& options = scheduler_->options();
  const bool paged = options.policy == PolicyKind::kPaged;
  if (std::string problem = scheduler_->kv().CheckInvariants(); !problem.empty()) return "KV: " + problem;
  if (stats.n_rsrv < 0 || stats.n_rsrv > stats.n_slots) {
    return absl::StrCat("n_rsrv ", stats.n_rsrv, " outside [0, n_slots ", stats.n_slots, "]");
  }
  if (stats.num_batches_in_flight != num_in_flight()) {
    return absl::StrCat("scheduler counts ", stats.num_batches_in_flight, " batches in flight, the pipeline holds ",
                        num_in_flight());
  }
  if (num_in_flight() > options.n_workers) {
    return absl::StrCat(num_in_flight(), " batches in flight with n_workers ", options.n_workers);
  }
  if (engine_->num_allocated_slots() > options.n_slots) {
    return absl::StrCat("workers hold ", engine_->num_allocated_slots(), " KV slots");
  }
  if (stats.n_local_rsrv < 0 || stats.n_local_rsrv > stats.n_local_slots) {
    return absl::StrCat("local pool: ", stats.n_local_rsrv, " slots used outside [0, ", stats.n_local_slots, "]");
  }

  int64_t reserved = 0;
  int64_t queued_tokens = 0;
  int32_t num_queued = 0;
  int32_t num_running = 0;
  int32_t num_in_flight_requests = 0;
  std::optional<RequestSnapshot> first_queued;
  std::optional<RequestId> waiting;
  std::vector<RequestSnapshot> admitted;  // in arrival order
  for (RequestId id : submitted_) {
    const RequestLog& log = logs_.at(id);
    if (log.finishes.size() > 1 || log.num_events_after_finish > 0) {
      return absl::StrCat("request ", id, " got ", log.finishes.size(), " finishes and ", log.num_events_after_finish,
                          " events after its finish");
    }
    if (!log.finishes.empty() && static_cast<int32_t>(log.tokens.size()) != log.finishes[0].num_generated_tokens) {
      return absl::StrCat("request ", id, " streamed ", log.tokens.size(), " tokens, finished with ",
                          log.finishes[0].num_generated_tokens);
    }
    std::optional<RequestSnapshot> snapshot = scheduler_->GetRequest(id);
    if (!snapshot.has_value()) {
      if (log.finishes.empty()) return absl::StrCat("request ", id, " vanished without a finish");
      continue;
    }
    if (!log.finishes.empty()) return absl::StrCat("request ", id, " delivered but still tracked");
    switch (snapshot->state) {
      case RequestState::kQueued:
        ++num_queued;
        queued_tokens += snapshot->num_prompt_tokens;
        // A group member waiting for its leader's prompt blocks, or whose leader's admission
        // reserved its KV, is not queued for KV.
        if (!first_queued.has_value() && !snapshot->waits_for_shared_prompt && !snapshot->kv_reserved_by_group) {
          first_queued = snapshot;
        }
        break;
      case RequestState::kRunning:
      case RequestState::kWaitingNextIteration:
        // FCFS admission, Algorithm 1: no admitted request arrived after a queued one. (With
        // other orders and preemption, CheckPlan checks admission order as it happens.)
        if (algorithm1() && first_queued.has_value()) {
          return absl::StrCat("request ", id, " was admitted before the earlier request ", first_queued->id,
                              " (FCFS admission broken)");
        }
        if (snapshot->state == RequestState::kRunning) ++num_in_flight_requests;
        // A FasterTransformer member padding out may wait for a slower microbatch to end
        // the batch while a slot idles: that is the baseline's behaviour, not a lost slot.
        if (snapshot->state == RequestState::kWaitingNextIteration && !snapshot->padding_out && !waiting) waiting = id;
        ++num_running;
        reserved += snapshot->reserved_slots;
        // The members of a group sharing its prompt start after their leader has computed
        // it: they are admitted with it (their KV is its), so iteration-level FCFS holds
        // for the others.
        if (!stats.shares_group_prompts || snapshot->group_id == 0 || snapshot->group_id == id) {
          admitted.push_back(*snapshot);
        }
        break;
      default:
        // Finished but not delivered: only the request-level baseline holds completions.
        if (options.policy != PolicyKind::kRequestLevel) {
          return absl::StrCat("request ", id, " finished but was not delivered at once");
        }
        break;
    }
  }
  if (paged) {
    if (stats.n_rsrv != static_cast<int64_t>(stats.kv.num_blocks_in_use) * options.kv_block_size) {
      return absl::StrCat("n_rsrv ", stats.n_rsrv, " but ", stats.kv.num_blocks_in_use, " blocks are in use");
    }
  } else if (reserved + stats.kv.num_group_reserved_slots != stats.n_rsrv) {
    return absl::StrCat("n_rsrv ", stats.n_rsrv, " but admitted requests reserve ", reserved, " and groups ",
                        stats.kv.num_group_reserved_slots);
  }
  if (num_queued != stats.num_queued || num_running != stats.num_running ||
      num_in_flight_requests != stats.num_in_flight_requests || queued_tokens != stats.queued_tokens) {
    return absl::StrCat("stats disagree with the requests: queued ", stats.num_queued, " vs ", num_queued, ", running ",
                        stats.num_running, " vs ", num_running, ", in flight ", stats.num_in_flight_requests, " vs ",
                        num_in_flight_requests, ", queued tokens ", stats.queued_tokens, " vs ", queued_tokens);
  }
  if (algorithm1()) {
    // Iteration-level FCFS: an earlier request has run at least as many iterations.
    for (size_t i = 1; i < admitted.size(); ++i) {
      if (admitted[i - 1].num_iterations_scheduled < admitted[i].num_iterations_scheduled) {
        return absl::StrCat("iteration-level FCFS broken: request ", admitted[i - 1].id, " ran ",
                            admitted[i - 1].num_iterations_scheduled, " iterations, later ", admitted[i].id, " ran ",
                            admitted[i].num_iterations_scheduled);
      }
    }
  }
  if (scheduled_all && paged && num_in_flight() == 0 && (num_running > 0 || num_queued > 0)) {
    // Paged KV may make a request wait for blocks a batch in flight will free, but with
    // nothing in flight that is a deadlock.
    return absl::StrCat("nothing in flight while ", num_running, " admitted and ", num_queued,
                        " queued requests wait (deadlock)");
  }
  if (scheduled_all && !paged && num_in_flight() < options.n_workers) {
    // Exactly min(n_workers, work available) batches in flight.
    if (waiting.has_value()) {
      return absl::StrCat("a pipeline slot is idle while request ", *waiting, " waits");
    }
    // The request-level baseline admits only when its whole batch has ended.
    const bool may_admit = options.policy != PolicyKind::kRequestLevel || num_running == 0;
    const bool fits_local =
        first_queued.has_value() &&
        stats.n_local_rsrv + first_queued->local_blocks_to_admit * options.kv_block_size <= stats.n_local_slots;
    if (may_admit && first_queued.has_value() && stats.n_rsrv + first_queued->slots_to_admit <= stats.n_slots &&
        fits_local && options.scheduling_order == SchedulingOrder::kFcfs) {
      return absl::StrCat("a pipeline slot is idle while queued request ", first_queued->id, " fits");
    }
  }
  return "";
}

}  // namespace orca::sched::testing
