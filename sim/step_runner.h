#pragma once
/// The engine as the simulation loop sees it: run one planned iteration, report its time.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/sched/scheduler_output.h"

namespace orca::sim {

/// What one iteration produced.
struct StepOutcome {
  /// One sampled token per scheduled request of the plan.
  std::vector<sched::RequestResult> results;
  /// Time the batch spends in the engine, summed over its pipeline stages (a real engine
  /// measures it; the simulated engine computes it from its cost model).
  absl::Duration elapsed;
};

/// An engine the simulation loop (simulation.h) can drive: the simulated GPU engine
/// (SimulatedEngine) or an adapter around the real engine. Called from one thread, in plan
/// order. Implementations must honour the plan protocol: apply released_request_ids first,
/// then reserve `new_request->kv_reservation_slots` KV slots for each new request, and keep each
/// request's KV between iterations until it is released.
class StepRunner {
 public:
  virtual ~StepRunner() = default;

  /// Runs one iteration synchronously. An error ends the simulation (it is not a request
  /// failure the scheduler should absorb).
  virtual absl::StatusOr<StepOutcome> Run(const sched::IterationPlan& plan) = 0;

  /// Frees the state of finished requests when no plan will carry them (end of a run).
  virtual absl::Status Release(absl::Span<const sched::RequestId> request_ids) = 0;

  /// Pipeline stages a batch crosses. The loop models stage k as busy for
  /// elapsed / num_stages() per batch, so up to num_stages() batches overlap
  /// (paper §4.1: n_workers batches in flight keep every stage busy).
  virtual int32_t num_stages() const = 0;

  /// One line for reports, e.g. "simulated GPT-3 13B on 1x A100 (TP 1, PP 1)".
  virtual std::string Describe() const = 0;
};

}  // namespace orca::sim
