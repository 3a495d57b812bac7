#include "core/loadgen/serving_sweep.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/loadgen/prometheus_text.h"

namespace orca::loadgen {
namespace {

/// Short requests that only warm the stack up; their results are dropped.
absl::Status WarmUp(const ServingSweepOptions& options, const std::string& base_url) {
  if (options.warmup_requests <= 0) return absl::OkStatus();
  BenchRunOptions warm = options.run;
  warm.trace.trace = "homogeneous";
  warm.trace.chat_closed_loop = false;  // open loop: only warms the stack
  warm.trace.arrival_rate = 1000;       // all at once
  warm.trace.num_requests = options.warmup_requests;
  warm.trace.prompt_tokens = 16;
  warm.trace.output_tokens = 4;
  warm.driver.base_url = base_url;
  warm.driver.show_progress = false;
  warm.driver.max_duration = absl::Seconds(60);
  ORCA_ASSIGN_OR_RETURN(BenchRunReport report, RunBenchmark(warm, "warmup"));
  if (report.summary.num_completed != report.summary.num_requests) {
    for (const RequestRecord& r : report.run.records) {
      if (r.outcome != RequestOutcome::kOk) {
        return absl::UnavailableError(absl::StrCat("warm-up request failed: ", r.error));
      }
    }
  }
  return absl::OkStatus();
}

/// Polls the scheduler's /metrics during a run: the mean and peak of orca:kv_cache_usage_perc,
/// and the counters' growth (preemptions, prefix-cache queries and hits).
class ServerSampler {
 public:
  explicit ServerSampler(std::string url) : url_(std::move(url)) {
    if (url_.empty()) return;
    absl::StatusOr<MetricSamples> first = ScrapeMetrics(url_);
    if (!first.ok()) return;
    before_ = *first;
    thread_ = std::thread([this] { Loop(); });
  }
  ~ServerSampler() { (void)Finish(); }

  ServerSample Finish() {
    if (!thread_.joinable()) return sample_;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
    absl::StatusOr<MetricSamples> last = ScrapeMetrics(url_);
    if (!last.ok() || num_polls_ == 0) return sample_;
    auto grew = [&](const char* name) { return SumSeries(*last, name) - SumSeries(before_, name); };
    sample_.valid = true;
    sample_.kv_usage_mean = usage_sum_ / num_polls_;
    sample_.preemptions = grew("orca:num_preemptions_total");
    sample_.prefix_queries = grew("orca:prefix_cache_queries_total");
    sample_.prefix_hits = grew("orca:prefix_cache_hits_total");
    return sample_;
  }

 private:
  void Loop() {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(250))) return;
      }
      absl::StatusOr<MetricSamples> page = ScrapeMetrics(url_);
      if (!page.ok()) continue;
      const double usage = SumSeries(*page, "orca:kv_cache_usage_perc");
      usage_sum_ += usage;
      sample_.kv_usage_max = std::max(sample_.kv_usage_max, usage);
      ++num_polls_;
    }
  }

  std::string url_;
  MetricSamples before_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Written by the polling thread only, read after it joined.
  double usage_sum_ = 0;
  int64_t num_polls_ = 0;
  ServerSample sample_;
};

/// Runs one point on a started stack; true when the curve is saturated after it.
absl::StatusOr<bool> RunPoint(const ServingSweepOptions& options, const std::string& base_url,
                              const std::string& metrics_url, double rate, MeasuredCurve& curve) {
  const SweepCurveSpec& spec = curve.spec;
  BenchRunOptions run = options.run;
  run.trace.arrival_rate = rate;
  run.driver.base_url = base_url;
  run.driver.progress_label = absl::StrFormat("%s @ %g req/s", spec.label, rate);
  ServerSampler sampler(metrics_url);
  ORCA_ASSIGN_OR_RETURN(BenchRunReport report, RunBenchmark(run, spec.label));
  const ServerSample server = sampler.Finish();
  report.config.emplace_back("policy", spec.server.empty() ? sched::PolicyKindName(spec.policy) : spec.server);
  report.config.emplace_back("max_bs", absl::StrCat(spec.max_bs));
  report.config.emplace_back("max_num_batched_tokens", absl::StrCat(spec.max_num_batched_tokens));
  report.config.emplace_back("max_prefill_slowdown", absl::StrCat(spec.max_prefill_slowdown));
  report.config.emplace_back("long_prefill_token_threshold", absl::StrCat(spec.long_prefill_token_threshold));
  report.config.emplace_back("prefix_caching", spec.prefix_caching ? "true" : "false");
  if (!options.out_dir.empty()) {
    ORCA_RETURN_IF_ERROR(
        WriteReport(report, absl::StrFormat("%s/%s/rate-%g", options.out_dir, LabelToFileName(spec.label), rate)));
  }
  const BenchSummary& s = report.summary;
  curve.points.push_back(MeasuredPoint{rate, s, server});
  std::fprintf(stderr, "  %s @ %g req/s: %.3f req/s, p50 normalized latency %.2f ms/token\n", spec.label.c_str(), rate,
               s.throughput_rps, s.normalized_latency_s.p50 * 1e3);
  const bool cut_off = s.num_unfinished + s.num_not_sent > 0;
  const bool saturated = options.saturation_latency_s > 0 && s.normalized_latency_s.p50 > options.saturation_latency_s;
  return cut_off || saturated || s.num_completed == 0;
}

