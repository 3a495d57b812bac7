#include "core/loadgen/bench_run.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"
#include "core/loadgen/http_client.h"
#include "nlohmann/json.hpp"

namespace orca::loadgen {
namespace {

using json = nlohmann::json;

std::string Dump(const json& value, int indent = -1) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90}, {"p99", d.p99}, {"max", d.max}};
}

json SummaryJson(const BenchSummary& s) {
  return {{"num_requests", s.num_requests},
          {"num_completed", s.num_completed},
          {"num_failed", s.num_failed},
          {"num_unfinished", s.num_unfinished},
          {"num_not_sent", s.num_not_sent},
          {"makespan_s", s.makespan_s},
          {"throughput_rps", s.throughput_rps},
          {"output_tokens_per_s", s.output_tokens_per_s},
          {"total_tokens_per_s", s.total_tokens_per_s},
          {"total_prompt_tokens", s.total_prompt_tokens},
          {"total_output_tokens", s.total_output_tokens},
          {"max_send_lag_s", s.max_send_lag_s},
          {"ttft_s", DistributionJson(s.ttft_s)},
          {"itl_s", DistributionJson(s.itl_s)},
          {"e2e_s", DistributionJson(s.e2e_s)},
          {"normalized_latency_s_per_token", DistributionJson(s.normalized_latency_s)}};
}

json RecordJson(const RequestRecord& r) {
  return {{"index", r.index},
          {"scheduled_s", r.scheduled_s},
          {"sent_s", r.sent_s},
          {"prompt_tokens", r.prompt_tokens},
          {"max_tokens", r.max_new_tokens},
          {"outcome", RequestOutcomeName(r.outcome)},
          {"http_status", r.http_status},
          {"error", r.error},
          {"finish_reason", r.finish_reason},
          {"ttft_s", r.ttft_s},
          {"e2e_s", r.e2e_s},
          {"normalized_latency_s", r.NormalizedLatencySeconds()},
          {"output_tokens", r.output_tokens},
          {"counted_tokens", r.counted_tokens},
          {"num_chunks", r.num_chunks},
          {"usage_reported", r.usage_reported},
          {"itl_s", r.itl_s}};
}

/// A CSV cell: quoted when it holds a comma, quote or line break.
std::string CsvCell(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

std::string Ms(double seconds) { return absl::StrFormat("%.2f", seconds * 1e3); }

}  // namespace

const char* RequestOutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kOk:
      return "ok";
    case RequestOutcome::kFailed:
      return "failed";
    case RequestOutcome::kUnfinished:
      return "unfinished";
    case RequestOutcome::kNotSent:
      return "not_sent";
  }
  return "unknown";
}

absl::StatusOr<std::string> DiscoverModel(const std::string& base_url, const std::string& api_key) {
  const std::string url = JoinUrl(base_url, "/v1/models");
  ORCA_ASSIGN_OR_RETURN(HttpResponse response, HttpGet(url, absl::Seconds(10), api_key));
  if (response.status != 200) {
    return absl::FailedPreconditionError(absl::StrCat("GET ", url, " answered ", response.status, "; pass --model"));
  }
  const json models = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (models.is_object()) {
    auto data = models.find("data");
    if (data != models.end() && data->is_array() && !data->empty() && data->front().is_object()) {
      auto id = data->front().find("id");
      if (id != data->front().end() && id->is_string()) return id->get<std::string>();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("GET ", url, " lists no model; pass --model"));
}

absl::StatusOr<BenchRunReport> RunBenchmark(const BenchRunOptions& options, const std::string& label) {
  const bool closed_loop = options.trace.chat_closed_loop;
  if (closed_loop && ParseTraceKind(options.trace.trace) != TraceKind::kChat) {
    return absl::InvalidArgumentError("chat_closed_loop needs the chat trace");
  }
  std::vector<TraceRequest> trace;
  std::vector<ChatConversation> conversations;
  int64_t num_requests = 0;
  if (closed_loop) {
    ORCA_ASSIGN_OR_RETURN(conversations, MakeChatConversations(options.trace));
    for (const ChatConversation& c : conversations) num_requests += static_cast<int64_t>(c.turns.size());
  } else {
    ORCA_ASSIGN_OR_RETURN(trace, MakeLoadTrace(options.trace));
    num_requests = static_cast<int64_t>(trace.size());
  }
  LoadDriverOptions driver_options = options.driver;
  if (driver_options.model.empty()) {
    ORCA_ASSIGN_OR_RETURN(driver_options.model, DiscoverModel(driver_options.base_url, driver_options.api_key));
  }
  PromptSourceOptions prompt_options = options.prompts;
  prompt_options.base_url = driver_options.base_url;
  prompt_options.model = driver_options.model;
  prompt_options.api_key = driver_options.api_key;
  ORCA_ASSIGN_OR_RETURN(PromptBuilder prompts, ResolvePromptBuilder(prompt_options));

  BenchRunReport report;
  report.label = label;
  report.prompt_source = prompts.description();
  const bool synthetic = ParseTraceKind(options.trace.trace) != TraceKind::kFile;
  report.config = {
      {"url", driver_options.base_url},
      {"model", driver_options.model},
      {"trace", options.trace.trace},
      {"arrival_rate", synthetic ? absl::StrCat(options.trace.arrival_rate) : "file"},
      {"num_requests", absl::StrCat(num_requests)},
      {"chat_closed_loop", closed_loop ? "true" : "false"},
      {"seed", absl::StrCat(options.trace.seed)},
      {"max_duration_s", absl::StrCat(absl::ToDoubleSeconds(driver_options.max_duration))},
      {"ignore_eos", driver_options.ignore_eos ? "true" : "false"},
      {"include_usage", driver_options.include_usage ? "true" : "false"},
      {"logprobs", driver_options.logprobs ? "true" : "false"},
      {"max_concurrency", absl::StrCat(driver_options.max_concurrency)},
  };
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<LoadDriver> driver, LoadDriver::Create(driver_options, std::move(prompts)));
  if (closed_loop) {
    report.config.emplace_back("chat_think_time_s", absl::StrCat(options.trace.chat_think_time_s));
    ORCA_ASSIGN_OR_RETURN(report.run,
                          driver->RunClosedLoop(conversations, absl::Seconds(options.trace.chat_think_time_s)));
  } else {
    ORCA_ASSIGN_OR_RETURN(report.run, driver->Run(trace));
  }
  report.summary = SummarizeRun(report.run.records, report.run.run_duration_s);
  return report;
}

