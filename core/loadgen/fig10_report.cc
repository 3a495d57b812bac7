#include "core/loadgen/fig10_report.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/common/subprocess.h"

extern char** environ;

namespace orca::loadgen {
namespace {

using sched::PolicyKind;

std::string Ms(double seconds) { return absl::StrFormat("%.2f", seconds * 1e3); }

/// Escapes a string for a single-quoted gnuplot literal.
std::string GnuplotQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

absl::StatusOr<std::vector<SweepCurveSpec>> ParseCurveSpecs(const std::string& text) {
  std::vector<SweepCurveSpec> specs;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    const std::vector<std::string> parts = absl::StrSplit(entry, ':');
    const auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("configuration '", std::string(entry), "': ", why,
                                                     " (POLICY:MAX_BS[:chunk=N][:prefix][:mbs=N], POLICY orca, "
                                                     "paged, request-level or ft, MAX_BS >= 1; or llama-server:NP)"));
    };
    std::optional<PolicyKind> policy;
    int32_t max_bs = 0;
    if (!parts.empty() && parts[0] == "llama-server") {
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &max_bs) || max_bs < 1) {
        return bad("llama-server takes its parallel slots and nothing else: llama-server:NP, NP >= 1");
      }
      SweepCurveSpec spec;
      spec.server = "llama-server";
      spec.policy = PolicyKind::kRequestLevel;
      spec.max_bs = max_bs;
      spec.label = absl::StrCat("llama-server(np=", max_bs, ")");
      specs.push_back(std::move(spec));
      continue;
    }
    const bool ft = !parts.empty() && parts[0] == "ft";
    if (parts.size() >= 2) policy = ft ? PolicyKind::kRequestLevel : sched::ParsePolicyKind(parts[0]);
    if (!policy.has_value() || !absl::SimpleAtoi(parts[1], &max_bs) || max_bs < 1) return bad("bad policy or max_bs");
    SweepCurveSpec spec;
    spec.policy = *policy;
    spec.max_bs = max_bs;
    spec.faster_transformer = ft;
    spec.label =
        ft ? absl::StrCat("ft(max_bs=", max_bs) : absl::StrCat(sched::PolicyKindName(*policy), "(max_bs=", max_bs);
    for (size_t i = 2; i < parts.size(); ++i) {
      int32_t chunk = 0;
      int32_t mbs = 0;
      double slowdown = 0;
      int32_t cap = 0;
      if (absl::StartsWith(parts[i], "mbs=") && absl::SimpleAtoi(parts[i].substr(4), &mbs) && mbs >= 1 &&
          spec.policy == PolicyKind::kRequestLevel) {
        spec.microbatches = mbs;
        absl::StrAppend(&spec.label, ",mbs=", mbs);
      } else if (parts[i] == "prefix") {
        spec.prefix_caching = true;
        absl::StrAppend(&spec.label, ",prefix");
      } else if (absl::StartsWith(parts[i], "chunk=") && absl::SimpleAtoi(parts[i].substr(6), &chunk) &&
                 chunk >= max_bs) {
        spec.max_num_batched_tokens = chunk;
        absl::StrAppend(&spec.label, ",chunk=", chunk);
      } else if (absl::StartsWith(parts[i], "slowdown=") && absl::SimpleAtod(parts[i].substr(9), &slowdown) &&
                 slowdown > 1 && slowdown <= 1000) {
        spec.max_prefill_slowdown = slowdown;
        absl::StrAppend(&spec.label, ",slowdown=", slowdown);
      } else if (absl::StartsWith(parts[i], "cap=") && absl::SimpleAtoi(parts[i].substr(4), &cap) && cap >= 1) {
        spec.long_prefill_token_threshold = cap;
        absl::StrAppend(&spec.label, ",cap=", cap);
      } else {
        return bad(absl::StrCat(
            "unknown option '", parts[i],
            "' (chunk=N with N >= MAX_BS, slowdown=R with 1 < R <= 1000, cap=T with T >= 1, prefix, or mbs=N >= 1 for "
            "request-level and ft)"));
      }
    }
    if (spec.policy == PolicyKind::kRequestLevel &&
        (spec.max_num_batched_tokens > 0 || spec.max_prefill_slowdown > 0 || spec.long_prefill_token_threshold > 0)) {
      return bad("the request-level baseline has no chunked prefill");
    }
    if (spec.faster_transformer && spec.prefix_caching) return bad("ft pads prompts: no prefix caching");
    absl::StrAppend(&spec.label, ")");
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return absl::InvalidArgumentError("no configuration given");
  return specs;
}

