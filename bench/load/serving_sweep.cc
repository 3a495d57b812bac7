#include "bench/load/serving_sweep.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"

namespace orca::bench {
namespace {

/// Short requests that only warm the stack up; their results are dropped.
absl::Status WarmUp(const ServingSweepOptions& options, const std::string& base_url) {
  if (options.warmup_requests <= 0) return absl::OkStatus();
  BenchRunOptions warm = options.run;
  warm.trace.trace = "homogeneous";
  warm.trace.arrival_rate = 1000;  // all at once
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

absl::StatusOr<MeasuredCurve> RunCurve(const ServingSweepOptions& options,
                                       const SweepCurveSpec& spec, const std::string& base_url) {
  ORCA_RETURN_IF_ERROR(WarmUp(options, base_url));
  MeasuredCurve curve;
  curve.spec = spec;
  for (double rate : options.arrival_rates) {
    BenchRunOptions run = options.run;
    run.trace.arrival_rate = rate;
    run.driver.base_url = base_url;
    run.driver.progress_label = absl::StrFormat("%s @ %g req/s", spec.label, rate);
    ORCA_ASSIGN_OR_RETURN(BenchRunReport report, RunBenchmark(run, spec.label));
    report.config.emplace_back("policy", sched::PolicyKindName(spec.policy));
    report.config.emplace_back("max_bs", absl::StrCat(spec.max_bs));
    if (!options.out_dir.empty()) {
      ORCA_RETURN_IF_ERROR(WriteReport(
          report, absl::StrFormat("%s/%s/rate-%g", options.out_dir, LabelToFileName(spec.label),
                                  rate)));
    }
    const BenchSummary& s = report.summary;
    curve.points.push_back(MeasuredPoint{rate, s});
    std::fprintf(stderr, "  %s @ %g req/s: %.3f req/s, p50 normalized latency %.2f ms/token\n",
                 spec.label.c_str(), rate, s.throughput_rps, s.normalized_latency_s.p50 * 1e3);
    const bool cut_off = s.num_unfinished + s.num_not_sent > 0;
    const bool saturated = options.saturation_latency_s > 0 &&
                           s.normalized_latency_s.p50 > options.saturation_latency_s;
    if (cut_off || saturated || s.num_completed == 0) break;
  }
  return curve;
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

absl::StatusOr<std::vector<MeasuredCurve>> RunServingSweep(const ServingSweepOptions& options,
                                                           ServingStack& stack) {
  if (options.arrival_rates.empty()) return absl::InvalidArgumentError("no arrival rates");
  for (size_t i = 0; i < options.arrival_rates.size(); ++i) {
    if (!(options.arrival_rates[i] > 0) ||
        (i > 0 && options.arrival_rates[i] <= options.arrival_rates[i - 1])) {
      return absl::InvalidArgumentError("arrival rates must be positive and increasing");
    }
  }
  if (options.curves.empty()) return absl::InvalidArgumentError("no configurations");
  std::vector<MeasuredCurve> curves;
  for (const SweepCurveSpec& spec : options.curves) {
    std::fprintf(stderr, "starting the stack for %s\n", spec.label.c_str());
    absl::StatusOr<std::string> base_url = stack.Start(spec);
    if (!base_url.ok()) {
      (void)stack.Stop();
      return Annotate(base_url.status(), spec.label);
    }
    absl::StatusOr<MeasuredCurve> curve = RunCurve(options, spec, *base_url);
    const absl::Status stopped = stack.Stop();
    if (!curve.ok()) return Annotate(curve.status(), spec.label);
    if (!stopped.ok()) return Annotate(stopped, absl::StrCat(spec.label, ": stopping the stack"));
    curves.push_back(*std::move(curve));
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
                                  FormatEqualLatencyTable(curves, options.target_multiples));
  const double peak = PeakRatio(curves, RatioTargets(curves, options.target_multiples));
  if (peak > 0) absl::StrAppend(&text, absl::StrFormat("\npeak ratio: %.2fx\n", peak));
  absl::StrAppend(&text, "\nwrote ", csv, ", ", script);
  if (!options.gnuplot.empty()) {
    const absl::Status plotted = RunGnuplot(options.gnuplot, script);
    absl::StrAppend(&text, plotted.ok() ? absl::StrCat(", ", png)
                                        : absl::StrCat(" (no PNG: ", plotted.message(), ")"));
  }
  absl::StrAppend(&text, "\n");
  return text;
}

}  // namespace orca::bench
