#pragma once
/// The scheduler service's heart: ONE loop thread owns the request pool and
/// the policy (core/sched), drives the engine through an EngineClient, and
/// streams each request's events to its sink. Everything else (gRPC
/// handlers, engine callbacks, signal handling) only pushes commands into a
/// guarded inbox and returns — nothing blocks the loop, and the loop blocks
/// on nothing but its inbox (llama.cpp's update_slots / vLLM's busy loop).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/metrics/orca_metrics.h"
#include "core/sched/scheduler.h"
#include "services/scheduler/engine_client.h"

namespace orca::scheduler {

/// Where one request's events go (the gRPC stream). Called on the loop thread; must not block.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  /// New tokens and, on the last event, how the request finished.
  virtual void OnEvent(const sched::RequestEvent& event) = 0;
  /// The request was not accepted (validation, limits, draining, engine not ready).
  virtual void OnRejected(const absl::Status& status) = 0;
};

struct LoopStats {
  sched::SchedulerStats scheduler;
  EngineInfo engine;
  bool engine_ready = false;
  std::string not_ready_reason;
  bool draining = false;
  std::string policy;
  int32_t max_bs = 0;
  int32_t n_workers = 0;
  /// Every scheduling knob in effect (max_context / vocab_size from the engine).
  sched::SchedulerOptions options;
};

/// The scheduling knobs of `stats` as a JSON object (for /ready and logs):
/// policy, max_bs, n_slots, n_workers, kv_block_size, max_num_batched_tokens, max_prefill_slowdown,
/// long_prefill_token_threshold, enable_prefix_caching, scheduling_order, priority_aging_ms,
/// max_request_kv_share, sliding_window, kv_local_slots.
std::string SchedulingConfigJson(const LoopStats& stats);

/// One sequence of a group of n sequences of one prompt, as the wire sends them
/// (orca.v1.GenerateRequest group_*: each its own call). SchedulerLoop gathers a
/// group's members until all `size` have arrived (or been cancelled), or group_wait
/// has passed, and submits them together (sched::Scheduler::SubmitGroup), in index
/// order. A member arriving for a group submitted without it runs alone.
struct GroupTag {
  std::string id;
  int32_t size = 0;  ///< 0 or 1: not a group.
  int32_t index = 0;
};

class SchedulerLoop {
 public:
  struct Options {
    sched::SchedulerOptions scheduler;  ///< max_context / vocab_size are taken from the engine
    std::string model_name;
    /// Applied to requests without a deadline of their own; zero = none.
    absl::Duration default_deadline = absl::ZeroDuration();
    /// How long a queued request waits for an engine that is not ready (a
    /// pipeline restarting) before it fails UNAVAILABLE; zero = fail at once.
    absl::Duration engine_down_wait = absl::Seconds(10);
    /// How long the members of a group (GroupTag) that have arrived wait for the
    /// rest before they are submitted without them (a caller that died half-way).
    absl::Duration group_wait = absl::Seconds(5);
  };
  using Ticket = uint64_t;
  using GroupTag = scheduler::GroupTag;

  /// Validates the options against the engine (n_slots may not exceed what every stage holds)
  /// and takes the engine's sliding-window pool (EngineInfo::kv_local_slots) into the
  /// scheduler's options; with prefix caching that pool is refused (INVALID_ARGUMENT naming
  /// --swa-full).
  static absl::StatusOr<std::unique_ptr<SchedulerLoop>> Create(Options options, std::unique_ptr<EngineClient> engine,
                                                               metrics::Registry* registry);
  ~SchedulerLoop();

  absl::Status Start();
  /// Cancels everything still running, stops the loop and the engine client.
  void Stop();

  /// Queues a request; its events (or rejection) reach `sink`. Thread-safe, never blocks.
  /// With `group` (size > 1) it waits for its group first; a malformed tag is rejected
  /// INVALID_ARGUMENT, an index that arrived before ALREADY_EXISTS.
  Ticket Submit(sched::RequestSpec spec, std::shared_ptr<RequestSink> sink, GroupTag group = {});
  /// Cancels the request behind a ticket (client went away). Thread-safe, never blocks.
  void Cancel(Ticket ticket);
  /// Cancels by the caller's request id; `done(found)` runs on the loop thread.
  void CancelByCallerId(std::string caller_id, std::function<void(bool)> done);
  /// Stops admitting (SIGTERM); requests in the pool keep running.
  void BeginDrain();
  /// Cancels every unfinished request (end of a drain's grace period).
  void CancelAll();

  /// The model's vocabulary size as the engine reported it at Create (0 =
  /// unknown): what requests' token ids are re-validated against. Any thread.
  int32_t vocab_size() const { return options_.scheduler.vocab_size; }

  /// The latest snapshot (published by the loop after every round).
  LoopStats stats() const;
  /// OK when the engine is ready and the scheduler admits requests.
  absl::Status Ready() const;

