// Every metric and label the Grafana dashboards in deploy/grafana/ query must
// exist in the metric catalog (core/metrics/orca_metrics.h), and every
// catalog family must be shown somewhere.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/metrics/orca_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/promql_scanner.h"

namespace orca::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::PromqlReferences;
using testing::ScanPromql;

std::vector<std::string> Names(const PromqlReferences& refs) {
  std::vector<std::string> names;
  for (const auto& metric : refs.metrics) names.push_back(metric.name);
  return names;
}

TEST(PromqlScannerTest, FindsMetricsInsideFunctionsAndAggregations) {
  absl::StatusOr<PromqlReferences> refs = ScanPromql(
      "histogram_quantile(0.99, sum by (le, model_name) "
      "(rate(orca:time_to_first_token_seconds_bucket{model_name=~\"$model_name\"}"
      "[$__rate_interval])))");
  ASSERT_TRUE(refs.ok()) << refs.status();
  EXPECT_THAT(Names(*refs), ElementsAre("orca:time_to_first_token_seconds_bucket"));
  EXPECT_THAT(refs->metrics[0].matcher_labels, ElementsAre("model_name"));
  EXPECT_THAT(refs->grouping_labels, ElementsAre("le", "model_name"));
}

TEST(PromqlScannerTest, SkipsKeywordsNumbersStringsAndVariables) {
  absl::StatusOr<PromqlReferences> refs = ScanPromql(
      "sum(rate(a_total{x=\"by(y)\", z!~'q{}'}[5m] offset 1h)) / on(pod) group_left(node) "
      "b * 1e-3 > bool 0.5 and c unless ${var} or sum without (w) (d[$__range:1m])");
  ASSERT_TRUE(refs.ok()) << refs.status();
  EXPECT_THAT(Names(*refs), ElementsAre("a_total", "b", "c", "d"));
  EXPECT_THAT(refs->metrics[0].matcher_labels, ElementsAre("x", "z"));
  EXPECT_THAT(refs->grouping_labels, ElementsAre("pod", "node", "w"));
}

TEST(PromqlScannerTest, RejectsWhatItCannotScan) {
  EXPECT_FALSE(ScanPromql("{__name__=~\"orca:.*\"}").ok());
  EXPECT_FALSE(ScanPromql("rate(x{a=\"b}[5m])").ok());
  EXPECT_FALSE(ScanPromql("rate(x[5m)").ok());
  EXPECT_FALSE(ScanPromql("x{a=b}").ok());
}

std::filesystem::path SourceDir() {
  const char* dir = std::getenv("ORCA_SOURCE_DIR");
  return dir != nullptr ? dir : ORCA_SOURCE_DIR_DEFAULT;
}

struct Query {
  std::string where;  // "orca-overview.json panel 7 'Title' A"
  std::string expr;
};

// obj[key] when obj is an object holding an array there, else an empty array.
const nlohmann::json& ArrayMember(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() ? *it : kEmpty;
}

// Every PromQL text in a dashboard: panel targets (also inside rows) and
// label_values(<selector>, <label>) variable queries.
void CollectQueries(const std::string& file, const nlohmann::json& dashboard, std::vector<Query>* queries) {
  std::vector<const nlohmann::json*> panels;
  for (const auto& panel : ArrayMember(dashboard, "panels")) {
    panels.push_back(&panel);
    for (const auto& inner : ArrayMember(panel, "panels")) panels.push_back(&inner);
  }
  for (const nlohmann::json* panel : panels) {
    for (const auto& target : ArrayMember(*panel, "targets")) {
      if (!target.is_object() || !target.contains("expr") || !target["expr"].is_string()) continue;
      queries->push_back({file + " panel " + std::to_string(panel->value("id", -1)) + " '" + panel->value("title", "") +
                              "' " + target.value("refId", ""),
                          target["expr"].get<std::string>()});
    }
  }
  const nlohmann::json& templating =
      dashboard.is_object() && dashboard.contains("templating") ? dashboard["templating"] : nlohmann::json::object();
  for (const auto& variable : ArrayMember(templating, "list")) {
    if (!variable.is_object() || variable.value("type", "") != "query") continue;
    const nlohmann::json query = variable.value("query", nlohmann::json());
    const std::string text = query.is_string()   ? query.get<std::string>()
                             : query.is_object() ? query.value("query", "")
                                                 : "";
    // label_values(selector, label) -> "selector" (and the label must exist on it).
    static const std::regex kLabelValues(R"(^\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*$)");
    std::smatch match;
    std::string expr = text;
    if (std::regex_match(text, match, kLabelValues)) {
      expr = "sum by (" + match[2].str() + ") (" + match[1].str() + ")";
    }
    queries->push_back({file + " variable '" + variable.value("name", "") + "'", expr});
  }
}

// The catalog family a series name belongs to, and whether it is a
// histogram's _bucket series; nullptr if none.
const MetricSpec* FamilyOf(const std::string& series, bool* is_bucket) {
  *is_bucket = false;
  if (const MetricSpec* spec = FindMetricSpec(series)) {
    return spec->type == MetricType::kHistogram ? nullptr : spec;  // histograms have no bare series
  }
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (!series.ends_with(suffix)) continue;
    const MetricSpec* spec = FindMetricSpec(series.substr(0, series.size() - std::strlen(suffix)));
    if (spec != nullptr && spec->type == MetricType::kHistogram) {
      *is_bucket = std::string(suffix) == "_bucket";
      return spec;
    }
  }
  return nullptr;
}

