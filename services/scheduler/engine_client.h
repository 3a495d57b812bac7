#pragma once
/// The engine master's view of the engine (paper §4.1): it hands over one
/// iteration at a time and hears back, asynchronously, each iteration's
/// sampled tokens. Implementations: the in-process engine (one process, for
/// `orca generate`-style local runs and tests) and the remote worker pipeline
/// over the control protocol (orca.v1.Worker).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/sched/scheduler_output.h"

namespace orca::scheduler {

struct EngineInfo {
  std::string model_name;
  int32_t vocab_size = 0;
  int32_t max_context = 0;
  std::vector<int32_t> eos_token_ids;
  int64_t kv_slots = 0;       ///< KV slots every stage holds (the scheduler's n_slots may not exceed it)
  int32_t kv_block_size = 0;  ///< tokens per KV block on every stage (0 = unknown)
  /// Sliding-window layers' window (tokens; 0 = none) and the slots of the stages' separate
  /// pool for their KV (0 = none: they keep every position in the main pool). With a pool,
  /// every request holds SlidingWindowKvBlocks (core/common/kv_footprint.h) blocks of it.
  int32_t sliding_window = 0;
  int64_t kv_local_slots = 0;
  int32_t num_stages = 1;
};

struct StageTiming {
  int32_t stage = 0;
  int64_t compute_micros = 0;
  int64_t comm_micros = 0;
};

struct IterationOutcome {
  sched::IterationId iteration_id = 0;
  absl::Status status;  ///< not OK: the iteration failed; its requests end with an error
  std::vector<sched::RequestResult> results;
  std::vector<StageTiming> stage_timings;
};

class EngineClient {
 public:
  using OutcomeCallback = std::function<void(IterationOutcome)>;
  /// Pipeline readiness changed (a worker died or came back). `reason` says why when not ready.
  /// `session` names the engine session that became ready or ended: plans and
  /// releases are submitted with the session they were made for.
  using StateCallback = std::function<void(bool ready, const std::string& reason, uint64_t session)>;

  virtual ~EngineClient() = default;
  /// Begins delivering outcomes and state changes through the callbacks (on
  /// the client's own threads; they must not block).
  virtual absl::Status Start(OutcomeCallback on_outcome, StateCallback on_state) = 0;
  /// Stops and joins the client's threads; outstanding iterations are dropped.
  virtual void Stop() = 0;
  /// Queues an iteration made for `session` (the last one reported ready);
  /// never blocks. A plan for a session that has ended is dropped: its
  /// requests die with that session, and the workers of the next one must
  /// not reserve KV for them.
  virtual void Submit(sched::IterationPlan plan, uint64_t session) = 0;
  /// Frees request state on every stage of `session` without running an
  /// iteration (used when idle); dropped like Submit when the session ended.
  virtual void Release(std::vector<sched::RequestId> ids, uint64_t session) = 0;
  /// Model facts the scheduler needs for admission.
  virtual EngineInfo info() const = 0;
  virtual bool ready() const = 0;
};

}  // namespace orca::scheduler
