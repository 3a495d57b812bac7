#pragma once
/// Pure functions from an OrcaDeployment to the Kubernetes objects that run it.
///
/// Topology of one OrcaDeployment NAME in namespace NS. Every engine replica r
/// runs as a *group* at a revision REV (an 8-hex hash of everything the group's
/// objects contain, EngineRevision): a group is never changed in place, a new
/// revision is a new group (rollout_planner.h decides when the old one goes).
///
///   Service/NAME-gateway ──▶ Deployment/NAME-gateway (gateway.replicas pods, ConfigMap/NAME-gateway)
///        │ list:  --schedulers NAME-r0-scheduler.NS.svc:7000,...   (Service/NAME-r<r>-scheduler each)
///        │ dns:   --schedulers-dns NAME-schedulers.NS.svc:7000      (no replica count in the gateway)
///        ▼
///   StatefulSet/NAME-r<r>-REV-sched (1 pod, the engine master) ─┐ pod DNS through the headless
///        │ --workers NAME-r<r>-REV-<i>.NAME-workers...:7100     │ Service/NAME-schedulers
///        ▼                                                      │
///   StatefulSet/NAME-r<r>-REV (pipeline, Parallel), pod <i> = stage i (--stage-from-hostname),
///        reached at NAME-r<r>-REV-<i>.NAME-workers.NS.svc.<domain>:7100 (grpc) and :7200 (data-plane);
///        --scheduler NAME-r<r>-REV-sched-0.NAME-schedulers.NS.svc.<domain>:7000 (rendezvous)
///   ConfigMap/NAME-r<r>-REV (immutable): scheduler.yaml and worker.yaml of the group
///
///   Every address dialed before the dialer is Ready goes through a Service with
///   publishNotReadyAddresses (NAME-workers, NAME-schedulers, NAME-r<r>-scheduler):
///   a scheduler is Ready only once its pipeline formed, a stage only once its peers are.
///
///   PodDisruptionBudget/NAME-engine (scheduler+worker pods, maxUnavailable 1: a drain
///   takes one group down at a time) and PodDisruptionBudget/NAME-gateway;
///   NetworkPolicy/NAME-{workers,schedulers,gateway} (spec.networkPolicy.enabled);
///   ServiceMonitor/NAME (monitoring.serviceMonitor.enabled, when the operator manages them).
///   Secret/NAME-internal-token: the internal token every pod mounts (--internal-token-file),
///   created once by the reconciler unless spec.scheduler.apiKeys names a Secret of the user's.
///
/// Every object carries the owner reference to the OrcaDeployment (garbage
/// collection), the app.kubernetes.io/* labels, and serving.orca.dev/deployment.
/// Output order is deterministic (Services, groups by replica, gateway, the rest).

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "services/operator/orca_deployment_spec.h"
#include "services/operator/rollout_planner.h"