// Labels Prometheus puts on every series it scrapes through an OrcaDeployment's ServiceMonitor
// (namespace and pod from the Prometheus Operator, orca_deployment and replica relabelled from
// the pods' serving.orca.dev/* labels: services/operator/renderer.cc). tests/deploy checks that
// the rendered ServiceMonitor produces them.
constexpr const char* kScrapeTargetLabels[] = {"namespace", "pod", "orca_deployment", "replica"};

// Problems with one query: unknown metrics, labels no referenced metric has.
std::vector<std::string> CheckQuery(const Query& query, std::set<std::string>* used_families) {
  std::vector<std::string> problems;
  absl::StatusOr<PromqlReferences> refs = ScanPromql(query.expr);
  if (!refs.ok()) return {std::string(refs.status().message())};
  if (refs->metrics.empty()) problems.push_back("references no metric");
  std::set<std::string> available_labels;
  for (const auto& metric : refs->metrics) {
    bool is_bucket = false;
    const MetricSpec* spec = FamilyOf(metric.name, &is_bucket);
    if (spec == nullptr) {
      problems.push_back("'" + metric.name + "' is not in the metric catalog");
      continue;
    }
    used_families->insert(spec->name);
    std::set<std::string> labels(spec->label_names.begin(), spec->label_names.end());
    labels.insert(std::begin(kScrapeTargetLabels), std::end(kScrapeTargetLabels));
    if (is_bucket) labels.insert("le");
    for (const std::string& label : metric.matcher_labels) {
      if (!labels.contains(label)) {
        problems.push_back("'" + metric.name + "' has no label '" + label + "'");
      }
    }
    available_labels.insert(labels.begin(), labels.end());
  }
  for (const std::string& label : refs->grouping_labels) {
    if (!available_labels.contains(label)) {
      problems.push_back("groups by '" + label + "', which no metric of the query has");
    }
  }
  return problems;
}

class DashboardMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path dir = SourceDir() / "deploy" / "grafana";
    ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      const nlohmann::json dashboard = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(dashboard.is_discarded()) << entry.path() << " is not valid JSON";
      files_.push_back(entry.path().filename().string());
      CollectQueries(files_.back(), dashboard, &queries_);
    }
  }

  std::vector<std::string> files_;
  std::vector<Query> queries_;
};

TEST_F(DashboardMetricsTest, BothDashboardsArePresent) {
  EXPECT_THAT(files_, ::testing::IsSupersetOf({"orca-overview.json", "orca-engine.json"}));
  EXPECT_GT(queries_.size(), 30u);
}

TEST_F(DashboardMetricsTest, EveryQueryUsesOnlyCatalogMetricsAndLabels) {
  std::set<std::string> used;
  for (const Query& query : queries_) {
    for (const std::string& problem : CheckQuery(query, &used)) {
      ADD_FAILURE() << query.where << ": " << problem << "\n  " << query.expr;
    }
  }
}

TEST_F(DashboardMetricsTest, EveryCatalogFamilyIsOnADashboard) {
  std::set<std::string> used;
  for (const Query& query : queries_) CheckQuery(query, &used);
  for (const MetricSpec* spec : kMetricCatalog) {
    EXPECT_TRUE(used.contains(spec->name)) << spec->name << " is on no dashboard";
  }
}

TEST(DashboardCheckTest, CatchesUnknownMetricsAndLabels) {
  std::set<std::string> used;
  EXPECT_THAT(CheckQuery({"t", "rate(vllm:prompt_tokens_total[5m])"}, &used),
              ElementsAre(HasSubstr("'vllm:prompt_tokens_total' is not in the metric catalog")));
  EXPECT_THAT(CheckQuery({"t", "orca:batch_size{model_name=\"m\"}"}, &used),
              ElementsAre(HasSubstr("'orca:batch_size' is not in the metric catalog")));
  EXPECT_THAT(CheckQuery({"t", "orca:batch_size_count{stage=\"0\"}"}, &used),
              ElementsAre(HasSubstr("has no label 'stage'")));
  EXPECT_THAT(CheckQuery({"t", "orca:batch_size_sum{le=\"1\"}"}, &used), ElementsAre(HasSubstr("has no label 'le'")));
  EXPECT_THAT(CheckQuery({"t", "sum by (route) (orca:kv_slots_used)"}, &used),
              ElementsAre(HasSubstr("groups by 'route'")));
  EXPECT_THAT(CheckQuery({"t", "sum by (le) (rate(orca:batch_size_bucket[1m]))"}, &used), ::testing::IsEmpty());
  EXPECT_THAT(CheckQuery({"t", "sum by (replica) (orca:kv_slots_used{namespace=\"a\",orca_deployment=\"b\"})"}, &used),
              ::testing::IsEmpty());
  EXPECT_THAT(CheckQuery({"t", "orca:kv_slots_used{deployment=\"b\"}"}, &used),
              ElementsAre(HasSubstr("has no label 'deployment'")));
  EXPECT_TRUE(used.contains("orca:batch_size"));
}

}  // namespace
}  // namespace orca::metrics
