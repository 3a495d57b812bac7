#pragma once
// Finds the metric names and label names a PromQL expression refers to, for
// checking Grafana dashboards against the metric catalog. Not a full PromQL
// parser: it tokenizes well enough to tell metric names from functions,
// keywords, label names, strings, durations, numbers and Grafana variables.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace orca::metrics::testing {

struct MetricReference {
  std::string name;                         // as written, e.g. "orca:batch_size_bucket"
  std::vector<std::string> matcher_labels;  // label names inside {...}
};

struct PromqlReferences {
  std::vector<MetricReference> metrics;
  // Labels named in by(...), without(...), on(...), ignoring(...),
  // group_left(...), group_right(...).
  std::vector<std::string> grouping_labels;
};

// InvalidArgument for what it cannot scan (unbalanced brackets or quotes, a
// selector without a metric name).
absl::StatusOr<PromqlReferences> ScanPromql(const std::string& expr);

}  // namespace orca::metrics::testing