std::string RecordsToCsv(const std::vector<RequestRecord>& records) {
  std::string out =
      "index,scheduled_s,sent_s,prompt_tokens,max_tokens,outcome,http_status,finish_reason,"
      "output_tokens,usage_reported,num_chunks,ttft_s,e2e_s,normalized_latency_s,itl_p50_s,"
      "itl_max_s,error\n";
  for (const RequestRecord& r : records) {
    const Distribution itl = Summarize(r.itl_s);
    absl::StrAppend(&out, absl::StrFormat("%d,%.6f,%.6f,%d,%d,%s,%d,%s,%d,%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%s\n", r.index,
                                          r.scheduled_s, r.sent_s, r.prompt_tokens, r.max_new_tokens,
                                          RequestOutcomeName(r.outcome), r.http_status, CsvCell(r.finish_reason),
                                          r.output_tokens, r.usage_reported ? 1 : 0, r.num_chunks, r.ttft_s, r.e2e_s,
                                          r.NormalizedLatencySeconds(), itl.p50, itl.max, CsvCell(r.error)));
  }
  return out;
}

std::string ReportToJson(const BenchRunReport& report) {
  json config = json::object();
  for (const auto& [key, value] : report.config) config[key] = value;
  json requests = json::array();
  for (const RequestRecord& r : report.run.records) requests.push_back(RecordJson(r));
  const json out = {{"label", report.label},
                    {"config", std::move(config)},
                    {"prompt_source", report.prompt_source},
                    {"start_time", absl::FormatTime(report.run.start_time)},
                    {"run_duration_s", report.run.run_duration_s},
                    {"summary", SummaryJson(report.summary)},
                    {"requests", std::move(requests)}};
  return Dump(out, 2) + "\n";
}

std::string FormatReport(const BenchRunReport& report) {
  const BenchSummary& s = report.summary;
  std::string out;
  for (const auto& [key, value] : report.config) {
    absl::StrAppend(&out, absl::StrFormat("%-16s %s\n", key, value));
  }
  absl::StrAppend(&out, absl::StrFormat("%-16s %s\n", "prompts", report.prompt_source));
  absl::StrAppend(
      &out, absl::StrFormat("\nrequests: %d completed, %d failed, %d cut off, %d not sent of %d\n", s.num_completed,
                            s.num_failed, s.num_unfinished, s.num_not_sent, s.num_requests));
  absl::StrAppend(&out, absl::StrFormat("throughput: %.3f req/s, %.1f output tokens/s, %.1f total tokens/s "
                                        "over %.2f s (max send lag %.1f ms)\n\n",
                                        s.throughput_rps, s.output_tokens_per_s, s.total_tokens_per_s, s.makespan_s,
                                        s.max_send_lag_s * 1e3));
  absl::StrAppend(
      &out, absl::StrFormat("%-28s %10s %10s %10s %10s %10s\n", "latency (ms)", "mean", "p50", "p90", "p99", "max"));
  const std::pair<const char*, const Distribution*> rows[] = {{"TTFT", &s.ttft_s},
                                                              {"ITL", &s.itl_s},
                                                              {"end-to-end", &s.e2e_s},
                                                              {"normalized (ms/token)", &s.normalized_latency_s}};
  for (const auto& [name, d] : rows) {
    absl::StrAppend(&out, absl::StrFormat("%-28s %10s %10s %10s %10s %10s\n", name, Ms(d->mean), Ms(d->p50), Ms(d->p90),
                                          Ms(d->p99), Ms(d->max)));
  }
  return out;
}

absl::Status WriteReport(const BenchRunReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat(dir, ": ", ec.message()));
  ORCA_RETURN_IF_ERROR(WriteStringToFile(dir + "/requests.csv", RecordsToCsv(report.run.records)));
  return WriteStringToFile(dir + "/summary.json", ReportToJson(report));
}

}  // namespace orca::loadgen
