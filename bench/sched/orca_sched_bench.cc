// orca_sched_bench: the ORCA paper's §6.2 end-to-end experiment on a simulated GPU engine.
//
// Trace: Poisson arrivals at rate λ, prompt U(32, 512), max new tokens U(1, 128), no early
// EOS. For each λ it runs orca(max_bs) for several max_bs and the request-level baseline
// (several max_bs) on the same trace and the same cost model, then reports median
// normalized latency (latency / generated tokens) against throughput, and the throughput
// ratio of the best orca configuration over the best baseline configuration at equal
// median normalized latency (linear interpolation of each curve at the target). By default
// it does so for both cost shapes (linear and roofline, see cost_model.h).

#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/common/flags.h"
#include "core/common/status_macros.h"
#include "core/loadgen/trace_flags.h"
#include "sim/cost_model.h"
#include "sim/simulated_engine.h"
#include "sim/sweep.h"

namespace orca::sim {
namespace {

struct BenchFlags {
  std::string model = "gpt3-13b";
  std::string cost_shape = "both";
  loadgen::TraceFlags trace = [] {
    loadgen::TraceFlags t;
    t.options.num_requests = 1000;
    return t;
  }();
  std::vector<std::string> rates;
  std::vector<std::string> orca_max_bs = {"8", "16", "32", "64"};
  std::vector<std::string> baseline_max_bs = {"1", "2", "4", "8", "16", "32"};
  int64_t n_slots = 0;
  int64_t n_workers = 0;
  double saturation_ms = 1000;
  std::vector<std::string> targets = {"1.25", "1.5", "2", "3", "5"};
  std::string csv;
};

/// Everything one sweep needs, validated.
struct BenchPlan {
  CostModel cost;
  std::vector<CostShape> shapes;
  SweepOptions sweep;
  std::vector<loadgen::SweepConfig> configs;
  std::vector<double> target_multiples;
};

template <typename T>
absl::StatusOr<std::vector<T>> ParseList(const std::vector<std::string>& items, const char* flag) {
  std::vector<T> values;
  for (const std::string& item : items) {
    T value{};
    bool ok;
    if constexpr (std::is_same_v<T, double>) {
      ok = absl::SimpleAtod(item, &value) && value > 0;
    } else {
      ok = absl::SimpleAtoi(item, &value) && value > 0;
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", item, "' is not a positive number"));
    }
    values.push_back(value);
  }
  return values;
}

// Geometric grid from 0.1 req/s growing by 10^(1/10) (10 points per decade) to `max_rate`.
std::vector<double> DefaultRates(double max_rate) {
  std::vector<double> rates;
  for (double rate = 0.1; rate <= max_rate * 1.0001; rate *= 1.2589254117941673) {
    rates.push_back(rate);
  }
  return rates;
}

absl::StatusOr<BenchPlan> MakePlan(const BenchFlags& f) {
  BenchPlan plan;
  ORCA_ASSIGN_OR_RETURN(plan.cost, CostModel::Preset(f.model));
  if (f.cost_shape == "both") {
    plan.shapes = {CostShape::kLinear, CostShape::kRoofline};
  } else if (std::optional<CostShape> shape = ParseCostShape(f.cost_shape)) {
    plan.shapes = {*shape};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--cost-shape: '", f.cost_shape, "' is not linear, roofline or both"));
  }
  ORCA_ASSIGN_OR_RETURN(const loadgen::LoadTraceOptions trace, loadgen::TraceOptionsFromFlags(f.trace));
  if (trace.num_requests < 1) return absl::InvalidArgumentError("--num-requests must be >= 1");
  plan.sweep.trace = loadgen::PoissonTraceOptions(trace);
  plan.sweep.saturation_latency = f.saturation_ms / 1e3;
  if (f.rates.empty()) {
    plan.sweep.arrival_rates = DefaultRates(32.0);
  } else {
    ORCA_ASSIGN_OR_RETURN(plan.sweep.arrival_rates, ParseList<double>(f.rates, "rates"));
  }
  ORCA_ASSIGN_OR_RETURN(plan.target_multiples, ParseList<double>(f.targets, "targets"));
  ORCA_ASSIGN_OR_RETURN(const std::vector<int64_t> orca_bs, ParseList<int64_t>(f.orca_max_bs, "orca-max-bs"));
  ORCA_ASSIGN_OR_RETURN(const std::vector<int64_t> base_bs, ParseList<int64_t>(f.baseline_max_bs, "baseline-max-bs"));

  sched::SchedulerOptions base;
  base.n_slots = f.n_slots > 0 ? f.n_slots : plan.cost.kv_slots;
  base.n_workers = static_cast<int32_t>(f.n_workers > 0 ? f.n_workers : plan.cost.num_stages);
  for (const auto& [policy, sizes] :
       {std::pair{sched::PolicyKind::kOrca, orca_bs}, std::pair{sched::PolicyKind::kRequestLevel, base_bs}}) {
    for (int64_t bs : sizes) {
      sched::SchedulerOptions options = base;
      options.policy = policy;
      options.max_bs = static_cast<int32_t>(bs);
      plan.configs.push_back({absl::StrCat(sched::PolicyKindName(policy), "(max_bs=", bs, ")"), options});
    }
  }
  return plan;
}

absl::Status AppendCsv(const std::string& path, CostShape shape, const std::vector<loadgen::SweepCurve>& curves,
                       bool header) {
  std::ofstream out(path, header ? std::ios::trunc : std::ios::app);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write --csv ", path));
  if (header) {
    out << "cost_shape,config,policy,max_bs,arrival_rate,throughput_rps,p50_norm_latency_s,"
           "p99_norm_latency_s,mean_batch,iterations\n";
  }
  for (const loadgen::SweepCurve& curve : curves) {
    for (const loadgen::SweepPoint& p : curve.points) {
      out << absl::StrFormat("%s,%s,%s,%d,%.6f,%.6f,%.6f,%.6f,%.3f,%d\n", CostShapeName(shape), curve.config.label,
                             sched::PolicyKindName(curve.config.scheduler.policy), curve.config.scheduler.max_bs,
                             p.arrival_rate, p.throughput_rps, p.median_normalized_latency, p.p99_normalized_latency,
                             p.mean_batch_size, p.num_iterations);
    }
  }
  return out.good() ? absl::OkStatus() : absl::UnavailableError(absl::StrCat("writing ", path));
}

// Runs the sweep on one cost shape and prints its tables.
absl::StatusOr<std::vector<loadgen::SweepCurve>> RunShape(const BenchPlan& plan, CostShape shape) {
  CostModel cost = plan.cost;
  cost.shape = shape;
  const sched::SchedulerOptions& scheduler = plan.configs.front().scheduler;
  std::cout << absl::StrFormat(
      "=== %s, %s cost per iteration (summed over stages):\n"
      "    fixed %.2f ms, weights %.2f ms, GEMM %.4f ms/token, all-reduce %.4f ms/token,\n"
      "    attention %.3f us per context token (increment), %.2f ns per prompt (query, key) pair\n"
      "    n_slots %d, n_workers %d, %d requests per point, seed %d, prompt U(32,512), max new "
      "U(1,128), no early EOS\n\n",
      cost.description, CostShapeName(shape), cost.fixed_seconds * 1e3, cost.weight_seconds * 1e3,
      cost.per_token_seconds * 1e3, cost.per_token_comm_seconds * 1e3, cost.per_context_seconds * 1e6,
      cost.per_prompt_pair_seconds * 1e9, scheduler.n_slots, scheduler.n_workers, plan.sweep.trace.num_requests,
      plan.sweep.trace.seed);

  RunnerFactory factory =
      [&cost](const sched::SchedulerOptions& options) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
    SimulatedEngineOptions engine;
    engine.cost = cost;
    engine.n_slots = options.n_slots;
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<SimulatedEngine> simulated, SimulatedEngine::Create(engine));
    return std::unique_ptr<StepRunner>(std::move(simulated));
  };
  ORCA_ASSIGN_OR_RETURN(std::vector<loadgen::SweepCurve> curves, RunSweep(plan.sweep, plan.configs, factory));
  std::cout << loadgen::FormatSweepTable(curves) << "\n";

