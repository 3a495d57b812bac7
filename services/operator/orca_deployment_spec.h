#pragma once
/// The OrcaDeployment custom resource (serving.orca.dev/v1alpha1) as a
/// validated C++ value with every default applied.
///
/// The CRD (deploy/crds/serving.orca.dev_orcadeployments.yaml) is the schema
/// source; the API server applies its defaults and limits before the operator
/// sees an object. ParseOrcaDeployment applies the same defaults again (objects
/// may predate a CRD upgrade) and checks the cross-field rules the schema cannot
/// express (e.g. kvSlots >= maxBatchSize, GPUs per pod == tensor shards, name
/// lengths), so a bad spec becomes a status condition, never a crash.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "services/operator/model_source.h"

namespace orca::k8s {

inline constexpr char kGroup[] = "serving.orca.dev";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kApiVersion[] = "serving.orca.dev/v1alpha1";
inline constexpr char kKind[] = "OrcaDeployment";
inline constexpr char kPlural[] = "orcadeployments";

/// Requests and limits, quantity texts keyed by resource name.
struct ResourceRequirements {
  std::map<std::string, std::string> limits;
  std::map<std::string, std::string> requests;
  bool empty() const { return limits.empty() && requests.empty(); }
};

struct ModelSpec {
  std::string uri;
  std::string served_model_name;  // defaulted to metadata.name
  std::string format = "hf";      // hf | gguf
  std::string dtype = "auto";     // auto | f32 | bf16
  ModelSource source;
};

struct ImageSpec {
  std::string repository = "ghcr.io/orca-serving/orca";
  /// The CUDA build of the same image, for worker pods given GPUs.
  std::string cuda_repository = "ghcr.io/orca-serving/orca-cuda";
  std::string tag = "0.1.0";
  std::string pull_policy = "IfNotPresent";
  std::vector<std::string> pull_secrets;
  std::string Reference() const { return repository + ":" + tag; }
  std::string CudaReference() const { return cuda_repository + ":" + tag; }
};

/// What a user may add to a component's container: environment variables
/// (Kubernetes EnvVar objects) and arguments appended after the flag file
/// (the command line wins over --config).
struct ContainerExtras {
  nlohmann::json env = nlohmann::json::array();
  std::vector<std::string> args;
};

struct WorkerSpec {
  ResourceRequirements resources;
  int32_t threads = 0;
  /// KV slots of the sliding-window layers' own pool (--kv-local-slots); 0 = the binary's default.
  int64_t kv_local_slots = 0;
  std::map<std::string, std::string> node_selector;
  nlohmann::json tolerations = nlohmann::json::array();
  /// Pod affinity rules; null = none.
  nlohmann::json affinity;
  /// null = the default spread (stages of a replica over nodes, replicas over zones, both soft).
  nlohmann::json topology_spread_constraints;
  /// RuntimeClass of the worker pods (e.g. "nvidia"); "" = the cluster's default.
  std::string runtime_class_name;
  /// Size of the memory-backed /dev/shm of GPU worker pods (NCCL's shared-memory transport).
  std::string shm_size = "1Gi";
  ContainerExtras extras;
  std::string image;  // "" = spec.image (its CUDA repository when the pods get GPUs)
};

/// A Secret holding API keys, one per line, mounted as a file (never passed in args or env).
struct SecretKeyRef {
  std::string secret_name;  // "" = none
  std::string key;
  bool enabled() const { return !secret_name.empty(); }
};

/// Default of spec.scheduler.drainGraceSeconds and spec.gateway.drainGraceSeconds (the binaries' own).
inline constexpr int32_t kDefaultDrainGraceSeconds = 30;

struct SchedulerSpec {
  std::string policy = "orca";  // orca | paged | request-level
  int32_t max_batch_size = 16;
  /// Tokens per KV block, the same on the scheduler and every stage (they cross-check it at
  /// session formation); kv_slots is a whole number of blocks.
  int32_t kv_block_size = 16;
  /// Chunked prefill: tokens per iteration (0 = off, whole prompts as in Algorithm 1).
  int32_t max_num_batched_tokens = 0;
  /// Chunked prefill's time budget (--max-prefill-slowdown): 0 = off, else in (1, 1000].
  double max_prefill_slowdown = 0;
  /// Chunked prefill (--long-prefill-token-threshold): at most this many prompt tokens of one
  /// request per iteration, so that a long prompt leaves room for those queued behind it; 0 = off.
  int32_t long_prefill_token_threshold = 0;
  bool enable_prefix_caching = false;
  std::string scheduling_order = "fcfs";  // fcfs | priority
  int64_t priority_aging_ms = 1000;
  /// --drain-grace-seconds: on SIGTERM, in-flight work gets this long (the pod's grace is longer).
  int32_t drain_grace_seconds = kDefaultDrainGraceSeconds;
  /// The internal credential from a Secret of the user's: the tokens every internal port (schedulers
  /// and workers) accepts, its first line the token every process sends. Unset: the operator
  /// creates NAME-internal-token (pod_builder.h InternalTokenSecretRef). The field predates the
  /// workers' authentication, hence its name.
  SecretKeyRef api_keys{"", "scheduler-api-keys"};
  /// The n_slots in effect: spec.scheduler.kvSlots, or derived from kvMemory, or 8192.
  int64_t kv_slots = 8192;
  /// Set when the slots were derived from a memory budget.
  std::optional<int64_t> kv_memory_bytes;
  std::optional<int64_t> kv_bytes_per_token;
  int32_t max_queued = 1024;
  int32_t num_workers = 0;
  ResourceRequirements resources;
  ContainerExtras extras;
  std::string image;
};

struct GatewaySpec {
  int32_t replicas = 1;
  std::string service_type = "ClusterIP";
  int32_t port = 8000;
  std::map<std::string, std::string> service_annotations;
  std::string api_keys_secret;  // "" = no authentication
  std::string api_keys_key = "api-keys";
  /// --drain-grace-seconds: on SIGTERM, in-flight requests get this long (the pod's grace is longer).
  int32_t drain_grace_seconds = kDefaultDrainGraceSeconds;
  ResourceRequirements resources;
  ContainerExtras extras;
  std::string image;
};

/// How engine replicas are replaced when their revision changes (rollout_planner.h).
struct RolloutSpec {
  int32_t max_unavailable = 1;
  int32_t max_surge = 0;
};

struct MonitoringSpec {
  bool service_monitor = false;
  std::string interval = "30s";
  std::map<std::string, std::string> labels;
};

/// A parsed, defaulted and validated OrcaDeployment.
struct OrcaDeployment {
  std::string name;
  std::string namespace_;
  std::string uid;
  int64_t generation = 0;

