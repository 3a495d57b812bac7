// Orca issue 4 benchmark: the paper's §6.2 trace through a real 2-stage pipeline (separate
// orca-worker processes, Gloo data plane, gRPC control plane) with 1 vs 2 batches in flight
// (the scheduler's n_workers), and the control-plane overhead per iteration.
//
// For each n_workers the bench starts its own stack on loopback (workers, scheduler,
// gateway), replays the trace with the load driver at each rate, and reads every process's
// /metrics before and after each run:
//   iteration   = orca:iteration_duration_seconds (scheduler: plan sent → tokens back)
//   compute_s   = orca:stage_compute_seconds{stage=s}
//   span_last   = compute + communication of the LAST stage. The last stage receives the
//                 control message before stage 0 finishes (it is forwarded before compute),
//                 then waits in its activation receive: its communication time covers the
//                 upstream stages' compute and the activation transfer. Its span is the data
//                 path of the iteration.
//   control     = iteration − span_last: delivering the control message to the last stage
//                 and the sampled tokens back to the scheduler (gRPC, encode/decode, the
//                 scheduler loop). Exact with one batch in flight; with two, an iteration
//                 also queues behind the other batch, which this difference then includes.
//
//   orca_pipeline_bench [--preset 4m] [--stages 2] [--n-workers 1,2] [--rates 2,6]

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/pipeline/bench_models.h"
#include "bench/pipeline/local_stack.h"
#include "core/common/flags.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/common/subprocess.h"
#include "core/loadgen/bench_run.h"
#include "core/loadgen/prometheus_text.h"
#include "core/loadgen/trace_flags.h"

