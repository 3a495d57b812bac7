#pragma once
/// The static description of one Prometheus metric family: its type, name,
/// help text, label names and (for histograms) bucket upper bounds.
///
/// Specs are plain constexpr data so that a catalog (see orca_metrics.h) can
/// define every family in a header that services, tests and dashboards share:
///
///   inline constexpr const char* kModelLabel[] = {"model_name"};
///   inline constexpr double kLatencyBuckets[] = {0.1, 0.5, 1.0};
///   inline constexpr MetricSpec kLatency{MetricType::kHistogram,
///       "orca:latency_seconds", "Latency in seconds.", kModelLabel, kLatencyBuckets};

#include <span>

namespace orca::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

/// The `# TYPE` keyword of the text format: "counter", "gauge", "histogram".
const char* MetricTypeName(MetricType type);

struct MetricSpec {
  MetricType type = MetricType::kGauge;
  /// Full family name as exposed, e.g. "orca:prompt_tokens_total". Counters
  /// must end in "_total"; other types must not.
  const char* name = "";
  /// One line of help text; escaped on exposition.
  const char* help = "";
  /// Label names in exposition order; every child sets all of them.
  std::span<const char* const> label_names;
  /// Finite, strictly increasing histogram upper bounds; "+Inf" is implicit.
  /// Must be empty for counters and gauges.
  std::span<const double> buckets;
};

}  // namespace orca::metrics
