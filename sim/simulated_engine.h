#pragma once
/// A fake engine for simulations: cost-model timing and a worker-side protocol check.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  /// The workers' block size: a scheduler-owned block table (sched::NewRequestData::kv_block_size
  /// > 0) in any other size is a protocol error. 0 = take the plan's.
  int32_t kv_block_size = 0;
  /// Generated tokens are in [0, vocab_size) by default.
  int32_t vocab_size = 50257;
  /// Unset: a deterministic hash of (request, index), avoiding `avoid_token_ids`.
  TokenFunction token_fn;
  /// Tokens the default token function never produces (e.g. the model's EOS).
  std::vector<int32_t> avoid_token_ids;
};

/// Behaves like the worker pipeline would, without computing anything: it keeps a KV
/// allocation per request (created by sched::NewRequestData, freed by released_request_ids or
/// Release) and rejects every plan that breaks the protocol — a request scheduled twice
/// in one plan, a continuation for an unknown or released request, a position that does
/// not continue where the request left off, input tokens that are not the request's next
/// tokens (its prompt, then what it generated), sampling a chunk that does not end the
/// tokens or not sampling one that does, a position beyond its reservation, or more KV than
/// n_slots. With scheduler-owned block tables it also tracks what every KV slot holds (a
/// hash of the whole token prefix written there) and rejects reading a position whose slot
/// does not hold this request's prefix (a wrong prefix-cache hit, a block reused too early)
/// and writing into a block another request's table also holds. Tokens come from the token
/// function, by (request, index), so a preempted request regenerates the same ones; time
/// from the cost model.
class SimulatedEngine final : public StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<SimulatedEngine>> Create(SimulatedEngineOptions options);

  absl::StatusOr<StepOutcome> Run(const sched::IterationPlan& plan) override;
  absl::Status Release(absl::Span<const sched::RequestId> request_ids) override;
  int32_t num_stages() const override { return options_.cost.num_stages; }
  std::string Describe() const override { return options_.cost.description; }

  /// KV slots currently allocated on the (simulated) workers (distinct blocks × block size
  /// for scheduler-owned tables).
  int64_t num_allocated_slots() const { return num_allocated_slots_; }
  /// Requests holding KV on the workers.
  int32_t num_live_requests() const { return static_cast<int32_t>(live_.size()); }
  int64_t num_iterations() const { return num_iterations_; }

 private:
  struct LiveRequest {
    int32_t kv_reservation_slots = 0;
    int32_t next_position = 0;  // first position without KV
    int32_t num_prompt = 0;
    std::vector<int32_t> tokens;        // prompt, then generated
    std::vector<uint64_t> prefix_hash;  // [p]: hash of tokens[0..p]
    int32_t block_size = 0;             // > 0: scheduler-owned table
    std::vector<int32_t> blocks;
  };

  explicit SimulatedEngine(SimulatedEngineOptions options) : options_(std::move(options)) {}
  absl::Status Validate(const sched::ScheduledRequest& request, const LiveRequest* live) const;
  // `num_old_blocks`: leading blocks of `live` already in its table (counted in block_refs_).
  absl::Status ValidateTable(const sched::ScheduledRequest& request, const LiveRequest& live,
                             int32_t num_old_blocks) const;
  int32_t DefaultToken(sched::RequestId request_id, int32_t index) const;
  LiveRequest& Admit(const sched::ScheduledRequest& request);
  void Forget(sched::RequestId id);
  static void ExtendHashes(LiveRequest& live);
  int64_t SlotOf(const LiveRequest& live, int32_t position) const;

  SimulatedEngineOptions options_;
  absl::flat_hash_map<sched::RequestId, LiveRequest> live_;
  absl::flat_hash_map<int64_t, uint64_t> slot_content_;  // slot → prefix hash written there
  absl::flat_hash_map<int32_t, int32_t> block_refs_;     // tables holding each block
  int64_t num_allocated_slots_ = 0;
  int64_t num_iterations_ = 0;
};

}  // namespace orca::sim