namespace orca::bench {
namespace {

struct Args {
  std::string model;
  std::string preset = "4m";
  std::string model_dir = "/tmp/orca-bench-models";
  std::string bin_dir;
  int64_t stages = 2;
  std::string n_workers = "1,2";
  std::string rates = "2,6";
  loadgen::TraceFlags trace;  ///< The paper's §6.2 trace: --num-requests, --seed, the length bounds
  double max_duration_s = 300;
  int64_t threads = 1;
  int64_t max_bs = 16;
  int64_t n_slots = 8192;
  std::string policy = "orca";
  std::string out = "bench-out/pipeline";
};

/// One (n_workers, rate) run.
struct Row {
  int n_workers = 0;
  double rate = 0;
  loadgen::BenchSummary summary;
  loadgen::HistogramTotals iteration;
  loadgen::HistogramTotals batch_size;
  std::vector<loadgen::HistogramTotals> compute, comm;  ///< Per stage.
  double ControlSeconds() const { return iteration.mean() - compute.back().mean() - comm.back().mean(); }
  double ComputeSeconds() const {
    double total = 0;
    for (const loadgen::HistogramTotals& c : compute) total += c.mean();
    return total;
  }
};

struct Scrape {
  loadgen::MetricSamples scheduler;
  std::vector<loadgen::MetricSamples> workers;
};

absl::StatusOr<Scrape> ScrapeAll(const LocalStack& stack) {
  Scrape s;
  ORCA_ASSIGN_OR_RETURN(s.scheduler, loadgen::ScrapeMetrics(stack.scheduler_metrics_url()));
  for (const std::string& url : stack.worker_metrics_urls()) {
    ORCA_ASSIGN_OR_RETURN(loadgen::MetricSamples w, loadgen::ScrapeMetrics(url));
    s.workers.push_back(std::move(w));
  }
  return s;
}

void FillMetrics(const Scrape& before, const Scrape& after, Row* row) {
  row->iteration = Delta(loadgen::ReadHistogram(after.scheduler, "orca:iteration_duration_seconds"),
                         loadgen::ReadHistogram(before.scheduler, "orca:iteration_duration_seconds"));
  row->batch_size = Delta(loadgen::ReadHistogram(after.scheduler, "orca:batch_size"),
                          loadgen::ReadHistogram(before.scheduler, "orca:batch_size"));
  for (size_t s = 0; s < after.workers.size(); ++s) {
    row->compute.push_back(Delta(loadgen::ReadHistogram(after.workers[s], "orca:stage_compute_seconds"),
                                 loadgen::ReadHistogram(before.workers[s], "orca:stage_compute_seconds")));
    row->comm.push_back(Delta(loadgen::ReadHistogram(after.workers[s], "orca:stage_communication_seconds"),
                              loadgen::ReadHistogram(before.workers[s], "orca:stage_communication_seconds")));
  }
}

absl::StatusOr<std::string> ResolveModel(const Args& args) {
  if (!args.model.empty()) return std::filesystem::absolute(args.model).string();
  return EnsureSyntheticModel(args.bin_dir, args.preset, args.model_dir);
}

std::string FormatRows(const std::vector<Row>& rows) {
  std::string out = absl::StrFormat("%-9s %6s %10s %9s %9s %9s %9s %7s %9s %9s %9s %10s %7s\n", "n_workers", "rate",
                                    "throughput", "tokens/s", "p50 norm", "p99 norm", "TTFT p50", "batch", "iter",
                                    "compute", "last span", "control", "share");
  absl::StrAppend(&out, absl::StrFormat("%-9s %6s %10s %9s %9s %9s %9s %7s %9s %9s %9s %10s %7s\n", "", "(req/s)",
                                        "(req/s)", "(out)", "(ms/tok)", "(ms/tok)", "(ms)", "(mean)", "(ms)", "(ms, Σ)",
                                        "(ms)", "(µs/iter)", ""));
  for (const Row& r : rows) {
    const double iter = r.iteration.mean();
    absl::StrAppend(
        &out, absl::StrFormat("%-9d %6g %10.3f %9.1f %9.2f %9.2f %9.1f %7.2f %9.2f %9.2f %9.2f %10.0f %6.1f%%\n",
                              r.n_workers, r.rate, r.summary.throughput_rps, r.summary.output_tokens_per_s,
                              r.summary.normalized_latency_s.p50 * 1e3, r.summary.normalized_latency_s.p99 * 1e3,
                              r.summary.ttft_s.p50 * 1e3, r.batch_size.mean(), iter * 1e3, r.ComputeSeconds() * 1e3,
                              (r.compute.back().mean() + r.comm.back().mean()) * 1e3, r.ControlSeconds() * 1e6,
                              iter > 0 ? 100 * r.ControlSeconds() / iter : 0.0));
  }
  return out;
}

std::string FormatGain(const std::vector<Row>& rows) {
  std::string out;
  for (const Row& two : rows) {
    if (two.n_workers < 2) continue;
    for (const Row& one : rows) {
      if (one.n_workers != 1 || one.rate != two.rate || one.summary.throughput_rps <= 0) continue;
      absl::StrAppend(
          &out, absl::StrFormat(
                    "rate %g: n_workers %d / 1 = %.2fx throughput, p50 normalized latency %.2f -> %.2f ms/token\n",
                    two.rate, two.n_workers, two.summary.throughput_rps / one.summary.throughput_rps,
                    one.summary.normalized_latency_s.p50 * 1e3, two.summary.normalized_latency_s.p50 * 1e3));
    }
  }
  return out;
}

absl::Status Run(Args args) {
  if (args.bin_dir.empty()) {
    args.bin_dir = ExecutableDir();
  }
  ORCA_ASSIGN_OR_RETURN(const std::string model, ResolveModel(args));
  ORCA_ASSIGN_OR_RETURN(const std::vector<double> n_workers_list, ParsePositiveNumberList(args.n_workers, "n-workers"));
  ORCA_ASSIGN_OR_RETURN(const std::vector<double> rates, ParsePositiveNumberList(args.rates, "rates"));
  ORCA_ASSIGN_OR_RETURN(const loadgen::LoadTraceOptions trace, loadgen::TraceOptionsFromFlags(args.trace));
  std::vector<Row> rows;
  for (double nw : n_workers_list) {
    LocalStackOptions so;
    so.bin_dir = args.bin_dir;
    so.model = model;
    so.num_stages = static_cast<int32_t>(args.stages);
    so.n_workers = static_cast<int32_t>(nw);
    so.policy = args.policy;
    so.max_bs = static_cast<int32_t>(args.max_bs);
    so.n_slots = args.n_slots;
    so.threads_per_worker = static_cast<int32_t>(args.threads);
    so.log_dir = absl::StrFormat("%s/logs/n_workers-%g", args.out, nw);
    std::fprintf(stderr, "starting %lld stage(s), n_workers %g\n", static_cast<long long>(args.stages), nw);
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<LocalStack> stack, LocalStack::Start(so));
    loadgen::BenchRunOptions warm;
    warm.trace.trace = "homogeneous";
    warm.trace.arrival_rate = 1000;
    warm.trace.num_requests = 4;
    warm.trace.prompt_tokens = 16;
    warm.trace.output_tokens = 4;
    warm.driver.base_url = stack->gateway_url();
    warm.driver.show_progress = false;
    warm.driver.max_duration = absl::Seconds(60);
    ORCA_RETURN_IF_ERROR(loadgen::RunBenchmark(warm, "warmup").status());
    for (double rate : rates) {
      loadgen::BenchRunOptions run;
      run.trace = trace;
      run.trace.arrival_rate = rate;
      run.driver.base_url = stack->gateway_url();
      run.driver.max_duration = absl::Seconds(args.max_duration_s);
      run.driver.progress_label = absl::StrFormat("n_workers %g @ %g req/s", nw, rate);
      run.prompts.seed = trace.seed;
      ORCA_ASSIGN_OR_RETURN(const Scrape before, ScrapeAll(*stack));
      ORCA_ASSIGN_OR_RETURN(loadgen::BenchRunReport report, loadgen::RunBenchmark(run, run.driver.progress_label));
      ORCA_ASSIGN_OR_RETURN(const Scrape after, ScrapeAll(*stack));
      Row& row = rows.emplace_back();
      row.n_workers = static_cast<int>(nw);
      row.rate = rate;
      row.summary = report.summary;
      FillMetrics(before, after, &row);
      report.config.emplace_back("n_workers", absl::StrCat(nw));
      report.config.emplace_back("stages", absl::StrCat(args.stages));
      ORCA_RETURN_IF_ERROR(
          loadgen::WriteReport(report, absl::StrFormat("%s/n_workers-%g/rate-%g", args.out, nw, rate)));
    }
    ORCA_RETURN_IF_ERROR(stack->Stop());
  }
  const std::string table = FormatRows(rows);
  const std::string gain = FormatGain(rows);
  std::printf(
      "# %lld-stage pipeline, %s, policy %s, max_bs %lld, %lld thread(s) per worker, paper §6.2 trace, %lld requests "
      "per run\n\n%s\n%s",
      static_cast<long long>(args.stages), model.c_str(), args.policy.c_str(), static_cast<long long>(args.max_bs),
      static_cast<long long>(args.threads), static_cast<long long>(trace.num_requests), table.c_str(), gain.c_str());
  return WriteStringToFile(args.out + "/pipeline.txt", table + "\n" + gain);
}

}  // namespace
}  // namespace orca::bench

