#pragma once
/// The operator's metrics on the shared Prometheus registry (core/metrics):
///
///   orca:operator_reconciles_total{result="ok"|"error"}   counter
///   orca:operator_invalid_specs_total                    counter
///   orca:operator_reconcile_duration_seconds              histogram
///   orca:operator_queue_depth                             gauge
///   orca:operator_is_leader                               gauge (1 on the active replica)
///   orca:operator_managed_deployments                     gauge (OrcaDeployments in the cache)
///
/// Thread-safe; every update is a lock-free atomic.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/metrics/registry.h"

namespace orca::k8s {

class OperatorMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<OperatorMetrics>> Create();

  void RecordReconcile(bool ok, absl::Duration duration);
  void RecordInvalidSpec() { invalid_specs_->Increment(); }
  void SetQueueDepth(size_t n) { queue_depth_->Set(static_cast<double>(n)); }
  void SetLeader(bool leader) { is_leader_->Set(leader ? 1.0 : 0.0); }
  void SetManagedDeployments(size_t n) { managed_->Set(static_cast<double>(n)); }

  int64_t reconciles(bool ok) const { return static_cast<int64_t>((ok ? reconciles_ok_ : reconciles_error_)->Value()); }
  int64_t invalid_specs() const { return static_cast<int64_t>(invalid_specs_->Value()); }

  const metrics::Registry& registry() const { return registry_; }
  /// The /metrics page (text format 0.0.4).
  std::string Render() const { return registry_.Serialize(); }

 private:
  OperatorMetrics() = default;

  metrics::Registry registry_;
  metrics::Counter* reconciles_ok_ = nullptr;
  metrics::Counter* reconciles_error_ = nullptr;
  metrics::Counter* invalid_specs_ = nullptr;
  metrics::Histogram* duration_ = nullptr;
  metrics::Gauge* queue_depth_ = nullptr;
  metrics::Gauge* is_leader_ = nullptr;
  metrics::Gauge* managed_ = nullptr;
};

}  // namespace orca::k8s