  const std::optional<double> floor = loadgen::MinMedianLatency(curves, sched::PolicyKind::kRequestLevel);
  if (!floor.has_value()) return curves;
  std::vector<double> targets;
  std::vector<std::string> multiples;
  for (double multiple : plan.target_multiples) {
    targets.push_back(*floor * multiple);
    multiples.push_back(absl::StrFormat("%g", multiple));
  }
  std::cout << absl::StrFormat(
      "Throughput at equal median normalized latency: best configuration of each policy, each\n"
      "curve interpolated linearly at the target. Targets = %s x the baseline's lowest median\n"
      "normalized latency (%.1f ms/token).\n",
      absl::StrJoin(multiples, ", "), *floor * 1e3);
  std::cout << loadgen::FormatRatioTable(curves, targets);
  double best_ratio = 0;
  double best_target = 0;
  for (double target : targets) {
    const std::optional<double> orca = loadgen::BestThroughputAtLatency(curves, sched::PolicyKind::kOrca, target);
    const std::optional<double> base =
        loadgen::BestThroughputAtLatency(curves, sched::PolicyKind::kRequestLevel, target);
    if (orca && base && *base > 0 && *orca / *base > best_ratio) {
      best_ratio = *orca / *base;
      best_target = target;
    }
  }
  std::cout << absl::StrFormat("%s cost: orca reaches up to %.1fx the baseline's throughput (at %.1f ms/token)\n\n",
                               CostShapeName(shape), best_ratio, best_target * 1e3);
  return curves;
}

