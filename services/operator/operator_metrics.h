#pragma once
/// The operator's own counters, rendered in the Prometheus text format.
/// (Kept local to the operator; the data plane uses core/metrics.)

#include <atomic>
#include <cstdint>
#include <string>

namespace orca::k8s {

struct OperatorMetrics {
  std::atomic<int64_t> reconciles_ok{0};
  std::atomic<int64_t> reconciles_error{0};
  std::atomic<int64_t> invalid_specs{0};
  std::atomic<int64_t> reconcile_micros_total{0};
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> is_leader{0};
  std::atomic<int64_t> managed_deployments{0};

  /// Text exposition format 0.0.4.
  std::string Render() const;
};

}  // namespace orca::k8s
