#pragma once
/// The catalog of every metric family Orca's services expose, and per-service
/// handles to them. Services, tests and the Grafana dashboards in
/// deploy/grafana/ agree on these names; a dashboard query may use no other
/// (tests/unit/metrics/dashboard_metrics_test.cc checks it).
///
/// Naming follows vLLM: an `orca:` prefix, and a `model_name` label on every
/// family. Histogram buckets match vLLM's for the families vLLM also has.
///
///   Registry registry;
///   ORCA_ASSIGN_OR_RETURN(auto metrics, SchedulerMetrics::Create(&registry, "llama-3-8b"));
///   metrics->num_requests_running().Set(pool.num_running());
///   metrics->time_to_first_token_seconds().Observe(ttft_seconds);
///   metrics->request_success("stop").Increment();

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/metrics/family.h"
#include "core/metrics/metric_spec.h"
#include "core/metrics/registry.h"

namespace orca::metrics {

// ---- Label names -------------------------------------------------------------

inline constexpr char kModelNameLabel[] = "model_name";
inline constexpr char kFinishedReasonLabel[] = "finished_reason";
inline constexpr char kStageLabel[] = "stage";
inline constexpr char kRouteLabel[] = "route";
inline constexpr char kMethodLabel[] = "method";
inline constexpr char kStatusLabel[] = "status";

inline constexpr const char* kModelLabels[] = {kModelNameLabel};
inline constexpr const char* kFinishedReasonLabels[] = {kModelNameLabel, kFinishedReasonLabel};
inline constexpr const char* kStageLabels[] = {kModelNameLabel, kStageLabel};
inline constexpr const char* kHttpRequestLabels[] = {kModelNameLabel, kRouteLabel, kMethodLabel, kStatusLabel};
inline constexpr const char* kHttpDurationLabels[] = {kModelNameLabel, kRouteLabel, kMethodLabel};

/// Values of `finished_reason` (orca.v1.FinishReason without the prefix).
inline constexpr const char* kFinishedReasons[] = {"stop", "length", "cancelled", "error"};

// ---- Buckets -----------------------------------------------------------------

/// vLLM's time_to_first_token_seconds buckets.
inline constexpr double kTimeToFirstTokenBuckets[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                                      0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                                      20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
/// vLLM's time_per_output_token / inter_token_latency buckets.
inline constexpr double kInterTokenLatencyBuckets[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                       0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
/// vLLM's request latency buckets (e2e, queue, prefill, decode).
inline constexpr double kRequestLatencyBuckets[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                                    5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                                    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
/// vLLM's iteration_tokens_total buckets.
inline constexpr double kIterationTokensBuckets[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
/// Requests per iteration, up to well past the default max_bs (16).
inline constexpr double kBatchSizeBuckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
/// One iteration or one stage's share of it: 100 us (a loopback hop) to 30 s
/// (a large prefill on CPU).
inline constexpr double kIterationTimeBuckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                   0.025,  0.05,    0.075,  0.1,   0.15,   0.2,   0.3,
                                                   0.5,    0.75,    1.0,    2.5,   5.0,    10.0,  30.0};
/// Gateway requests: fast errors to long streamed completions.
inline constexpr double kHttpDurationBuckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,   0.25,  0.5,  1.0,
                                                  2.5,   5.0,   10.0, 30.0,  60.0, 120.0, 300.0, 600.0};

// ---- Families: scheduler (engine master) ------------------------------------

inline constexpr MetricSpec kNumRequestsRunning{
    MetricType::kGauge, "orca:num_requests_running",
    "Requests admitted to the engine (KV slots reserved), in an iteration or waiting for the next.", kModelLabels};
inline constexpr MetricSpec kNumRequestsWaiting{MetricType::kGauge, "orca:num_requests_waiting",
                                                "Requests queued for admission (no KV slots reserved yet).",
                                                kModelLabels};
inline constexpr MetricSpec kKvCacheUsagePerc{
    MetricType::kGauge, "orca:kv_cache_usage_perc",
    "Fraction of the KV slot budget reserved by admitted requests, from 0 to 1.", kModelLabels};
inline constexpr MetricSpec kKvSlotsUsed{MetricType::kGauge, "orca:kv_slots_used",
                                         "KV slots (tokens) reserved by admitted requests (paper: n_rsrv).",
                                         kModelLabels};
/// The issue sketch called this `kv_slots_total`; a gauge must not end in
/// `_total` (the counter suffix), so it is `kv_slots_capacity`.
inline constexpr MetricSpec kKvSlotsCapacity{MetricType::kGauge, "orca:kv_slots_capacity",
                                             "KV slot budget in tokens (paper: n_slots).", kModelLabels};
/// KV by layer type: the separate pool the workers keep for sliding-window layers' KV
/// (0 and 0 without one). Gauges, so `_capacity` as above, not `_total`.
inline constexpr MetricSpec kKvLocalSlotsUsed{
    MetricType::kGauge, "orca:kv_local_slots_used",
    "KV slots (tokens) of the sliding-window layers' pool reserved (paged: held) by admitted requests.", kModelLabels};
inline constexpr MetricSpec kKvLocalSlotsCapacity{MetricType::kGauge, "orca:kv_local_slots_capacity",
                                                  "KV slots (tokens) of the sliding-window layers' pool (0: none).",
                                                  kModelLabels};
inline constexpr MetricSpec kPromptTokensTotal{MetricType::kCounter, "orca:prompt_tokens_total",
                                               "Prompt tokens processed by initiation-phase (prefill) iterations.",
                                               kModelLabels};
inline constexpr MetricSpec kGenerationTokensTotal{MetricType::kCounter, "orca:generation_tokens_total",
                                                   "Output tokens generated.", kModelLabels};
inline constexpr MetricSpec kRequestSuccessTotal{MetricType::kCounter, "orca:request_success_total",
                                                 "Finished requests by finish reason (stop, length, cancelled, error).",
                                                 kFinishedReasonLabels};
inline constexpr MetricSpec kTimeToFirstTokenSeconds{
    MetricType::kHistogram, "orca:time_to_first_token_seconds",
    "Time from a request's arrival to its first output token, in seconds.", kModelLabels, kTimeToFirstTokenBuckets};
inline constexpr MetricSpec kInterTokenLatencySeconds{
    MetricType::kHistogram, "orca:inter_token_latency_seconds",
    "Time between consecutive output tokens of one request, in seconds.", kModelLabels, kInterTokenLatencyBuckets};
inline constexpr MetricSpec kE2eRequestLatencySeconds{MetricType::kHistogram, "orca:e2e_request_latency_seconds",
                                                      "Time from a request's arrival to its finish, in seconds.",
                                                      kModelLabels, kRequestLatencyBuckets};
inline constexpr MetricSpec kRequestQueueTimeSeconds{
    MetricType::kHistogram, "orca:request_queue_time_seconds",
    "Time from a request's arrival to its admission (KV slots reserved), in seconds.", kModelLabels,
    kRequestLatencyBuckets};
inline constexpr MetricSpec kRequestPrefillTimeSeconds{
    MetricType::kHistogram, "orca:request_prefill_time_seconds",
    "Time from a request's admission to its first output token, in seconds.", kModelLabels, kRequestLatencyBuckets};
inline constexpr MetricSpec kRequestDecodeTimeSeconds{
    MetricType::kHistogram, "orca:request_decode_time_seconds",
    "Time from a request's first output token to its finish, in seconds.", kModelLabels, kRequestLatencyBuckets};
/// vLLM calls this histogram `vllm:iteration_tokens_total`; Orca drops the
/// `_total` suffix, which Prometheus reserves for counters (promtool flags
/// it, and it would make `_total_bucket` series).
inline constexpr MetricSpec kIterationTokens{
    MetricType::kHistogram, "orca:iteration_tokens",
    "Tokens per engine iteration: prompt tokens of initiation-phase requests plus one per "
    "increment-phase request.",
    kModelLabels, kIterationTokensBuckets};
inline constexpr MetricSpec kBatchSize{MetricType::kHistogram, "orca:batch_size", "Requests per engine iteration.",
                                       kModelLabels, kBatchSizeBuckets};
inline constexpr MetricSpec kIterationDurationSeconds{
    MetricType::kHistogram, "orca:iteration_duration_seconds",
    "Time from scheduling an iteration to its sampled tokens returning, in seconds.", kModelLabels,
    kIterationTimeBuckets};

/// vLLM: `vllm:num_preemptions` (a counter, exported with `_total`).
inline constexpr MetricSpec kNumPreemptionsTotal{
    MetricType::kCounter, "orca:num_preemptions_total",
    "Requests preempted (paged KV: their blocks taken back, recomputed when readmitted).", kModelLabels};
/// vLLM: `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits`, in tokens.
inline constexpr MetricSpec kPrefixCacheQueriesTotal{
    MetricType::kCounter, "orca:prefix_cache_queries_total",
    "Prefix cache queries, in tokens: the tokens of every request looked up at admission.", kModelLabels};
inline constexpr MetricSpec kPrefixCacheHitsTotal{MetricType::kCounter, "orca:prefix_cache_hits_total",
                                                  "Prefix cache hits, in tokens: queried tokens found cached.",
                                                  kModelLabels};

// ---- Families: worker (one pipeline stage) -----------------------------------

inline constexpr MetricSpec kStageComputeSeconds{
    MetricType::kHistogram, "orca:stage_compute_seconds",
    "Per iteration, time a pipeline stage spends computing its layers, in seconds.", kStageLabels,
    kIterationTimeBuckets};
inline constexpr MetricSpec kStageCommunicationSeconds{
    MetricType::kHistogram, "orca:stage_communication_seconds",
    "Per iteration, time a pipeline stage spends sending and receiving activations, in seconds.", kStageLabels,
    kIterationTimeBuckets};

// ---- Families: gateway -------------------------------------------------------

inline constexpr MetricSpec kHttpRequestsTotal{
    MetricType::kCounter, "orca:http_requests_total",
    "HTTP requests answered by the gateway, by route template, method and status code.", kHttpRequestLabels};
inline constexpr MetricSpec kHttpRequestDurationSeconds{
    MetricType::kHistogram, "orca:http_request_duration_seconds",
    "Time from an HTTP request's arrival to the end of its response (streams included), in "
    "seconds.",
    kHttpDurationLabels, kHttpDurationBuckets};

/// Every family above, in exposition order.
inline constexpr const MetricSpec* kMetricCatalog[] = {
    &kNumRequestsRunning,        &kNumRequestsWaiting,        &kKvCacheUsagePerc,         &kKvSlotsUsed,
    &kKvSlotsCapacity,           &kKvLocalSlotsUsed,          &kKvLocalSlotsCapacity,     &kPromptTokensTotal,
    &kGenerationTokensTotal,     &kRequestSuccessTotal,
    &kTimeToFirstTokenSeconds,   &kInterTokenLatencySeconds,  &kE2eRequestLatencySeconds, &kRequestQueueTimeSeconds,
    &kRequestPrefillTimeSeconds, &kRequestDecodeTimeSeconds,  &kIterationTokens,          &kBatchSize,
    &kIterationDurationSeconds,  &kNumPreemptionsTotal,       &kPrefixCacheQueriesTotal,  &kPrefixCacheHitsTotal,
    &kStageComputeSeconds,       &kStageCommunicationSeconds, &kHttpRequestsTotal,        &kHttpRequestDurationSeconds,
};

/// The catalog entry named `name` (e.g. "orca:batch_size"), or nullptr.
const MetricSpec* FindMetricSpec(std::string_view name);

/// Registers every catalog family (without children) in `registry`.
absl::Status RegisterCatalog(Registry* registry);

// ---- Per-service handles -----------------------------------------------------

/// The scheduler's metrics for one model (engine replica). All accessors
/// return cached children: use them on the hot path.
class SchedulerMetrics {
 public:
  /// Registers (or reuses) the scheduler families in `registry`, which must
  /// outlive the result, and creates the children for `model_name`.
  static absl::StatusOr<std::unique_ptr<SchedulerMetrics>> Create(Registry* registry, const std::string& model_name);

  Gauge& num_requests_running() const { return *num_requests_running_; }
  Gauge& num_requests_waiting() const { return *num_requests_waiting_; }
  Gauge& kv_cache_usage_perc() const { return *kv_cache_usage_perc_; }
  Gauge& kv_slots_used() const { return *kv_slots_used_; }
  Gauge& kv_slots_capacity() const { return *kv_slots_capacity_; }
  Gauge& kv_local_slots_used() const { return *kv_local_slots_used_; }
  Gauge& kv_local_slots_capacity() const { return *kv_local_slots_capacity_; }
  Counter& prompt_tokens() const { return *prompt_tokens_; }
  Counter& generation_tokens() const { return *generation_tokens_; }
  /// The counter for one finish reason. The reasons in kFinishedReasons are
  /// cached (and exported as 0 from the start); another value creates its
  /// series under a lock on first use.
  Counter& request_success(std::string_view finished_reason) const;
  Histogram& time_to_first_token_seconds() const { return *time_to_first_token_seconds_; }
  Histogram& inter_token_latency_seconds() const { return *inter_token_latency_seconds_; }
  Histogram& e2e_request_latency_seconds() const { return *e2e_request_latency_seconds_; }
  Histogram& request_queue_time_seconds() const { return *request_queue_time_seconds_; }
  Histogram& request_prefill_time_seconds() const { return *request_prefill_time_seconds_; }
  Histogram& request_decode_time_seconds() const { return *request_decode_time_seconds_; }
  Histogram& iteration_tokens() const { return *iteration_tokens_; }
  Histogram& batch_size() const { return *batch_size_; }
  Histogram& iteration_duration_seconds() const { return *iteration_duration_seconds_; }
  Counter& num_preemptions() const { return *num_preemptions_; }
  Counter& prefix_cache_queries() const { return *prefix_cache_queries_; }
  Counter& prefix_cache_hits() const { return *prefix_cache_hits_; }

  /// Sets kv_slots_used, kv_slots_capacity and kv_cache_usage_perc together.
  void SetKvSlots(int64_t used, int64_t total) const;
  /// Sets kv_local_slots_used and kv_local_slots_capacity (the sliding-window layers' pool).
  void SetKvLocalSlots(int64_t used, int64_t total) const;

 private:
  SchedulerMetrics() = default;

  std::string model_name_;
  Gauge* num_requests_running_ = nullptr;
  Gauge* num_requests_waiting_ = nullptr;
  Gauge* kv_cache_usage_perc_ = nullptr;
  Gauge* kv_slots_used_ = nullptr;
  Gauge* kv_slots_capacity_ = nullptr;
  Gauge* kv_local_slots_used_ = nullptr;
  Gauge* kv_local_slots_capacity_ = nullptr;
  Counter* prompt_tokens_ = nullptr;
  Counter* generation_tokens_ = nullptr;
  Family<Counter>* request_success_family_ = nullptr;
  std::array<Counter*, std::size(kFinishedReasons)> request_success_{};
  Histogram* time_to_first_token_seconds_ = nullptr;
  Histogram* inter_token_latency_seconds_ = nullptr;
  Histogram* e2e_request_latency_seconds_ = nullptr;
  Histogram* request_queue_time_seconds_ = nullptr;
  Histogram* request_prefill_time_seconds_ = nullptr;
  Histogram* request_decode_time_seconds_ = nullptr;
  Histogram* iteration_tokens_ = nullptr;
  Histogram* batch_size_ = nullptr;
  Histogram* iteration_duration_seconds_ = nullptr;
  Counter* num_preemptions_ = nullptr;
  Counter* prefix_cache_queries_ = nullptr;
  Counter* prefix_cache_hits_ = nullptr;
};

/// One worker process's metrics: its pipeline stage's time split between
/// compute and communication.
class WorkerMetrics {
 public:
  /// Registers (or reuses) the worker families in `registry`, which must
  /// outlive the result, and creates the children for (`model_name`, `stage`).
  /// InvalidArgument if `stage` is negative.
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(Registry* registry, const std::string& model_name,
                                                               int stage);

  Histogram& stage_compute_seconds() const { return *stage_compute_seconds_; }
  Histogram& stage_communication_seconds() const { return *stage_communication_seconds_; }

 private:
  WorkerMetrics() = default;

  Histogram* stage_compute_seconds_ = nullptr;
  Histogram* stage_communication_seconds_ = nullptr;
};

/// The gateway's HTTP metrics for its served model.
class GatewayMetrics {
 public:
  /// Registers (or reuses) the gateway families in `registry`, which must
  /// outlive the result.
  static absl::StatusOr<std::unique_ptr<GatewayMetrics>> Create(Registry* registry, const std::string& model_name);

  /// Counts one answered request and observes its duration. `route` must be
  /// a route template from a bounded set (e.g. "/v1/completions", or "other"
  /// for unknown paths), never a raw client path. Takes a family lock per call
  /// (one lookup per HTTP request, not per token).
  void RecordRequest(const std::string& route, const std::string& method, int status, double seconds) const;

  /// The children RecordRequest() uses, for callers that cache them.
  Counter& http_requests(const std::string& route, const std::string& method, int status) const;
  Histogram& http_request_duration_seconds(const std::string& route, const std::string& method) const;

 private:
  GatewayMetrics() = default;

  std::string model_name_;
  Family<Counter>* http_requests_ = nullptr;
  Family<Histogram>* http_request_duration_seconds_ = nullptr;
};

}  // namespace orca::metrics
