#pragma once
/// Event-driven simulation of a scheduler driving an engine over a request trace.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/loadgen/poisson_trace.h"
#include "core/sched/scheduler.h"
#include "sim/step_runner.h"

namespace orca::sim {

struct SimulationOptions {
  /// Prompt token ids are drawn in [0, vocab_size).
  int32_t vocab_size = 50257;
  /// Submitted with every request; ignore_eos = true is the paper's "no early EOS".
  std::vector<int32_t> eos_token_ids;
  bool ignore_eos = true;
  /// Safety net: the run fails instead of looping when the virtual clock passes this.
  absl::Duration max_simulated_time = absl::Hours(24 * 30);
};

/// What happened to one trace request.
struct RequestRecord {
  sched::RequestId id = 0;
  absl::Duration arrival;
  absl::Duration first_token;  ///< When its first token came back.
  absl::Duration finish;       ///< When its completion was delivered.
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  sched::RequestState final_state = sched::RequestState::kQueued;

  absl::Duration latency() const { return finish - arrival; }
  /// The paper's metric: end-to-end latency divided by generated tokens (seconds/token).
  double NormalizedLatencySeconds() const;
};

struct SimulationResult {
  std::vector<RequestRecord> requests;  ///< In trace order.
  absl::Duration makespan;              ///< First arrival → last completion.
  int64_t num_iterations = 0;
  int64_t num_batched_requests = 0;  ///< Σ batch sizes over iterations.
  absl::Duration engine_time;        ///< Σ StepOutcome::elapsed.

  /// Completed requests per second of makespan.
  double ThroughputRps() const;
  /// Quantile q in [0, 1] of the normalized latency (nearest rank).
  double NormalizedLatencyQuantile(double q) const;
  double MeanBatchSize() const;
};

/// Replays `trace` against `scheduler` and `runner` on a virtual clock: arrivals are
/// submitted at their trace times, Schedule() is called until it declines (so up to
/// n_workers batches are in flight), each plan runs on the runner at once, and its results
/// are delivered when its last pipeline stage finishes (stage k is busy for
/// elapsed / num_stages per batch, first-come first-served). With a real engine the clock
/// advances by measured compute time, skipping the idle gaps between arrivals.
///
/// The scheduler must be fresh (no requests) and configured as the caller wants; every
/// request must finish (FAILED_PRECONDITION names the stall otherwise). Requests are
/// submitted with caller_id "trace-<index>".
absl::StatusOr<SimulationResult> RunSimulation(const std::vector<loadgen::TraceRequest>& trace,
                                               sched::Scheduler& scheduler, StepRunner& runner,
                                               const SimulationOptions& options = {});

}  // namespace orca::sim