/// Starts the stack of `curve`, warms it up, runs `rates`, stops it. Stops early once
/// saturated; returns whether it did.
absl::StatusOr<bool> RunOnFreshStack(const ServingSweepOptions& options, ServingStack& stack,
                                     const std::vector<double>& rates, MeasuredCurve& curve) {
  std::fprintf(stderr, "starting the stack for %s\n", curve.spec.label.c_str());
  absl::StatusOr<std::string> base_url = stack.Start(curve.spec);
  absl::StatusOr<bool> saturated = false;
  if (base_url.ok()) {
    if (absl::Status warm = WarmUp(options, *base_url); !warm.ok()) saturated = std::move(warm);
    for (size_t i = 0; i < rates.size() && saturated.ok() && !*saturated; ++i) {
      saturated = RunPoint(options, *base_url, stack.scheduler_metrics_url(), rates[i], curve);
    }
  }
  const absl::Status stopped = stack.Stop();
  if (!base_url.ok()) return Annotate(base_url.status(), curve.spec.label);
  if (!saturated.ok()) return Annotate(saturated.status(), curve.spec.label);
  if (!stopped.ok()) return Annotate(stopped, absl::StrCat(curve.spec.label, ": stopping the stack"));
  return *saturated;
}

}  // namespace

std::string LabelToFileName(const std::string& label) {
  std::string out;
  for (char c : label) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '-';
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "curve" : out;
}

absl::StatusOr<std::vector<MeasuredCurve>> RunServingSweep(const ServingSweepOptions& options, ServingStack& stack) {
  if (options.arrival_rates.empty()) return absl::InvalidArgumentError("no arrival rates");
  for (size_t i = 0; i < options.arrival_rates.size(); ++i) {
    if (!(options.arrival_rates[i] > 0) || (i > 0 && options.arrival_rates[i] <= options.arrival_rates[i - 1])) {
      return absl::InvalidArgumentError("arrival rates must be positive and increasing");
    }
  }
  if (options.curves.empty()) return absl::InvalidArgumentError("no configurations");
  std::vector<MeasuredCurve> curves(options.curves.size());
  for (size_t i = 0; i < curves.size(); ++i) curves[i].spec = options.curves[i];
  if (!options.interleave) {
    for (MeasuredCurve& curve : curves) {
      ORCA_RETURN_IF_ERROR(RunOnFreshStack(options, stack, options.arrival_rates, curve).status());
    }
    return curves;
  }
  // Rate by rate, every configuration on a fresh stack: a drift in the machine's background
  // load then hits all curves alike instead of whichever ran during it.
  std::vector<bool> saturated(curves.size(), false);
  for (double rate : options.arrival_rates) {
    for (size_t i = 0; i < curves.size(); ++i) {
      if (saturated[i]) continue;
      ORCA_ASSIGN_OR_RETURN(saturated[i], RunOnFreshStack(options, stack, {rate}, curves[i]));
    }
  }
  return curves;
}

absl::StatusOr<std::string> WriteSweepOutputs(const std::vector<MeasuredCurve>& curves,
                                              const SweepOutputOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat(options.out_dir, ": ", ec.message()));
  const std::string csv = options.out_dir + "/sweep.csv";
  const std::string script = options.out_dir + "/fig10.gp";
  const std::string png = options.out_dir + "/fig10.png";
  ORCA_RETURN_IF_ERROR(WriteStringToFile(csv, SweepToCsv(curves)));
  ORCA_RETURN_IF_ERROR(WriteStringToFile(script, Fig10GnuplotScript(curves, png, options.title)));
  std::string text = absl::StrCat("Fig. 10 points\n\n", FormatSweepPoints(curves),
                                  "\nThroughput at equal median normalized latency\n\n",
                                  FormatEqualLatencyTable(curves, options.target_multiples),
                                  "\nEach configuration at equal median normalized latency\n\n",
                                  FormatPerCurveLatencyTable(curves, options.target_multiples));
  const double peak = PeakRatio(curves, RatioTargets(curves, options.target_multiples));
  if (peak > 0) absl::StrAppend(&text, absl::StrFormat("\npeak ratio: %.2fx\n", peak));
  absl::StrAppend(&text, "\nwrote ", csv, ", ", script);
  if (!options.gnuplot.empty()) {
    const absl::Status plotted = RunGnuplot(options.gnuplot, script);
    absl::StrAppend(&text, plotted.ok() ? absl::StrCat(", ", png) : absl::StrCat(" (no PNG: ", plotted.message(), ")"));
  }
  absl::StrAppend(&text, "\n");
  return text;
}

}  // namespace orca::loadgen
