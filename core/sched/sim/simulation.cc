#include "core/sched/sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/sched/sim/split_mix64.h"

namespace orca::sched::sim {
namespace {

/// Pipeline stages as FIFO servers: a batch occupies stage k for elapsed / num_stages, after
/// it left stage k-1 and after the previous batch left stage k.
class PipelineModel {
 public:
  explicit PipelineModel(int32_t num_stages) : stage_free_(num_stages, absl::ZeroDuration()) {}

  /// When a batch entering at `now` and taking `elapsed` in total leaves the last stage.
  absl::Duration Enter(absl::Duration now, absl::Duration elapsed) {
    const absl::Duration per_stage = elapsed / static_cast<int64_t>(stage_free_.size());
    absl::Duration t = now;
    for (absl::Duration& free_at : stage_free_) {
      t = std::max(t, free_at) + per_stage;
      free_at = t;
    }
    return t;
  }

 private:
  std::vector<absl::Duration> stage_free_;
};

struct InFlightIteration {
  IterationId iteration_id = 0;
  absl::Duration done;
  std::vector<RequestResult> results;
};

RequestSpec MakeSpec(const TraceRequest& request, size_t index, const SimulationOptions& options) {
  RequestSpec spec;
  spec.caller_id = absl::StrCat("trace-", index);
  spec.prompt_token_ids.resize(request.num_prompt_tokens);
  SplitMix64 rng(0x7072'6f6d'7074ULL + index);
  for (int32_t& token : spec.prompt_token_ids) {
    token = static_cast<int32_t>(rng.NextInt(0, options.vocab_size - 1));
  }
  spec.max_new_tokens = request.max_new_tokens;
  spec.eos_token_ids = options.eos_token_ids;
  spec.ignore_eos = options.ignore_eos;
  return spec;
}

}  // namespace

double RequestRecord::NormalizedLatencySeconds() const {
  return absl::ToDoubleSeconds(latency()) / std::max(1, num_generated_tokens);
}

double SimulationResult::ThroughputRps() const {
  const double seconds = absl::ToDoubleSeconds(makespan);
  return seconds > 0 ? static_cast<double>(requests.size()) / seconds : 0.0;
}

double SimulationResult::NormalizedLatencyQuantile(double q) const {
  if (requests.empty()) return 0.0;
  std::vector<double> values;
  values.reserve(requests.size());
  for (const RequestRecord& r : requests) values.push_back(r.NormalizedLatencySeconds());
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

double SimulationResult::MeanBatchSize() const {
  return num_iterations > 0
             ? static_cast<double>(num_batched_requests) / static_cast<double>(num_iterations)
             : 0.0;
}

absl::StatusOr<SimulationResult> RunSimulation(const std::vector<TraceRequest>& trace,
                                               Scheduler& scheduler, StepRunner& runner,
                                               const SimulationOptions& options) {
  if (scheduler.HasRequests()) {
    return absl::FailedPreconditionError("the scheduler already holds requests");
  }
  if (runner.num_stages() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("runner has ", runner.num_stages(), " pipeline stages"));
  }
  if (options.vocab_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size must be >= 1 (got ", options.vocab_size, ")"));
  }
  const absl::Time epoch = absl::UnixEpoch();
  SimulationResult result;
  result.requests.resize(trace.size());
  absl::flat_hash_map<RequestId, size_t> index_of;
  index_of.reserve(trace.size());
  std::deque<InFlightIteration> in_flight;
  PipelineModel pipeline(runner.num_stages());
  size_t next_arrival = 0;
  size_t num_finished = 0;
  absl::Duration now = absl::ZeroDuration();

  auto record = [&](const std::vector<RequestEvent>& events) {
    for (const RequestEvent& event : events) {
      RequestRecord& r = result.requests[index_of.at(event.request_id)];
      if (!event.new_tokens.empty() && r.num_generated_tokens == 0) r.first_token = now;
      r.num_generated_tokens += static_cast<int32_t>(event.new_tokens.size());
      if (event.finish.has_value()) {
        r.finish = now;
        r.final_state = event.finish->state;
        ++num_finished;
      }
    }
  };

  for (;;) {
    // Completions first: their slots and pipeline slots are free for arrivals at `now`.
    while (!in_flight.empty() && in_flight.front().done <= now) {
      InFlightIteration done = std::move(in_flight.front());
      in_flight.pop_front();
      ORCA_ASSIGN_OR_RETURN(
          std::vector<RequestEvent> events,
          scheduler.OnIterationDone(done.iteration_id, done.results, epoch + now));
      record(events);
    }
    while (next_arrival < trace.size() && trace[next_arrival].arrival <= now) {
      const TraceRequest& request = trace[next_arrival];
      absl::StatusOr<RequestId> id =
          scheduler.Submit(MakeSpec(request, next_arrival, options), epoch + now);
      if (!id.ok()) {
        return Annotate(id.status(), absl::StrCat("trace request ", next_arrival));
      }
      index_of[*id] = next_arrival;
      RequestRecord& r = result.requests[next_arrival];
      r.id = *id;
      r.arrival = request.arrival;
      r.num_prompt_tokens = request.num_prompt_tokens;
      ++next_arrival;
    }
    while (std::optional<IterationPlan> plan = scheduler.Schedule(epoch + now)) {
      ORCA_ASSIGN_OR_RETURN(StepOutcome outcome, runner.Run(*plan));
      ++result.num_iterations;
      result.num_batched_requests += static_cast<int64_t>(plan->requests.size());
      result.engine_time += outcome.elapsed;
      in_flight.push_back(InFlightIteration{plan->iteration_id,
                                            pipeline.Enter(now, outcome.elapsed),
                                            std::move(outcome.results)});
    }

    std::optional<absl::Duration> next;
    if (!in_flight.empty()) next = in_flight.front().done;
    if (next_arrival < trace.size()) {
      next = next.has_value() ? std::min(*next, trace[next_arrival].arrival)
                              : trace[next_arrival].arrival;
    }
    if (!next.has_value()) break;
    if (*next > options.max_simulated_time) {
      return absl::DeadlineExceededError(absl::StrCat(
          "simulation passed max_simulated_time (", absl::FormatDuration(options.max_simulated_time),
          ") with ", trace.size() - num_finished, " requests unfinished"));
    }
    now = *next;
  }

  if (num_finished != trace.size()) {
    const SchedulerStats stats = scheduler.stats();
    return absl::FailedPreconditionError(absl::StrCat(
        "simulation stalled at t=", absl::FormatDuration(now), " with ",
        trace.size() - num_finished, " requests unfinished (queued ", stats.num_queued,
        ", running ", stats.num_running, ", n_rsrv ", stats.n_rsrv, "/", stats.n_slots, ")"));
  }
  ORCA_RETURN_IF_ERROR(runner.Release(scheduler.TakeReleasedRequestIds()));
  if (!trace.empty()) {
    absl::Duration last_finish = absl::ZeroDuration();
    for (const RequestRecord& r : result.requests) last_finish = std::max(last_finish, r.finish);
    result.makespan = last_finish - trace.front().arrival;
  }
  return result;
}

}  // namespace orca::sched::sim
