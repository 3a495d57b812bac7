#include "core/loadgen/prometheus_text.h"

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/status_macros.h"
#include "core/loadgen/http_client.h"

namespace orca::loadgen {
namespace {

/// End of the series part of `line`: after the closing '}' of the labels (quotes and
/// escapes honoured) or at the first whitespace when there are no labels.
absl::StatusOr<size_t> SeriesEnd(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
  if (i == line.size() || line[i] != '{') return i;
  bool quoted = false;
  for (++i; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '\\') {
      ++i;  // the escaped character
    } else if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && c == '}') {
      return i + 1;
    }
  }
  return absl::InvalidArgumentError("unterminated label set");
}

/// Metric name of a series key (before '{').
std::string_view NameOf(std::string_view series) { return series.substr(0, series.find('{')); }

}  // namespace

absl::StatusOr<MetricSamples> ParsePrometheusText(const std::string& text) {
  MetricSamples samples;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line.front() == '#') continue;
    absl::StatusOr<size_t> end = SeriesEnd(line);
    if (!end.ok()) return Annotate(end.status(), absl::StrCat("metrics line ", line_number));
    const std::string series = line.substr(0, *end);
    std::vector<std::string> rest = absl::StrSplit(line.substr(*end), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    double value = 0;
    if (series.empty() || rest.empty() || !absl::SimpleAtod(rest.front(), &value)) {
      return absl::InvalidArgumentError(absl::StrCat("metrics line ", line_number, " is not 'series value': ", line));
    }
    samples[series] = value;
  }
  return samples;
}

double SumSeries(const MetricSamples& samples, const std::string& name) {
  double total = 0;
  for (const auto& [series, value] : samples) {
    if (NameOf(series) == name) total += value;
  }
  return total;
}

HistogramTotals ReadHistogram(const MetricSamples& samples, const std::string& name, const std::string& label_filter) {
  HistogramTotals totals;
  const std::string sum_name = name + "_sum", count_name = name + "_count";
  for (const auto& [series, value] : samples) {
    if (!label_filter.empty() && series.find(label_filter) == std::string::npos) continue;
    const std::string_view metric = NameOf(series);
    if (metric == sum_name) totals.sum += value;
    if (metric == count_name) totals.count += value;
  }
  return totals;
}

HistogramTotals Delta(const HistogramTotals& after, const HistogramTotals& before) {
  return HistogramTotals{after.sum - before.sum, after.count - before.count};
}

absl::StatusOr<MetricSamples> ScrapeMetrics(const std::string& url) {
  ORCA_ASSIGN_OR_RETURN(const HttpResponse response, HttpGet(url, absl::Seconds(10)));
  if (response.status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", url, " answered ", response.status));
  }
  return ParsePrometheusText(response.body);
}

}  // namespace orca::loadgen
