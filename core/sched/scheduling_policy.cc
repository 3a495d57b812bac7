#include "core/sched/scheduling_policy.h"

#include "core/sched/orca_policy.h"
#include "core/sched/request_level_policy.h"
#include "core/sched/token_budget_policy.h"

namespace orca::sched {

const char* PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kOrca:
      return "orca";
    case PolicyKind::kRequestLevel:
      return "request-level";
    case PolicyKind::kPaged:
      return "paged";
  }
  return "unknown";
}

std::optional<PolicyKind> ParsePolicyKind(const std::string& name) {
  if (name == "orca") return PolicyKind::kOrca;
  if (name == "request-level" || name == "request_level") return PolicyKind::kRequestLevel;
  if (name == "paged") return PolicyKind::kPaged;
  return std::nullopt;
}

const char* SchedulingOrderName(SchedulingOrder order) {
  switch (order) {
    case SchedulingOrder::kFcfs:
      return "fcfs";
    case SchedulingOrder::kPriority:
      return "priority";
  }
  return "unknown";
}

std::optional<SchedulingOrder> ParseSchedulingOrder(const std::string& name) {
  if (name == "fcfs") return SchedulingOrder::kFcfs;
  if (name == "priority") return SchedulingOrder::kPriority;
  return std::nullopt;
}

std::unique_ptr<SchedulingPolicy> CreatePolicy(const PolicyOptions& options) {
  const bool beyond_paper = options.max_num_batched_tokens > 0 || options.max_prefill_slowdown > 0 ||
                            options.long_prefill_token_threshold > 0 || options.order != SchedulingOrder::kFcfs;
  switch (options.kind) {
    case PolicyKind::kOrca:
      if (!beyond_paper) return std::make_unique<OrcaPolicy>();
      return std::make_unique<TokenBudgetPolicy>(options.kind, options.max_num_batched_tokens,
                                                 RequestOrder(options.order, options.priority_aging),
                                                 options.max_prefill_slowdown, options.long_prefill_token_threshold);
    case PolicyKind::kPaged:
      return std::make_unique<TokenBudgetPolicy>(options.kind, options.max_num_batched_tokens,
                                                 RequestOrder(options.order, options.priority_aging),
                                                 options.max_prefill_slowdown, options.long_prefill_token_threshold);
    case PolicyKind::kRequestLevel:
      if (beyond_paper) return nullptr;
      {
        RequestLevelPolicy::Options o;
        o.num_microbatches = options.num_microbatches > 0 ? options.num_microbatches : options.n_workers;
        o.faster_transformer = options.faster_transformer;
        o.max_context = options.max_context;
        return std::make_unique<RequestLevelPolicy>(o);
      }
  }
  return nullptr;
}

std::unique_ptr<SchedulingPolicy> CreatePolicy(PolicyKind kind, int32_t n_workers) {
  PolicyOptions options;
  options.kind = kind;
  options.n_workers = n_workers;
  return CreatePolicy(options);
}

}  // namespace orca::sched
