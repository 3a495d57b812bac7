#pragma once
/// A scheduler driven step by step against the simulated engine, for multi-iteration tests.
/// It plays the pipeline (iterations return first-in first-out), records every event per
/// request, renders ASCII timelines and checks the scheduler's invariants.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/sched/request_order.h"
#include "core/sched/scheduler.h"
#include "sim/simulated_engine.h"

namespace orca::sched::testing {

/// Everything the caller of the scheduler saw for one request.
struct RequestLog {
  std::string label;  ///< Caller id, or "#<id>".
  std::vector<int32_t> tokens;
  std::vector<FinishInfo> finishes;             ///< Exactly one once delivered.
  int64_t submitted_before_plan = 0;            ///< Plans issued before it was submitted.
  std::optional<int64_t> delivered_after_plan;  ///< Plans issued when its finish arrived.
  int64_t num_events_after_finish = 0;
};

class SchedulerHarness {
 public:
  /// Every simulated iteration takes 1 ms; tokens come from `token_fn` (default: a hash
  /// that never produces token 0, which tests use as EOS).
  explicit SchedulerHarness(SchedulerOptions options, sim::TokenFunction token_fn = nullptr);

  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  sim::SimulatedEngine& engine() { return *engine_; }
  absl::Time now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

  /// Submits and records; on error adds a test failure and returns 0.
  RequestId Submit(const RequestSpec& spec);
  /// Submits and records on success; errors are returned, not failures.
  absl::StatusOr<RequestId> TrySubmit(const RequestSpec& spec);
  /// SubmitGroup: n sequences of one prompt; records each on success.
  absl::StatusOr<std::vector<RequestId>> TrySubmitGroup(const std::vector<RequestSpec>& specs);
  /// Calls Schedule() until it declines, running each plan on the engine at once (its
  /// results wait in the pipeline until Complete). Returns the new plans.
  std::vector<IterationPlan> ScheduleAll();
  /// Returns the oldest in-flight iteration's results to the scheduler; false if none.
  bool CompleteOldest();
  /// Reports the oldest in-flight iteration as failed; false if none.
  bool FailOldest(const absl::Status& error);
  /// One pipeline beat: advance 1 ms, complete the oldest iteration, schedule again.
  void Step();
  /// Steps until nothing is in flight and nothing can be scheduled; returns the steps.
  int64_t RunToCompletion(int64_t max_steps = 1'000'000);
  /// Cancel / ExpireDeadlines / FailAll, recording their events. Cancel returns `found`.
  bool Cancel(RequestId id);
  void ExpireDeadlines();
  void FailAll(const absl::Status& error);
  /// Sends pending releases to the engine, as the service does when idle.
  void FlushReleases();

  const RequestLog& log(RequestId id) const { return logs_.at(id); }
  bool delivered(RequestId id) const { return !logs_.at(id).finishes.empty(); }
  /// The live state, or the delivered finish state.
  RequestState state(RequestId id) const;
  int32_t num_in_flight() const { return static_cast<int32_t>(pipeline_.size()); }
  const std::vector<IterationPlan>& plans() const { return plans_; }
  const std::vector<RequestId>& submitted() const { return submitted_; }

  /// One row per request, one column per plan: 'P' prompt (initiation: the whole prompt,
  /// or its last chunk), 'c' a prompt chunk that does not sample, 'D' decode (increment),
  /// 'd' a decode whose token is discarded (a finished FasterTransformer member padding out),
  /// 'x' preempted in this plan (its release rides on it), '-' waiting in the pool (queued,
  /// between iterations, or finished but held by the baseline), ' ' before submission and
  /// after delivery. Rows are labelled with the caller ids (or "#id").
  std::string Timeline() const;
  /// The order the scheduler serves requests in.
  const RequestOrder& order() const { return order_; }
  /// True when the policy is the paper's Algorithm 1 exactly.
  bool algorithm1() const;

  /// Local-pool blocks the workers hold now, by their own rule applied to the plans sent
  /// (SlidingWindowKvBlocks of each request's last iteration, plus its FasterTransformer
  /// padding sequence's, until its release); 0 without a local pool. A plan that would make
  /// it exceed the pool is an invariant violation (the workers would fail it).
  int64_t worker_local_blocks() const;
  /// The most it ever was.
  int64_t worker_local_peak() const { return worker_local_peak_; }

  /// "" when every invariant holds, else the first violation. `scheduled_all` means
  /// ScheduleAll() ran since the last change, so free pipeline slots imply no selectable
  /// work.
  std::string CheckInvariants(bool scheduled_all) const;

 private:
  struct InFlight {
    IterationId iteration_id;
    std::vector<RequestResult> results;
  };
  void Record(const std::vector<RequestEvent>& events);
  // Checks one Schedule call against the state before it: decodes first, token budget,
  // admission in order, preemption latest-first. Keeps the first problem.
  void CheckPlan(const std::optional<IterationPlan>& plan, const std::vector<RequestSnapshot>& before);
  std::vector<RequestSnapshot> Snapshots() const;
  // The workers' local pool after they apply `plan` (or only releases).
  void ApplyToWorkerLocalPool(const std::vector<RequestId>& released, const IterationPlan* plan);

  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<sim::SimulatedEngine> engine_;
  absl::Time now_ = absl::UnixEpoch();
  std::deque<InFlight> pipeline_;
  std::vector<IterationPlan> plans_;
  std::vector<RequestId> submitted_;
  std::map<RequestId, RequestLog> logs_;
  RequestOrder order_;
  std::string plan_problem_;
  std::map<int64_t, std::vector<RequestId>> preempted_at_plan_;  // plan index → preempted before it
  struct WorkerLocal {
    int64_t window_blocks = 0;   // its last iteration's SlidingWindowKvBlocks
    int64_t padding_blocks = 0;  // its padding sequence's, until its release
  };
  std::map<RequestId, WorkerLocal> worker_local_;
  int64_t worker_local_peak_ = 0;
};

}  // namespace orca::sched::testing
