#include "core/metrics/orca_metrics.h"

#include <string>

#include "core/common/status_macros.h"

namespace orca::metrics {
namespace {

// Registers `spec` and returns the child for the model-only label set.
template <typename T>
absl::StatusOr<T*> ModelChild(absl::StatusOr<Family<T>*> family, const std::string& model_name) {
  if (!family.ok()) return family.status();
  return (*family)->TryWithLabels({{kModelNameLabel, model_name}});
}

}  // namespace

const MetricSpec* FindMetricSpec(std::string_view name) {
  for (const MetricSpec* spec : kMetricCatalog) {
    if (name == spec->name) return spec;
  }
  return nullptr;
}

absl::Status RegisterCatalog(Registry* registry) {
  for (const MetricSpec* spec : kMetricCatalog) {
    switch (spec->type) {
      case MetricType::kCounter:
        ORCA_RETURN_IF_ERROR(registry->AddCounter(*spec).status());
        break;
      case MetricType::kGauge:
        ORCA_RETURN_IF_ERROR(registry->AddGauge(*spec).status());
        break;
      case MetricType::kHistogram:
        ORCA_RETURN_IF_ERROR(registry->AddHistogram(*spec).status());
        break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SchedulerMetrics>> SchedulerMetrics::Create(Registry* registry,
                                                                           const std::string& model_name) {
  if (registry == nullptr) return absl::InvalidArgumentError("SchedulerMetrics: null registry");
  std::unique_ptr<SchedulerMetrics> m(new SchedulerMetrics());
  m->model_name_ = model_name;
  Registry& r = *registry;
  ORCA_ASSIGN_OR_RETURN(m->num_requests_running_, ModelChild(r.AddGauge(kNumRequestsRunning), model_name));
  ORCA_ASSIGN_OR_RETURN(m->num_requests_waiting_, ModelChild(r.AddGauge(kNumRequestsWaiting), model_name));
  ORCA_ASSIGN_OR_RETURN(m->kv_cache_usage_perc_, ModelChild(r.AddGauge(kKvCacheUsagePerc), model_name));
  ORCA_ASSIGN_OR_RETURN(m->kv_slots_used_, ModelChild(r.AddGauge(kKvSlotsUsed), model_name));
  ORCA_ASSIGN_OR_RETURN(m->kv_slots_capacity_, ModelChild(r.AddGauge(kKvSlotsCapacity), model_name));
  ORCA_ASSIGN_OR_RETURN(m->kv_local_slots_used_, ModelChild(r.AddGauge(kKvLocalSlotsUsed), model_name));
  ORCA_ASSIGN_OR_RETURN(m->kv_local_slots_capacity_, ModelChild(r.AddGauge(kKvLocalSlotsCapacity), model_name));
  ORCA_ASSIGN_OR_RETURN(m->prompt_tokens_, ModelChild(r.AddCounter(kPromptTokensTotal), model_name));
  ORCA_ASSIGN_OR_RETURN(m->generation_tokens_, ModelChild(r.AddCounter(kGenerationTokensTotal), model_name));
  ORCA_ASSIGN_OR_RETURN(m->request_success_family_, r.AddCounter(kRequestSuccessTotal));
  for (size_t i = 0; i < std::size(kFinishedReasons); ++i) {
    const Labels labels = {{kModelNameLabel, model_name}, {kFinishedReasonLabel, kFinishedReasons[i]}};
    ORCA_ASSIGN_OR_RETURN(m->request_success_[i], m->request_success_family_->TryWithLabels(labels));
  }
  ORCA_ASSIGN_OR_RETURN(m->time_to_first_token_seconds_,
                        ModelChild(r.AddHistogram(kTimeToFirstTokenSeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->inter_token_latency_seconds_,
                        ModelChild(r.AddHistogram(kInterTokenLatencySeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->e2e_request_latency_seconds_,
                        ModelChild(r.AddHistogram(kE2eRequestLatencySeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->request_queue_time_seconds_,
                        ModelChild(r.AddHistogram(kRequestQueueTimeSeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->request_prefill_time_seconds_,
                        ModelChild(r.AddHistogram(kRequestPrefillTimeSeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->request_decode_time_seconds_,
                        ModelChild(r.AddHistogram(kRequestDecodeTimeSeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->iteration_tokens_, ModelChild(r.AddHistogram(kIterationTokens), model_name));
  ORCA_ASSIGN_OR_RETURN(m->batch_size_, ModelChild(r.AddHistogram(kBatchSize), model_name));
  ORCA_ASSIGN_OR_RETURN(m->iteration_duration_seconds_,
                        ModelChild(r.AddHistogram(kIterationDurationSeconds), model_name));
  ORCA_ASSIGN_OR_RETURN(m->num_preemptions_, ModelChild(r.AddCounter(kNumPreemptionsTotal), model_name));
  ORCA_ASSIGN_OR_RETURN(m->prefix_cache_queries_, ModelChild(r.AddCounter(kPrefixCacheQueriesTotal), model_name));
  ORCA_ASSIGN_OR_RETURN(m->prefix_cache_hits_, ModelChild(r.AddCounter(kPrefixCacheHitsTotal), model_name));
  return m;
}

Counter& SchedulerMetrics::request_success(std::string_view finished_reason) const {
  for (size_t i = 0; i < std::size(kFinishedReasons); ++i) {
    if (finished_reason == kFinishedReasons[i]) return *request_success_[i];
  }
  return request_success_family_->WithLabels(
      {{kModelNameLabel, model_name_}, {kFinishedReasonLabel, std::string(finished_reason)}});
}

void SchedulerMetrics::SetKvSlots(int64_t used, int64_t total) const {
  kv_slots_used_->Set(static_cast<double>(used));
  kv_slots_capacity_->Set(static_cast<double>(total));
  kv_cache_usage_perc_->Set(total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0);
}

void SchedulerMetrics::SetKvLocalSlots(int64_t used, int64_t total) const {
  kv_local_slots_used_->Set(static_cast<double>(used));
  kv_local_slots_capacity_->Set(static_cast<double>(total));
}

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(Registry* registry, const std::string& model_name,
                                                                     int stage) {
  if (registry == nullptr) return absl::InvalidArgumentError("WorkerMetrics: null registry");
  if (stage < 0) {
    return absl::InvalidArgumentError("WorkerMetrics: stage must be >= 0, got " + std::to_string(stage));
  }
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics());
  const Labels labels = {{kModelNameLabel, model_name}, {kStageLabel, std::to_string(stage)}};
  ORCA_ASSIGN_OR_RETURN(Family<Histogram> * compute, registry->AddHistogram(kStageComputeSeconds));
  ORCA_ASSIGN_OR_RETURN(Family<Histogram> * communication, registry->AddHistogram(kStageCommunicationSeconds));
  ORCA_ASSIGN_OR_RETURN(m->stage_compute_seconds_, compute->TryWithLabels(labels));
  ORCA_ASSIGN_OR_RETURN(m->stage_communication_seconds_, communication->TryWithLabels(labels));
  return m;
}

absl::StatusOr<std::unique_ptr<GatewayMetrics>> GatewayMetrics::Create(Registry* registry,
                                                                       const std::string& model_name) {
  if (registry == nullptr) return absl::InvalidArgumentError("GatewayMetrics: null registry");
  std::unique_ptr<GatewayMetrics> m(new GatewayMetrics());
  m->model_name_ = model_name;
  ORCA_ASSIGN_OR_RETURN(m->http_requests_, registry->AddCounter(kHttpRequestsTotal));
  ORCA_ASSIGN_OR_RETURN(m->http_request_duration_seconds_, registry->AddHistogram(kHttpRequestDurationSeconds));
  return m;
}

Counter& GatewayMetrics::http_requests(const std::string& route, const std::string& method, int status) const {
  return http_requests_->WithLabels({{kModelNameLabel, model_name_},
                                     {kRouteLabel, route},
                                     {kMethodLabel, method},
                                     {kStatusLabel, std::to_string(status)}});
}

Histogram& GatewayMetrics::http_request_duration_seconds(const std::string& route, const std::string& method) const {
  return http_request_duration_seconds_->WithLabels(
      {{kModelNameLabel, model_name_}, {kRouteLabel, route}, {kMethodLabel, method}});
}

void GatewayMetrics::RecordRequest(const std::string& route, const std::string& method, int status,
                                   double seconds) const {
  http_requests(route, method, status).Increment();
  http_request_duration_seconds(route, method).Observe(seconds);
}

}  // namespace orca::metrics
