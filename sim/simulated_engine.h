#pragma once
/// A fake engine for simulations: cost-model timing and a worker-side protocol check.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "sim/cost_model.h"
#include "sim/step_runner.h"

namespace orca::sim {

/// The token a simulated request generates at its `index`-th new token (0-based).
using TokenFunction = std::function<int32_t(sched::RequestId request_id, int32_t index)>;

struct SimulatedEngineOptions {
  CostModel cost;
  /// The workers' KV pool (tokens). Allocations beyond it are a protocol error. 0 = unchecked.
  int64_t n_slots = 0;
  /// Generated tokens are in [0, vocab_size) by default.
  int32_t vocab_size = 50257;
  /// Unset: a deterministic hash of (request, index), avoiding `avoid_token_ids`.
  TokenFunction token_fn;
  /// Tokens the default token function never produces (e.g. the model's EOS).
  std::vector<int32_t> avoid_token_ids;
};

/// Behaves like the worker pipeline would, without computing anything: it keeps a KV
/// allocation per request (created by NewRequestData, freed by released_request_ids or
/// Release) and rejects every plan that breaks the protocol — a request scheduled twice
/// in one plan, an increment for an unknown or released request, a position that does not
/// continue where the request left off, an input token that is not the one it generated
/// last, a position beyond its reservation, or more KV than n_slots. Tokens come from the
/// token function; time from the cost model.
class SimulatedEngine final : public StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<SimulatedEngine>> Create(SimulatedEngineOptions options);

  absl::StatusOr<StepOutcome> Run(const sched::IterationPlan& plan) override;
  absl::Status Release(absl::Span<const sched::RequestId> request_ids) override;
  int32_t num_stages() const override { return options_.cost.num_stages; }
  std::string Describe() const override { return options_.cost.description; }

  /// KV slots currently allocated on the (simulated) workers.
  int64_t num_allocated_slots() const { return num_allocated_slots_; }
  /// Requests holding KV on the workers.
  int32_t num_live_requests() const { return static_cast<int32_t>(live_.size()); }
  int64_t num_iterations() const { return num_iterations_; }

 private:
  struct LiveRequest {
    int32_t max_tokens = 0;
    int32_t next_position = 0;  // first position without KV
    int32_t num_generated = 0;
    int32_t last_token_id = 0;
  };

  explicit SimulatedEngine(SimulatedEngineOptions options) : options_(std::move(options)) {}
  absl::Status Validate(const sched::ScheduledRequest& request, const LiveRequest* live) const;
  int32_t DefaultToken(sched::RequestId request_id, int32_t index) const;

  SimulatedEngineOptions options_;
  absl::flat_hash_map<sched::RequestId, LiveRequest> live_;
  int64_t num_allocated_slots_ = 0;
  int64_t num_iterations_ = 0;
};

}  // namespace orca::sim