loadgen::SweepCurve ToSimCurve(const MeasuredCurve& curve) {
  loadgen::SweepCurve out;
  out.config.label = curve.spec.label;
  // Iteration-level (orca and paged) against the request-level baseline.
  out.config.scheduler.policy =
      curve.spec.policy == PolicyKind::kRequestLevel ? PolicyKind::kRequestLevel : PolicyKind::kOrca;
  out.config.scheduler.max_bs = curve.spec.max_bs;
  out.config.scheduler.max_num_batched_tokens = curve.spec.max_num_batched_tokens;
  out.config.scheduler.max_prefill_slowdown = curve.spec.max_prefill_slowdown;
  out.config.scheduler.enable_prefix_caching = curve.spec.prefix_caching;
  out.config.scheduler.faster_transformer = curve.spec.faster_transformer;
  out.config.scheduler.num_microbatches = curve.spec.microbatches;
  for (const MeasuredPoint& p : curve.points) {
    loadgen::SweepPoint& q = out.points.emplace_back();
    q.arrival_rate = p.arrival_rate;
    q.throughput_rps = p.summary.throughput_rps;
    q.median_normalized_latency = p.summary.normalized_latency_s.p50;
    q.p99_normalized_latency = p.summary.normalized_latency_s.p99;
  }
  return out;
}

sched::SchedulerOptions ApplyCurveSpec(const SweepCurveSpec& spec, sched::SchedulerOptions base) {
  base.policy = spec.policy;
  base.max_bs = spec.max_bs;
  base.max_num_batched_tokens = spec.max_num_batched_tokens;
  base.max_prefill_slowdown = spec.max_prefill_slowdown;
  base.long_prefill_token_threshold = spec.long_prefill_token_threshold;
  base.enable_prefix_caching = spec.prefix_caching;
  base.faster_transformer = spec.faster_transformer;
  base.num_microbatches = spec.microbatches;
  return base;
}

std::vector<MeasuredCurve> FromSimCurves(const std::vector<loadgen::SweepCurve>& curves,
                                         const std::vector<SweepCurveSpec>& specs, int64_t requests_per_point) {
  std::vector<MeasuredCurve> out;
  for (size_t i = 0; i < curves.size() && i < specs.size(); ++i) {
    MeasuredCurve& m = out.emplace_back();
    m.spec = specs[i];
    for (const loadgen::SweepPoint& p : curves[i].points) {
      MeasuredPoint& q = m.points.emplace_back();
      q.arrival_rate = p.arrival_rate;
      q.summary.throughput_rps = p.throughput_rps;
      q.summary.num_requests = requests_per_point;
      q.summary.num_completed = requests_per_point;
      q.summary.normalized_latency_s.p50 = p.median_normalized_latency;
      q.summary.normalized_latency_s.p99 = p.p99_normalized_latency;
    }
  }
  return out;
}

namespace {

std::vector<loadgen::SweepCurve> ToSimCurves(const std::vector<MeasuredCurve>& curves) {
  std::vector<loadgen::SweepCurve> out;
  out.reserve(curves.size());
  for (const MeasuredCurve& c : curves) out.push_back(ToSimCurve(c));
  return out;
}

}  // namespace

std::vector<double> RatioTargets(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples) {
  const std::optional<double> floor = loadgen::MinMedianLatency(ToSimCurves(curves), PolicyKind::kRequestLevel);
  std::vector<double> targets;
  if (!floor.has_value() || *floor <= 0) return targets;
  for (double m : multiples) targets.push_back(m * *floor);
  return targets;
}

double PeakRatio(const std::vector<MeasuredCurve>& curves, const std::vector<double>& targets) {
  const std::vector<loadgen::SweepCurve> sim = ToSimCurves(curves);
  double peak = 0;
  for (double target : targets) {
    const std::optional<double> orca = loadgen::BestThroughputAtLatency(sim, PolicyKind::kOrca, target);
    const std::optional<double> base = loadgen::BestThroughputAtLatency(sim, PolicyKind::kRequestLevel, target);
    if (orca.has_value() && base.has_value() && *base > 0) peak = std::max(peak, *orca / *base);
  }
  return peak;
}