namespace orca::k8s {

/// How gateways find the schedulers.
enum class SchedulerDiscovery {
  /// --schedulers with one stable address per replica: the gateway is restarted when replicas change.
  kList,
  /// --schedulers-dns with the headless Service of all schedulers: scaling never touches the gateway
  /// (needs a gateway that re-resolves that name; see deploy/README.md).
  kDns,
};

struct RenderOptions {
  /// DNS suffix of the cluster, used in the stable addresses.
  std::string cluster_domain = "cluster.local";
  SchedulerDiscovery scheduler_discovery = SchedulerDiscovery::kDns;
  /// The operator may create ServiceMonitors (--manage-service-monitors); false drops them.
  bool service_monitors = true;
};

inline constexpr int kGatewayHttpPort = 8000;
inline constexpr int kGatewayGrpcPort = 8001;
inline constexpr int kSchedulerGrpcPort = 7000;
inline constexpr int kSchedulerHttpPort = 7001;
inline constexpr int kWorkerGrpcPort = 7100;
inline constexpr int kWorkerHttpPort = 7101;
/// The worker's fixed data-plane (Gloo/NCCL bootstrap) port, named `data-plane` (--data-plane-port).
inline constexpr int kWorkerDataPlanePort = 7200;

/// Draining on SIGTERM (--drain-grace-seconds) must end before the kubelet's SIGKILL:
///
///   delete ─▶ preStop ─▶ SIGTERM ─▶ drain (in-flight work finishes) ─▶ cancel the rest, exit ─▶ (SIGKILL)
///             |<------------------- terminationGracePeriodSeconds --------------------------->|
///
/// Gateway: a preStop of kGatewayPreStopSeconds first, while the endpoint controller, kube-proxy
/// and load balancers stop sending it new connections (they learn of the deletion concurrently
/// with the kubelet); only then does it stop accepting. Worker: a preStop as long as its
/// scheduler's drain, so that the stages keep running the batches the draining scheduler
/// finishes (a group's pods are deleted together). Scheduler: none; gateways poll its gRPC
/// health, which turns NOT_SERVING at SIGTERM. Every pod then gets kShutdownMarginSeconds to
/// end what is left with proper errors and exit.
inline constexpr int kGatewayPreStopSeconds = 5;
inline constexpr int kShutdownMarginSeconds = 15;
int GatewayTerminationGraceSeconds(const OrcaDeployment& d);
int SchedulerTerminationGraceSeconds(const OrcaDeployment& d);
int WorkerTerminationGraceSeconds(const OrcaDeployment& d);

inline constexpr char kLabelDeployment[] = "serving.orca.dev/deployment";
inline constexpr char kLabelReplica[] = "serving.orca.dev/replica";
inline constexpr char kLabelRevision[] = "serving.orca.dev/revision";
inline constexpr char kLabelComponent[] = "app.kubernetes.io/component";
inline constexpr char kLabelManagedBy[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "orca-operator";
/// On Services whose `http` port Prometheus should scrape (the ServiceMonitor selects it).
inline constexpr char kLabelScrape[] = "serving.orca.dev/scrape";
inline constexpr char kConfigHashAnnotation[] = "serving.orca.dev/config-hash";

std::string GatewayName(const OrcaDeployment& d);
std::string WorkersServiceName(const OrcaDeployment& d);
std::string SchedulersServiceName(const OrcaDeployment& d);
/// The stable per-replica scheduler Service of SchedulerDiscovery::kList.
std::string ReplicaSchedulerServiceName(const OrcaDeployment& d, int replica);
/// Group `replica` at `revision`: its pipeline StatefulSet and its ConfigMap.
std::string GroupName(const OrcaDeployment& d, int replica, const std::string& revision);
/// Group `replica` at `revision`: its scheduler StatefulSet.
std::string GroupSchedulerName(const OrcaDeployment& d, int replica, const std::string& revision);

/// gRPC address of `stage` of a group (pod DNS through the headless workers Service).
std::string StageAddress(const OrcaDeployment& d, int replica, const std::string& revision, int stage,
                         const RenderOptions& options);
/// gRPC address of a group's scheduler pod (through the headless schedulers Service).
std::string GroupSchedulerAddress(const OrcaDeployment& d, int replica, const std::string& revision,
                                  const RenderOptions& options);
/// The address a gateway dials for `replica` (kList).
std::string ReplicaSchedulerAddress(const OrcaDeployment& d, int replica, const RenderOptions& options);
/// The name a gateway resolves to find every scheduler (kDns).
std::string SchedulersDnsAddress(const OrcaDeployment& d, const RenderOptions& options);

/// Label selector (text form) of the scheduler pods: the scale subresource's status.selector.
std::string SchedulerPodSelector(const OrcaDeployment& d);
/// Label selector (text form) matching every object the operator renders for `d`.
std::string OwnedObjectSelector(const std::string& deployment_name);

/// The engine revision of `d`: a hash of the objects of a group (ConfigMap, both
/// StatefulSets), so it changes exactly when a group would. Ignores replica
/// counts, the gateway, monitoring and the owner's uid.
std::string EngineRevision(const OrcaDeployment& d, const RenderOptions& options);

/// The objects of group `replica` at `revision`: ConfigMap, pipeline StatefulSet, scheduler StatefulSet.
std::vector<nlohmann::json> RenderGroup(const OrcaDeployment& d, int replica, const std::string& revision,
                                        const RenderOptions& options);

/// The gateway's flag file (gateway.yaml of ConfigMap/NAME-gateway).
std::string RenderGatewayConfig(const OrcaDeployment& d, const RenderOptions& options);

/// Every object `d` needs for `plan` (the groups of plan.apply at plan.revision
/// plus everything shared), in apply order. Pure: same input, same output.
std::vector<nlohmann::json> RenderDesiredObjects(const OrcaDeployment& d, const RenderOptions& options,
                                                 const RolloutPlan& plan);
/// The objects of a fresh deployment: every replica's group at EngineRevision.
std::vector<nlohmann::json> RenderDesiredObjects(const OrcaDeployment& d, const RenderOptions& options);

/// The Secret NAME-internal-token holding `token` (key kInternalTokenSecretKey), owned by `d`, that
/// every pod mounts when spec.scheduler.apiKeys names none. Not among RenderDesiredObjects: applying
/// it on every reconcile would replace the token under running pods. The reconciler creates it
/// once (and never updates it); offline rendering emits it with a fresh token.
nlohmann::json RenderInternalTokenSecret(const OrcaDeployment& d, const std::string& token);

}  // namespace orca::k8s