  ModelSpec model;
  ImageSpec image;
  int32_t replicas = 1;
  int32_t pipeline = 1;  // inter-layer partitions (worker pods per replica)
  int32_t tensor = 1;    // intra-layer shards per stage
  WorkerSpec worker;
  SchedulerSpec scheduler;
  GatewaySpec gateway;
  MonitoringSpec monitoring;
  RolloutSpec rollout;
  /// Render NetworkPolicies admitting only the traffic Orca needs.
  bool network_policy = false;

  /// Worker pods ask for nvidia.com/gpu (and so run the CUDA backend and image).
  bool UsesGpus() const;
};

/// Longest StatefulSet name whose pods' controller-revision-hash label stays within 63 characters.
inline constexpr size_t kMaxStatefulSetNameLength = 52;
/// Characters of the revision hash in group object names (renderer.h).
inline constexpr size_t kRevisionLength = 8;
/// Longest metadata.name: the longest StatefulSet, NAME-r<R>-<revision>-sched, needs
/// len(NAME) + digits(R) <= kMaxNamePlusReplicaDigits (R = spec.replicas - 1).
inline constexpr size_t kMaxNamePlusReplicaDigits = kMaxStatefulSetNameLength - 2 - 1 - kRevisionLength - 6;

/// Parses `object` (a whole OrcaDeployment as JSON). On failure the
/// InvalidArgument message lists every problem, each naming its field and limit.
absl::StatusOr<OrcaDeployment> ParseOrcaDeployment(const nlohmann::json& object);

}  // namespace orca::k8s