 private:
  struct SubmitCmd {
    Ticket ticket;
    sched::RequestSpec spec;
    std::shared_ptr<RequestSink> sink;
    GroupTag group;
  };
  struct CancelCmd {
    Ticket ticket;
  };
  struct CancelCallerCmd {
    std::string caller_id;
    std::function<void(bool)> done;
  };
  struct StateCmd {
    bool ready;
    std::string reason;
    uint64_t session;
  };
  struct DrainCmd {};
  struct CancelAllCmd {};
  using Command =
      std::variant<SubmitCmd, CancelCmd, CancelCallerCmd, IterationOutcome, StateCmd, DrainCmd, CancelAllCmd>;

  struct Tracked {
    Ticket ticket = 0;
    std::shared_ptr<RequestSink> sink;
    absl::Time arrival;
    absl::Time last_token;
    bool first_token_seen = false;
  };

  SchedulerLoop(Options options, std::unique_ptr<EngineClient> engine, std::unique_ptr<sched::Scheduler> scheduler,
                std::unique_ptr<metrics::SchedulerMetrics> metrics);
  void Post(Command cmd);
  void Run();
  void Handle(SubmitCmd& cmd, absl::Time now);
  void Handle(const CancelCmd& cmd, absl::Time now);
  void Handle(CancelCallerCmd& cmd, absl::Time now);
  void Handle(IterationOutcome& outcome, absl::Time now);
  void Handle(const StateCmd& cmd, absl::Time now);
  void CancelEverything(absl::Time now);
  /// Submits one request (or a gathered group) to the scheduler and tracks it; a
  /// refusal goes to every member's sink.
  void SubmitNow(std::vector<SubmitCmd> members, absl::Time now);
  /// Adds a group member to its pending group; submits the group once it is whole.
  void Gather(SubmitCmd& cmd, absl::Time now);
  /// Submits the group's members that arrived (in index order) and forgets the group.
  void SubmitPendingGroup(const std::string& group_id, absl::Time now);
  /// Submits groups that waited group_wait for their missing members.
  void ExpirePendingGroups(absl::Time now);
  /// Cancels a member still waiting for its group (false when `ticket` is none).
  bool CancelPending(Ticket ticket, absl::Time now);
  /// Fails the queued requests that waited engine_down_wait for an engine that is down.
  void ExpireWhileDown(absl::Time now);
  void ScheduleIterations(absl::Time now);
  /// Streams events to their sinks (after the deferred ones) and updates the metrics.
  void Deliver(std::vector<sched::RequestEvent> events, absl::Time now);
  void DeliverOne(sched::RequestEvent& event, absl::Time now);
  /// Delivers the events of returned iterations held back while the next one was scheduled.
  void FlushDeferred();
  void Publish();

  const Options options_;
  std::unique_ptr<EngineClient> engine_;
  std::unique_ptr<sched::Scheduler> scheduler_;  // loop thread only
  std::unique_ptr<metrics::SchedulerMetrics> metrics_;

  // Loop-thread state.
  absl::flat_hash_map<sched::RequestId, Tracked> tracked_;
  absl::flat_hash_map<Ticket, sched::RequestId> tickets_;
  // Groups whose members are still arriving (GroupTag), by group id.
  struct PendingGroup {
    int32_t size = 0;
    absl::Time first_arrival;
    std::map<int32_t, SubmitCmd> members;  // by index
    int32_t num_cancelled = 0;
  };
  absl::flat_hash_map<std::string, PendingGroup> pending_groups_;
  absl::flat_hash_map<Ticket, std::string> pending_tickets_;  // member → its group
  // Groups submitted without some members, and when: a late member runs alone.
  absl::flat_hash_map<std::string, absl::Time> submitted_partial_groups_;
  // What an iteration in flight was, for its duration metric and the per-iteration debug log.
  struct IterationInFlight {
    absl::Time start;
    int32_t num_requests = 0;
    int32_t num_decodes = 0;
    int64_t num_prompt_tokens = 0;  // prompt (chunk) tokens
    int64_t max_context = 0;        // largest start_position + tokens (attention span)
  };
  absl::flat_hash_map<sched::IterationId, IterationInFlight> iteration_start_;
  struct Deferred {
    sched::RequestEvent event;
    absl::Time now;
  };
  std::vector<Deferred> deferred_;
  bool engine_ready_ = false;
  uint64_t engine_session_ = 0;  // the session plans are made for
  absl::Time engine_down_since_ = absl::Now();
  std::string not_ready_reason_ = "engine starting";
  // Counters already exported (the scheduler's are cumulative).
  uint64_t exported_preemptions_ = 0;
  int64_t exported_prefix_queries_ = 0;
  int64_t exported_prefix_hits_ = 0;

  mutable absl::Mutex mu_;
  std::deque<Command> inbox_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  LoopStats published_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace orca::scheduler
