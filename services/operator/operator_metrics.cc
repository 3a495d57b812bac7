#include "services/operator/operator_metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace orca::k8s {

std::string OperatorMetrics::Render() const {
  std::string out;
  absl::StrAppend(&out,
                  "# HELP orca_operator_reconciles_total OrcaDeployment reconciles by result.\n"
                  "# TYPE orca_operator_reconciles_total counter\n",
                  "orca_operator_reconciles_total{result=\"ok\"} ", reconciles_ok.load(), "\n",
                  "orca_operator_reconciles_total{result=\"error\"} ", reconciles_error.load(), "\n");
  absl::StrAppend(&out,
                  "# HELP orca_operator_invalid_specs_total Reconciles that found an invalid spec.\n"
                  "# TYPE orca_operator_invalid_specs_total counter\n"
                  "orca_operator_invalid_specs_total ",
                  invalid_specs.load(), "\n");
  absl::StrAppend(&out,
                  "# HELP orca_operator_reconcile_seconds_total Time spent reconciling.\n"
                  "# TYPE orca_operator_reconcile_seconds_total counter\n"
                  "orca_operator_reconcile_seconds_total ",
                  absl::StrFormat("%.6f", reconcile_micros_total.load() / 1e6), "\n");
  absl::StrAppend(&out,
                  "# HELP orca_operator_queue_depth Keys waiting in the work queue.\n"
                  "# TYPE orca_operator_queue_depth gauge\n"
                  "orca_operator_queue_depth ",
                  queue_depth.load(), "\n");
  absl::StrAppend(&out,
                  "# HELP orca_operator_is_leader 1 when this replica holds the leader Lease.\n"
                  "# TYPE orca_operator_is_leader gauge\n"
                  "orca_operator_is_leader ",
                  is_leader.load(), "\n");
  absl::StrAppend(&out,
                  "# HELP orca_operator_managed_deployments OrcaDeployments in the watch cache.\n"
                  "# TYPE orca_operator_managed_deployments gauge\n"
                  "orca_operator_managed_deployments ",
                  managed_deployments.load(), "\n");
  return out;
}

}  // namespace orca::k8s
