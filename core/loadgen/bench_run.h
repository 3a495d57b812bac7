#pragma once
/// One `orca bench` run end to end: trace → prompts → load → summary → CSV/JSON files.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/loadgen/bench_summary.h"
#include "core/loadgen/load_driver.h"
#include "core/loadgen/load_trace.h"
#include "core/loadgen/prompt_builder.h"
#include "core/loadgen/request_record.h"

namespace orca::loadgen {

struct BenchRunOptions {
  LoadTraceOptions trace;
  /// driver.model empty: the first model the server lists (GET /v1/models).
  LoadDriverOptions driver;
  /// base_url, model and api_key are taken from `driver`.
  PromptSourceOptions prompts;
};

/// Everything a run produced, ready to print or save.
struct BenchRunReport {
  std::string label;
  /// What ran, as key/value pairs (url, model, trace, rate, ...), in print order.
  std::vector<std::pair<std::string, std::string>> config;
  std::string prompt_source;
  BenchSummary summary;
  LoadRunResult run;
};

/// The first model id of GET {base_url}/v1/models.
absl::StatusOr<std::string> DiscoverModel(const std::string& base_url, const std::string& api_key);

/// Runs one benchmark. Errors are setup failures (bad trace, server unreachable, no model);
/// request failures are counted in the report.
absl::StatusOr<BenchRunReport> RunBenchmark(const BenchRunOptions& options, const std::string& label = "");

/// Per-request rows: index, times, lengths, outcome, TTFT, e2e, normalized latency, ITL
/// p50/max and the error, one header line first.
std::string RecordsToCsv(const std::vector<RequestRecord>& records);

/// {"label", "config", "prompt_source", "summary": {...}, "requests": [...]}.
std::string ReportToJson(const BenchRunReport& report);

/// A human-readable block: counts, throughput, and the latency table (ms).
std::string FormatReport(const BenchRunReport& report);

/// Writes `requests.csv` and `summary.json` into `dir` (created if missing).
absl::Status WriteReport(const BenchRunReport& report, const std::string& dir);

}  // namespace orca::loadgen