std::string SweepToCsv(const std::vector<MeasuredCurve>& curves) {
  std::string out =
      "label,policy,max_bs,chunk,prefix,arrival_rate,throughput_rps,output_tokens_per_s,completed,failed,"
      "unfinished,norm_latency_p50_s,norm_latency_p99_s,ttft_p50_s,ttft_p99_s,itl_p50_s,"
      "itl_p99_s,e2e_p50_s,kv_usage_mean,kv_usage_max,preemptions,prefix_hit_rate\n";
  for (const MeasuredCurve& c : curves) {
    for (const MeasuredPoint& p : c.points) {
      const BenchSummary& s = p.summary;
      const ServerSample& v = p.server;
      absl::StrAppend(
          &out,
          absl::StrFormat("\"%s\",%s,%d,%d,%d,%g,%.6f,%.3f,%d,%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,", c.spec.label,
                          c.spec.server.empty() ? sched::PolicyKindName(c.spec.policy) : c.spec.server, c.spec.max_bs,
                          c.spec.max_num_batched_tokens, c.spec.prefix_caching ? 1 : 0, p.arrival_rate,
                          s.throughput_rps, s.output_tokens_per_s, s.num_completed, s.num_failed,
                          s.num_unfinished + s.num_not_sent, s.normalized_latency_s.p50, s.normalized_latency_s.p99,
                          s.ttft_s.p50, s.ttft_s.p99, s.itl_s.p50, s.itl_s.p99, s.e2e_s.p50),
          v.valid ? absl::StrFormat("%.4f,%.4f,%.0f,%.4f\n", v.kv_usage_mean, v.kv_usage_max, v.preemptions,
                                    v.prefix_queries > 0 ? v.prefix_hits / v.prefix_queries : 0.0)
                  : ",,,\n");
    }
  }
  return out;
}

std::string FormatSweepPoints(const std::vector<MeasuredCurve>& curves) {
  std::string out = absl::StrFormat("%-36s %7s %10s %9s %10s %10s %9s %9s %8s %8s %9s %7s %6s\n", "config", "rate",
                                    "throughput", "done/all", "p50 norm", "p99 norm", "TTFT p50", "TTFT p99", "ITL p50",
                                    "ITL p99", "KV mean/max", "preempt", "hits");
  absl::StrAppend(
      &out, absl::StrFormat("%-36s %7s %10s %9s %10s %10s %9s %9s %8s %8s %9s %7s %6s\n", "", "(req/s)", "(req/s)", "",
                            "(ms/tok)", "(ms/tok)", "(ms)", "(ms)", "(ms)", "(ms)", "(%)", "", "(%)"));
  for (const MeasuredCurve& c : curves) {
    for (const MeasuredPoint& p : c.points) {
      const BenchSummary& s = p.summary;
      const ServerSample& v = p.server;
      absl::StrAppend(
          &out,
          absl::StrFormat(
              "%-36s %7.3g %10.3f %9s %10s %10s %9s %9s %8s %8s %9s %7s %6s\n", c.spec.label, p.arrival_rate,
              s.throughput_rps, absl::StrCat(s.num_completed, "/", s.num_requests), Ms(s.normalized_latency_s.p50),
              Ms(s.normalized_latency_s.p99), Ms(s.ttft_s.p50), Ms(s.ttft_s.p99), Ms(s.itl_s.p50), Ms(s.itl_s.p99),
              v.valid ? absl::StrFormat("%.0f/%.0f", 100 * v.kv_usage_mean, 100 * v.kv_usage_max) : "-",
              v.valid ? absl::StrFormat("%.0f", v.preemptions) : "-",
              v.valid && v.prefix_queries > 0 ? absl::StrFormat("%.0f", 100 * v.prefix_hits / v.prefix_queries) : "-"));
    }
  }
  return out;
}

std::string FormatEqualLatencyTable(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples) {
  const std::vector<double> targets = RatioTargets(curves, multiples);
  if (targets.empty()) return "no request-level baseline point: no ratio\n";
  // The baseline: the request-level curves, and llama-server's when the sweep has some.
  std::string baseline = "request-level";
  for (const MeasuredCurve& c : curves) {
    if (!c.spec.server.empty() && !absl::StrContains(baseline, c.spec.server)) {
      absl::StrAppend(&baseline, " and ", c.spec.server);
    }
  }
  std::string out = absl::StrFormat(
      "baseline floor (lowest median normalized latency of %s): %s ms/token\n"
      "targets: ",
      baseline, Ms(targets.front() / multiples.front()));
  for (size_t i = 0; i < multiples.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", absl::StrFormat("%gx", multiples[i]));
  }
  absl::StrAppend(&out, " the floor\n\n", loadgen::FormatRatioTable(ToSimCurves(curves), targets));
  return out;
}