absl::Status Run(int argc, char** argv) {
  BenchFlags f;
  FlagSet flags("orca_sched_bench", "ORCA §6.2 on a simulated GPU engine: orca(max_bs) vs the request-level baseline.");
  flags.AddString("model", &f.model, "Cost-model preset: gpt3-13b, gpt3-101b, gpt3-175b, gpt3-341b");
  flags.AddString("cost-shape", &f.cost_shape, "linear (a + b*tokens), roofline (max(weights, b*tokens)) or both");
  // The same trace for every configuration and rate.
  loadgen::AddTraceFlags(loadgen::TraceFlagScope::kPaper, &f.trace, &flags);
  flags.AddStringList("rates", &f.rates, "Arrival rates in req/s (default: 0.1 .. 32, 10 per decade)");
  flags.AddStringList("orca-max-bs", &f.orca_max_bs, "max_bs values of the orca curves");
  flags.AddStringList("baseline-max-bs", &f.baseline_max_bs, "max_bs values of the baseline curves");
  flags.AddInt("n-slots", &f.n_slots, "KV slots (0 = what the modeled GPUs hold beside the weights)");
  flags.AddInt("n-workers", &f.n_workers, "Batches in flight (0 = pipeline stages of the preset)");
  flags.AddDouble("saturation-ms", &f.saturation_ms,
                  "Stop a curve once its median normalized latency passes this (ms/token)");
  flags.AddStringList("targets", &f.targets,
                      "Latency targets of the ratio, as multiples of the baseline's lowest median "
                      "normalized latency");
  flags.AddString("csv", &f.csv, "Also write every point to this CSV file");
  ORCA_RETURN_IF_ERROR(flags.Parse(argc, argv));
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return absl::OkStatus();
  }
  ORCA_ASSIGN_OR_RETURN(const BenchPlan plan, MakePlan(f));
  for (size_t i = 0; i < plan.shapes.size(); ++i) {
    ORCA_ASSIGN_OR_RETURN(const std::vector<loadgen::SweepCurve> curves, RunShape(plan, plan.shapes[i]));
    if (!f.csv.empty()) ORCA_RETURN_IF_ERROR(AppendCsv(f.csv, plan.shapes[i], curves, i == 0));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace orca::sim

int main(int argc, char** argv) {
  absl::Status status = orca::sim::Run(argc, argv);
  if (!status.ok()) {
    std::cerr << "orca_sched_bench: " << status << "\n";
    return 1;
  }
  return 0;
}