int main(int argc, char** argv) {
  orca::bench::Args a;
  orca::FlagSet flags("orca_pipeline_bench",
                      "The paper's §6.2 trace through a real multi-process pipeline with 1 vs 2 batches in flight,\n"
                      "and the control-plane overhead per iteration from each process's /metrics.");
  flags.AddString("model", &a.model, "Checkpoint with tokenizer (default: a synthetic --preset model)");
  flags.AddString("preset", &a.preset, "Synthetic Llama shape when --model is empty: tiny, 4m or 25m");
  flags.AddString("model-dir", &a.model_dir, "Where synthetic models are written");
  flags.AddString("bin-dir", &a.bin_dir, "Directory of orca-worker/-scheduler/-gateway (default: this binary's)");
  flags.AddInt("stages", &a.stages, "Pipeline stages (worker processes)");
  flags.AddString("n-workers", &a.n_workers, "Batches in flight to compare, e.g. 1,2");
  flags.AddString("rates", &a.rates, "Arrival rates (req/s)");
  flags.AddDouble("max-duration", &a.max_duration_s, "Seconds after which a run stops by itself");
  orca::loadgen::AddTraceFlags(orca::loadgen::TraceFlagScope::kPaper, &a.trace, &flags);
  flags.AddInt("threads", &a.threads, "Compute threads per worker");
  flags.AddInt("max-bs", &a.max_bs, "Scheduler max_bs");
  flags.AddInt("n-slots", &a.n_slots, "KV slots per stage");
  flags.AddString("policy", &a.policy, "orca or request-level");
  flags.AddString("out", &a.out, "Output directory (per-run CSV/JSON, logs, pipeline.txt)");
  if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
  if (absl::Status s = orca::bench::Run(a); !s.ok()) {
    std::fprintf(stderr, "orca_pipeline_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
