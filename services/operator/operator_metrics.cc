#include "services/operator/operator_metrics.h"

#include "core/common/status_macros.h"
#include "core/metrics/counter.h"
#include "core/metrics/gauge.h"
#include "core/metrics/histogram.h"
#include "core/metrics/metric_spec.h"

namespace orca::k8s {
namespace {

using metrics::MetricSpec;
using metrics::MetricType;

inline constexpr const char* kResultLabel[] = {"result"};
inline constexpr double kDurationBuckets[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

inline constexpr MetricSpec kReconciles{MetricType::kCounter, "orca:operator_reconciles_total",
                                        "OrcaDeployment reconciles by result (error = retried with backoff).",
                                        kResultLabel};
inline constexpr MetricSpec kInvalidSpecs{MetricType::kCounter, "orca:operator_invalid_specs_total",
                                          "Reconciles that found an invalid spec (reported in status)."};
inline constexpr MetricSpec kDuration{MetricType::kHistogram,
                                      "orca:operator_reconcile_duration_seconds",
                                      "Time one reconcile takes (apply, prune, status).",
                                      {},
                                      kDurationBuckets};
inline constexpr MetricSpec kQueueDepth{MetricType::kGauge, "orca:operator_queue_depth",
                                        "OrcaDeployment keys waiting in the work queue."};
inline constexpr MetricSpec kIsLeader{MetricType::kGauge, "orca:operator_is_leader",
                                      "1 when this replica holds the leader Lease (or runs without election)."};
inline constexpr MetricSpec kManaged{MetricType::kGauge, "orca:operator_managed_deployments",
                                     "OrcaDeployments in the operator's watch cache."};

}  // namespace

absl::StatusOr<std::unique_ptr<OperatorMetrics>> OperatorMetrics::Create() {
  std::unique_ptr<OperatorMetrics> m(new OperatorMetrics());
  ORCA_ASSIGN_OR_RETURN(auto* reconciles, m->registry_.AddCounter(kReconciles));
  m->reconciles_ok_ = &reconciles->WithLabels({{"result", "ok"}});
  m->reconciles_error_ = &reconciles->WithLabels({{"result", "error"}});
  ORCA_ASSIGN_OR_RETURN(auto* invalid, m->registry_.AddCounter(kInvalidSpecs));
  m->invalid_specs_ = &invalid->WithLabels({});
  ORCA_ASSIGN_OR_RETURN(auto* duration, m->registry_.AddHistogram(kDuration));
  m->duration_ = &duration->WithLabels({});
  ORCA_ASSIGN_OR_RETURN(auto* depth, m->registry_.AddGauge(kQueueDepth));
  m->queue_depth_ = &depth->WithLabels({});
  ORCA_ASSIGN_OR_RETURN(auto* leader, m->registry_.AddGauge(kIsLeader));
  m->is_leader_ = &leader->WithLabels({});
  ORCA_ASSIGN_OR_RETURN(auto* managed, m->registry_.AddGauge(kManaged));
  m->managed_ = &managed->WithLabels({});
  return m;
}

void OperatorMetrics::RecordReconcile(bool ok, absl::Duration duration) {
  (ok ? reconciles_ok_ : reconciles_error_)->Increment();
  duration_->Observe(absl::ToDoubleSeconds(duration));
}

}  // namespace orca::k8s