std::string FormatPerCurveLatencyTable(const std::vector<MeasuredCurve>& curves, const std::vector<double>& multiples) {
  const std::vector<double> targets = RatioTargets(curves, multiples);
  if (targets.empty()) return "no request-level baseline point: no ratio\n";
  const std::vector<SweepCurve> sim = ToSimCurves(curves);
  std::string out = absl::StrFormat("%-36s", "config \\ p50 norm. latency target");
  for (double m : multiples) absl::StrAppend(&out, absl::StrFormat(" %15s", absl::StrFormat("%gx floor", m)));
  absl::StrAppend(&out, "\n");
  for (size_t i = 0; i < curves.size(); ++i) {
    absl::StrAppend(&out, absl::StrFormat("%-36s", curves[i].spec.label));
    for (double target : targets) {
      const std::optional<double> mine = ThroughputAtLatency(sim[i], target);
      const std::optional<double> base = BestThroughputAtLatency(sim, PolicyKind::kRequestLevel, target);
      std::string cell = "-";
      if (mine.has_value()) {
        cell = absl::StrFormat("%.2f", *mine);
        if (base.has_value() && *base > 0) absl::StrAppend(&cell, absl::StrFormat(" (%.2fx)", *mine / *base));
      }
      absl::StrAppend(&out, absl::StrFormat(" %15s", cell));
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "(req/s at the target; in parentheses: / the best baseline curve's)\n");
  return out;
}

std::string Fig10GnuplotScript(const std::vector<MeasuredCurve>& curves, const std::string& png_path,
                               const std::string& title) {
  std::string script = absl::StrCat(
      "# Fig. 10 of the ORCA paper, measured: median normalized latency vs throughput.\n"
      "set terminal pngcairo size 1100,750 font 'DejaVu Sans,11'\n"
      "set output ",
      GnuplotQuote(png_path), "\n", "set title ", GnuplotQuote(title), " noenhanced\n",
      "set xlabel 'Throughput (req/s)'\n"
      "set ylabel 'Median normalized latency (ms/token)'\n"
      "set logscale y\n"
      "set grid xtics ytics mytics\n"
      "set key top left noenhanced box opaque\n"
      "set xrange [0:*]\n");
  std::string plot = "plot ";
  int orca_index = 0, base_index = 0;
  for (size_t i = 0; i < curves.size(); ++i) {
    const MeasuredCurve& c = curves[i];
    absl::StrAppend(&script, "$C", i, " << EOD\n");
    for (const MeasuredPoint& p : c.points) {
      if (p.summary.num_completed == 0) continue;
      absl::StrAppend(
          &script, absl::StrFormat("%.6f %.6f\n", p.summary.throughput_rps, p.summary.normalized_latency_s.p50 * 1e3));
    }
    absl::StrAppend(&script, "EOD\n");
    const bool orca = c.spec.policy != PolicyKind::kRequestLevel;
    // Iteration-level (orca, paged) solid in warm colors, the baseline dashed in cold ones.
    static constexpr const char* kOrcaColors[] = {"#c0392b", "#e67e22", "#8e44ad", "#d35400",
                                                  "#b7950b", "#943126", "#6c3483", "#ca6f1e"};
    static constexpr const char* kBaseColors[] = {"#2471a3", "#17a589", "#566573", "#1f618d"};
    const char* color = orca ? kOrcaColors[orca_index++ % 8] : kBaseColors[base_index++ % 4];
    absl::StrAppend(&plot, i ? ", \\\n     " : "", "$C", i, " using 1:2 with linespoints lw 2 ",
                    orca ? "dt 1 pt 7" : "dt 2 pt 5", " lc rgb '", color, "' title ", GnuplotQuote(c.spec.label));
  }
  absl::StrAppend(&script, plot, "\n");
  return script;
}

absl::Status RunGnuplot(const std::string& gnuplot, const std::string& script_path) {
  absl::Status status = RunToCompletion({gnuplot, script_path});
  if (absl::IsNotFound(status)) {
    return absl::FailedPreconditionError(absl::StrCat(status.message(), "; install gnuplot-nox or pass --gnuplot"));
  }
  return status;
}

}  // namespace orca::loadgen
