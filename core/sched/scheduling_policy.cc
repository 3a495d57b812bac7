#include "core/sched/scheduling_policy.h"

#include "core/sched/orca_policy.h"
#include "core/sched/request_level_policy.h"

namespace orca::sched {

const char* PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kOrca:
      return "orca";
    case PolicyKind::kRequestLevel:
      return "request-level";
  }
  return "unknown";
}

std::optional<PolicyKind> ParsePolicyKind(const std::string& name) {
  if (name == "orca") return PolicyKind::kOrca;
  if (name == "request-level" || name == "request_level") return PolicyKind::kRequestLevel;
  return std::nullopt;
}

std::unique_ptr<SchedulingPolicy> CreatePolicy(PolicyKind kind, int32_t n_workers) {
  switch (kind) {
    case PolicyKind::kOrca:
      return std::make_unique<OrcaPolicy>();
    case PolicyKind::kRequestLevel:
      return std::make_unique<RequestLevelPolicy>(n_workers);
  }
  return nullptr;
}

}  // namespace orca::sched
