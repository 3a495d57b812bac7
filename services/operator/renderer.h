#pragma once
/// Pure functions from an OrcaDeployment to the Kubernetes objects that run it.
///
/// Topology of one OrcaDeployment NAME in namespace NS, for engine replica r:
///
///   Service/NAME-gateway ──▶ Deployment/NAME-gateway (gateway.replicas pods)
///        │ --schedulers NAME-r0-scheduler...:7000,NAME-r1-scheduler...:7000
///        ▼
///   Service/NAME-r<r>-scheduler ──▶ Deployment/NAME-r<r>-scheduler (1 pod, Recreate:
///        │ --workers <stage 0>,<stage 1>,...          one engine master per pipeline)
///        ▼
///   Service/NAME-r<r>-pipeline (headless) ──▶ StatefulSet/NAME-r<r>-pipeline
///        pods NAME-r<r>-pipeline-<i>, i = pipeline stage (--stage-from-hostname),
///        each running `tensor` shards; stage i is reached at
///        NAME-r<r>-pipeline-<i>.NAME-r<r>-pipeline.NS.svc.<domain>:7100
///
///   ConfigMap/NAME-config: gateway.yaml, scheduler-r<r>.yaml, worker-r<r>.yaml
///        (flag files mounted at /etc/orca and passed with --config)
///   ServiceMonitor/NAME (monitoring.serviceMonitor.enabled): every Service's http port
///
/// Every object carries the owner reference to the OrcaDeployment (garbage
/// collection), the app.kubernetes.io/* labels, and serving.orca.dev/deployment.
/// Output order is deterministic (ConfigMap, then per replica, then gateway).

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "services/operator/orca_deployment_spec.h"

namespace orca::k8s {

struct RenderOptions {
  /// DNS suffix of the cluster, used in the stable addresses.
  std::string cluster_domain = "cluster.local";
};

inline constexpr int kGatewayHttpPort = 8000;
inline constexpr int kGatewayGrpcPort = 8001;
inline constexpr int kSchedulerGrpcPort = 7000;
inline constexpr int kSchedulerHttpPort = 7001;
inline constexpr int kWorkerGrpcPort = 7100;
inline constexpr int kWorkerHttpPort = 7101;

inline constexpr char kLabelDeployment[] = "serving.orca.dev/deployment";
inline constexpr char kLabelReplica[] = "serving.orca.dev/replica";
inline constexpr char kLabelManagedBy[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "orca-operator";
inline constexpr char kConfigHashAnnotation[] = "serving.orca.dev/config-hash";

std::string ConfigMapName(const OrcaDeployment& d);
std::string GatewayName(const OrcaDeployment& d);
std::string SchedulerName(const OrcaDeployment& d, int replica);
std::string PipelineName(const OrcaDeployment& d, int replica);

/// gRPC address of `stage` of `replica`'s pipeline (through the headless Service).
std::string StageAddress(const OrcaDeployment& d, int replica, int stage, const RenderOptions& options);
/// gRPC address of `replica`'s scheduler Service.
std::string SchedulerAddress(const OrcaDeployment& d, int replica, const RenderOptions& options);

/// Label selector (text form) of the scheduler pods: the scale subresource's status.selector.
std::string SchedulerPodSelector(const OrcaDeployment& d);
/// Label selector (text form) matching every object the operator renders for `d`.
std::string OwnedObjectSelector(const std::string& deployment_name);

/// The ConfigMap's data: flag files, keyed by file name.
nlohmann::json RenderConfigData(const OrcaDeployment& d, const RenderOptions& options);

/// Every object `d` needs, in apply order. Pure: same input, same output.
std::vector<nlohmann::json> RenderDesiredObjects(const OrcaDeployment& d, const RenderOptions& options);

}  // namespace orca::k8s
