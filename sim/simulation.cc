#include "sim/simulation.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/split_mix64.h"
#include "core/common/status_macros.h"

namespace orca::sim {
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
  sched::IterationId iteration_id = 0;
  absl::Duration done;
  std::vector<sched::RequestResult> results;
};

sched::RequestSpec MakeSpec(const loadgen::TraceRequest& request, size_t index, const SimulationOptions& options) {
  sched::RequestSpec spec;
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
  return num_iterations > 0 ? static_cast<double>(num_batched_requests) / static_cast<double>(num_iterations) : 0.0;
}

namespace {

/// The event loop of one RunSimulation call.
class SimulationLoop {
 public:
  SimulationLoop(const std::vector<loadgen::TraceRequest>& trace, sched::Scheduler& scheduler, StepRunner& runner,
                 const SimulationOptions& options)
      : trace_(trace), scheduler_(scheduler), runner_(runner), options_(options), pipeline_(runner.num_stages()) {
    result_.requests.resize(trace.size());
    index_of_.reserve(trace.size());
  }

  absl::StatusOr<SimulationResult> Run() {
    for (;;) {
      // Completions first: their slots and pipeline slots are free for arrivals at `now`.
      ORCA_RETURN_IF_ERROR(DeliverCompletions());
      ORCA_RETURN_IF_ERROR(SubmitArrivals());
      ORCA_RETURN_IF_ERROR(ScheduleAll());
      const std::optional<absl::Duration> next = NextEventTime();
      if (!next.has_value()) break;
      if (*next > options_.max_simulated_time) {
        return absl::DeadlineExceededError(absl::StrCat("simulation passed max_simulated_time (",
                                                        absl::FormatDuration(options_.max_simulated_time), ") with ",
                                                        trace_.size() - num_finished_, " requests unfinished"));
      }
      now_ = *next;
    }
    if (num_finished_ != trace_.size()) {
      const sched::SchedulerStats stats = scheduler_.stats();
      return absl::FailedPreconditionError(
          absl::StrCat("simulation stalled at t=", absl::FormatDuration(now_), " with ", trace_.size() - num_finished_,
                       " requests unfinished (queued ", stats.num_queued, ", running ", stats.num_running, ", n_rsrv ",
                       stats.n_rsrv, "/", stats.n_slots, ")"));
    }
    ORCA_RETURN_IF_ERROR(runner_.Release(scheduler_.TakeReleasedRequestIds()));
    if (!trace_.empty()) {
      absl::Duration last_finish = absl::ZeroDuration();
      for (const RequestRecord& r : result_.requests) last_finish = std::max(last_finish, r.finish);
      result_.makespan = last_finish - trace_.front().arrival;
    }
    return std::move(result_);
  }

 private:
  absl::Time Now() const { return absl::UnixEpoch() + now_; }

  absl::Status DeliverCompletions() {
    while (!in_flight_.empty() && in_flight_.front().done <= now_) {
      InFlightIteration done = std::move(in_flight_.front());
      in_flight_.pop_front();
      ORCA_ASSIGN_OR_RETURN(std::vector<sched::RequestEvent> events,
                            scheduler_.OnIterationDone(done.iteration_id, done.results, Now()));
      Record(events);
    }
    return absl::OkStatus();
  }

  absl::Status SubmitArrivals() {
    while (next_arrival_ < trace_.size() && trace_[next_arrival_].arrival <= now_) {
      const loadgen::TraceRequest& request = trace_[next_arrival_];
      absl::StatusOr<sched::RequestId> id = scheduler_.Submit(MakeSpec(request, next_arrival_, options_), Now());
      if (!id.ok()) return Annotate(id.status(), absl::StrCat("trace request ", next_arrival_));
      index_of_[*id] = next_arrival_;
      RequestRecord& r = result_.requests[next_arrival_];
      r.id = *id;
      r.arrival = request.arrival;
      r.num_prompt_tokens = request.num_prompt_tokens;
      ++next_arrival_;
    }
    return absl::OkStatus();
  }

  absl::Status ScheduleAll() {
    while (std::optional<sched::IterationPlan> plan = scheduler_.Schedule(Now())) {
      ORCA_ASSIGN_OR_RETURN(StepOutcome outcome, runner_.Run(*plan));
      ++result_.num_iterations;
      result_.num_batched_requests += static_cast<int64_t>(plan->requests.size());
      result_.engine_time += outcome.elapsed;
      in_flight_.push_back(
          InFlightIteration{plan->iteration_id, pipeline_.Enter(now_, outcome.elapsed), std::move(outcome.results)});
    }
    return absl::OkStatus();
  }

  std::optional<absl::Duration> NextEventTime() const {
    std::optional<absl::Duration> next;
    if (!in_flight_.empty()) next = in_flight_.front().done;
    if (next_arrival_ < trace_.size()) {
      const absl::Duration arrival = trace_[next_arrival_].arrival;
      next = next.has_value() ? std::min(*next, arrival) : arrival;
    }
    return next;
  }

  void Record(const std::vector<sched::RequestEvent>& events) {
    for (const sched::RequestEvent& event : events) {
      RequestRecord& r = result_.requests[index_of_.at(event.request_id)];
      if (!event.new_tokens.empty() && r.num_generated_tokens == 0) r.first_token = now_;
      r.num_generated_tokens += static_cast<int32_t>(event.new_tokens.size());
      if (event.finish.has_value()) {
        r.finish = now_;
        r.final_state = event.finish->state;
        ++num_finished_;
      }
    }
  }

  const std::vector<loadgen::TraceRequest>& trace_;
  sched::Scheduler& scheduler_;
  StepRunner& runner_;
  const SimulationOptions& options_;
  PipelineModel pipeline_;
  SimulationResult result_;
  absl::flat_hash_map<sched::RequestId, size_t> index_of_;
  std::deque<InFlightIteration> in_flight_;
  size_t next_arrival_ = 0;
  size_t num_finished_ = 0;
  absl::Duration now_ = absl::ZeroDuration();
};

}  // namespace

absl::StatusOr<SimulationResult> RunSimulation(const std::vector<loadgen::TraceRequest>& trace,
                                               sched::Scheduler& scheduler, StepRunner& runner,
                                               const SimulationOptions& options) {
  if (scheduler.HasRequests()) {
    return absl::FailedPreconditionError("the scheduler already holds requests");
  }
  if (runner.num_stages() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("runner has ", runner.num_stages(), " pipeline stages"));
  }
  if (options.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size must be >= 1 (got ", options.vocab_size, ")"));
  }
  return SimulationLoop(trace, scheduler, runner, options).Run();
}

}  // namespace orca::sim
