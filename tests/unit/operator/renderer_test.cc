#include "services/operator/renderer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/operator/json_yaml.h"
#include "tests/unit/operator/orca_deployment_builder.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::OrcaDeploymentBuilder;

OrcaDeployment Parse(const OrcaDeploymentBuilder& b) {
  auto d = ParseOrcaDeployment(b.Build());
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : OrcaDeployment{};
}

std::vector<json> Render(const OrcaDeploymentBuilder& b, const RenderOptions& o = {}) {
  return RenderDesiredObjects(Parse(b), o);
}
std::string Revision(const OrcaDeploymentBuilder& b, const RenderOptions& o = {}) {
  return EngineRevision(Parse(b), o);
}

std::vector<std::string> Ids(const std::vector<json>& objects) {
  std::vector<std::string> ids;
  for (const json& o : objects)
    ids.push_back(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
  return ids;
}

const json& Find(const std::vector<json>& objects, const std::string& kind, const std::string& name) {
  for (const json& o : objects) {
    if (o["kind"] == kind && o["metadata"]["name"] == name) return o;
  }
  static const json kNone;
  ADD_FAILURE() << "no " << kind << "/" << name;
  return kNone;
}

// Reads a rendered flag file back into a mapping.
json FlagFile(const std::vector<json>& objects, const std::string& config_map, const std::string& file) {
  const json& cm = Find(objects, "ConfigMap", config_map);
  auto docs = ParseYamlDocuments(cm["data"].value(file, std::string()));
  EXPECT_TRUE(docs.ok() && docs->size() == 1) << config_map << "/" << file;
  return docs.ok() && !docs->empty() ? (*docs)[0] : json();
}

struct TopologyCase {
  const char* name;
  OrcaDeploymentBuilder builder;
  std::vector<std::string> ids;  // REV stands for the engine revision
};

class TopologyTest : public ::testing::TestWithParam<TopologyCase> {};

TEST_P(TopologyTest, RendersExactlyTheseObjectsInApplyOrder) {
  const std::string rev = Revision(GetParam().builder);
  std::vector<std::string> want;
  for (std::string id : GetParam().ids) {
    const size_t at = id.find("REV");
    if (at != std::string::npos) id.replace(at, 3, rev);
    want.push_back(id);
  }
  EXPECT_THAT(Ids(Render(GetParam().builder)), ElementsAreArray(want));
}

INSTANTIATE_TEST_SUITE_P(
    Table, TopologyTest,
    ::testing::Values(TopologyCase{"OneReplica",
                                   OrcaDeploymentBuilder(),
                                   {"Service/demo-workers", "Service/demo-schedulers", "ConfigMap/demo-r0-REV",
                                    "StatefulSet/demo-r0-REV", "StatefulSet/demo-r0-REV-sched",
                                    "ConfigMap/demo-gateway", "Service/demo-gateway", "Deployment/demo-gateway",
                                    "PodDisruptionBudget/demo-engine", "PodDisruptionBudget/demo-gateway"}},
                      TopologyCase{"TwoReplicas",
                                   OrcaDeploymentBuilder().Replicas(2).Pipeline(3),
                                   {"Service/demo-workers", "Service/demo-schedulers", "ConfigMap/demo-r0-REV",
                                    "StatefulSet/demo-r0-REV", "StatefulSet/demo-r0-REV-sched", "ConfigMap/demo-r1-REV",
                                    "StatefulSet/demo-r1-REV", "StatefulSet/demo-r1-REV-sched",
                                    "ConfigMap/demo-gateway", "Service/demo-gateway", "Deployment/demo-gateway",
                                    "PodDisruptionBudget/demo-engine", "PodDisruptionBudget/demo-gateway"}},
                      TopologyCase{"ScaledToZero",
                                   OrcaDeploymentBuilder().Replicas(0),
                                   {"Service/demo-workers", "Service/demo-schedulers", "ConfigMap/demo-gateway",
                                    "Service/demo-gateway", "Deployment/demo-gateway"}},
                      TopologyCase{
                          "WithServiceMonitorAndNetworkPolicies",
                          OrcaDeploymentBuilder()
                              .Set("/spec/monitoring/serviceMonitor/enabled", true)
                              .Set("/spec/networkPolicy/enabled", true),
                          {"Service/demo-workers", "Service/demo-schedulers", "ConfigMap/demo-r0-REV",
                           "StatefulSet/demo-r0-REV", "StatefulSet/demo-r0-REV-sched", "ConfigMap/demo-gateway",
                           "Service/demo-gateway", "Deployment/demo-gateway", "PodDisruptionBudget/demo-engine",
                           "PodDisruptionBudget/demo-gateway", "NetworkPolicy/demo-workers",
                           "NetworkPolicy/demo-schedulers", "NetworkPolicy/demo-gateway", "ServiceMonitor/demo"}}),
    [](const ::testing::TestParamInfo<TopologyCase>& info) { return std::string(info.param.name); });

struct ParallelismCase {
  int replicas;
  int pipeline;
  int tensor;
};

class ParallelismTest : public ::testing::TestWithParam<ParallelismCase> {};

TEST_P(ParallelismTest, EveryReplicaGetsItsOwnGroupInStageOrder) {
  const auto [replicas, pipeline, tensor] = GetParam();
  const auto b = OrcaDeploymentBuilder().Replicas(replicas).Pipeline(pipeline).Tensor(tensor);
  RenderOptions list;
  list.scheduler_discovery = SchedulerDiscovery::kList;
  const auto objects = Render(b, list);
  const std::string rev = Revision(b, list);
  std::vector<std::string> schedulers;
  for (int r = 0; r < replicas; ++r) {
    const std::string group = absl::StrCat("demo-r", r, "-", rev);
    const json& sts = Find(objects, "StatefulSet", group);
    EXPECT_EQ(sts["spec"]["replicas"], pipeline);
    EXPECT_EQ(sts["spec"]["serviceName"], "demo-workers");
    EXPECT_EQ(sts["spec"]["podManagementPolicy"], "Parallel");
    std::vector<std::string> stages;
    for (int i = 0; i < pipeline; ++i) {
      stages.push_back(absl::StrCat(group, "-", i, ".demo-workers.team-a.svc.cluster.local:7100"));
    }
    const std::string joined = absl::StrJoin(stages, ",");
    const json worker = FlagFile(objects, group, "worker.yaml");
    EXPECT_EQ(worker["workers"], joined);
    EXPECT_EQ(worker["num-stages"], pipeline);
    EXPECT_EQ(worker["tensor-parallel"], tensor);
    EXPECT_EQ(worker["stage-from-hostname"], true);
    EXPECT_EQ(worker["scheduler"], absl::StrCat(group, "-sched-0.demo-schedulers.team-a.svc.cluster.local:7000"));
    EXPECT_EQ(worker["deployment-id"], absl::StrCat("team-a.", group));
    EXPECT_EQ(worker["data-plane-port"], kWorkerDataPlanePort);
    const json scheduler = FlagFile(objects, group, "scheduler.yaml");
    EXPECT_EQ(scheduler["workers"], joined);
    EXPECT_EQ(scheduler["listen"], "0.0.0.0:7000");
    const json& sched = Find(objects, "StatefulSet", group + "-sched");
    EXPECT_EQ(sched["spec"]["replicas"], 1);
    EXPECT_EQ(sched["spec"]["serviceName"], "demo-schedulers");
    schedulers.push_back(absl::StrCat("demo-r", r, "-scheduler.team-a.svc.cluster.local:7000"));
  }
  EXPECT_EQ(FlagFile(objects, "demo-gateway", "gateway.yaml")["schedulers"], absl::StrJoin(schedulers, ","));
  // The default discovery names one headless Service whatever the replica count.
  EXPECT_EQ(FlagFile(Render(b), "demo-gateway", "gateway.yaml")["schedulers-dns"],
            "demo-schedulers.team-a.svc.cluster.local:7000");
}

INSTANTIATE_TEST_SUITE_P(Table, ParallelismTest,
                         ::testing::Values(ParallelismCase{1, 1, 1}, ParallelismCase{1, 4, 1}, ParallelismCase{2, 2, 2},
                                           ParallelismCase{3, 1, 4}, ParallelismCase{2, 8, 2}));

// D1: a scheduler is Ready only once its pipeline formed, a stage only with its peers. So every
// address a worker or scheduler dials must reach pods that are not Ready yet: pod DNS through
// a headless Service with publishNotReadyAddresses that selects exactly those pods.
TEST(RendererTest, EveryAddressDialedWhileFormingReachesNotReadyPods) {
  const auto b = OrcaDeploymentBuilder().Replicas(2).Pipeline(3);
  const auto objects = Render(b);
  const std::string rev = Revision(b);
  for (int r = 0; r < 2; ++r) {
    const std::string group = absl::StrCat("demo-r", r, "-", rev);
    std::vector<std::string> addresses;
    for (const char* file : {"worker.yaml", "scheduler.yaml"}) {
      const json flags = FlagFile(objects, group, file);
      for (const char* key : {"workers", "scheduler"}) {
        if (!flags.contains(key)) continue;
        for (absl::string_view a : absl::StrSplit(flags[key].get<std::string>(), ',')) addresses.emplace_back(a);
      }
    }
    ASSERT_EQ(addresses.size(), 3u + 1u + 3u);
    for (const std::string& address : addresses) {
      SCOPED_TRACE(address);
      // <pod>.<service>.team-a.svc.cluster.local:<port>
      const std::vector<std::string> parts = absl::StrSplit(address, '.');
      const std::string pod = parts[0];
      const json& svc = Find(objects, "Service", parts[1]);
      EXPECT_EQ(svc["spec"]["clusterIP"], "None");
      EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
      // The pod belongs to a StatefulSet governed by that Service, whose pod labels it selects.
      const std::string sts_name = pod.substr(0, pod.rfind('-'));
      const json& sts = Find(objects, "StatefulSet", sts_name);
      EXPECT_EQ(sts["spec"]["serviceName"], parts[1]);
      EXPECT_LT(std::stoi(pod.substr(pod.rfind('-') + 1)), sts["spec"]["replicas"].get<int>());
      const json& pod_labels = sts["spec"]["template"]["metadata"]["labels"];
      for (auto it = svc["spec"]["selector"].begin(); it != svc["spec"]["selector"].end(); ++it) {
        EXPECT_EQ(pod_labels[it.key()], it.value()) << it.key();
      }
      EXPECT_EQ(sts["metadata"]["labels"][kLabelRevision], rev);  // never another revision's pods
    }
  }
}

TEST(RendererTest, RevisionFollowsTheGroupAndNothingElse) {
  const auto base = OrcaDeploymentBuilder().Replicas(2).Pipeline(2);
  const std::string rev = Revision(base);
  EXPECT_EQ(rev.size(), kRevisionLength);
  // Not part of a group: replica count, gateway, monitoring, owner uid, discovery mode.
  RenderOptions dns;
  dns.scheduler_discovery = SchedulerDiscovery::kDns;
  for (const auto& same :
       {OrcaDeploymentBuilder().Replicas(5).Pipeline(2),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/gateway/replicas", 4),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/monitoring/serviceMonitor/enabled", true),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).NoUid(),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/rollout/maxSurge", 1)}) {
    EXPECT_EQ(Revision(same), rev) << same.Build().dump();
  }
  EXPECT_EQ(Revision(base, dns), rev);
  // Anything a group's pods see is a new revision.
  for (const auto& changed :
       {OrcaDeploymentBuilder().Replicas(2).Pipeline(3), OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Tensor(2),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/scheduler/maxBatchSize", 8),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/image/tag", "0.2.0"),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/model/dtype", "bf16"),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/worker/resources/limits", {{"cpu", "2"}}),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/worker/env", {{{"name", "X"}, {"value", "1"}}}),
        OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/scheduler/args", {"--worker-timeout-ms=9000"})}) {
    EXPECT_NE(Revision(changed), rev) << changed.Build().dump();
  }
  RenderOptions other_domain;
  other_domain.cluster_domain = "corp.internal";
  EXPECT_NE(Revision(base, other_domain), rev);
}

// D4: a group is never edited in place, so no StatefulSet update strategy can roll a pipeline
// into a half-old, half-new state: same name, same objects; a change is a new name.
TEST(RendererTest, GroupsAreImmutableUnderTheirName) {
  const auto a = Render(OrcaDeploymentBuilder().Replicas(2).Pipeline(2));
  const auto b = Render(OrcaDeploymentBuilder().Replicas(3).Pipeline(2).Set("/spec/gateway/replicas", 2));
  const auto c = Render(OrcaDeploymentBuilder().Replicas(2).Pipeline(2).Set("/spec/scheduler/maxBatchSize", 4));
  auto by_id = [](const std::vector<json>& objects) {
    std::map<std::string, json> m;
    for (const json& o : objects) m[o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>()] = o;
    return m;
  };
  const auto ma = by_id(a), mb = by_id(b), mc = by_id(c);
  int shared = 0;
  for (const auto& [id, o] : ma) {
    if (!o["metadata"]["labels"].contains(kLabelRevision)) continue;
    EXPECT_EQ(mc.count(id), 0u) << id << " kept its name across a config change";
    if (mb.count(id)) {
      ++shared;
      EXPECT_EQ(mb.at(id), o) << id << " changed under the same name";
    }
    if (o["kind"] == "StatefulSet") {
      EXPECT_EQ(o["spec"]["updateStrategy"]["type"], "OnDelete") << id;
    }
    if (o["kind"] == "ConfigMap") {
      EXPECT_EQ(o["immutable"], true) << id;
    }
  }
  EXPECT_EQ(shared, 6);  // both replicas' ConfigMap and StatefulSets survive scaling and gateway changes
}

// D5: with DNS discovery the gateway's flags and pod template do not depend on the replica
// count; with a list they depend on it but never on the engine revision.
TEST(RendererTest, ScalingNeverRestartsGatewaysWithDnsDiscovery) {
  RenderOptions dns;
  dns.scheduler_discovery = SchedulerDiscovery::kDns;
  const auto one = Render(OrcaDeploymentBuilder().Replicas(1), dns);
  for (int replicas : {2, 5, 64}) {
    const auto many = Render(OrcaDeploymentBuilder().Replicas(replicas), dns);
    EXPECT_EQ(Find(many, "Deployment", "demo-gateway"), Find(one, "Deployment", "demo-gateway")) << replicas;
    EXPECT_EQ(Find(many, "ConfigMap", "demo-gateway"), Find(one, "ConfigMap", "demo-gateway")) << replicas;
  }
  const json gateway = FlagFile(one, "demo-gateway", "gateway.yaml");
  EXPECT_EQ(gateway["schedulers-dns"], "demo-schedulers.team-a.svc.cluster.local:7000");
  EXPECT_FALSE(gateway.contains("schedulers"));
  for (const json& o : one) EXPECT_NE(o["metadata"]["name"], "demo-r0-scheduler") << "no per-replica Service";
  // The list: stable across engine updates.
  RenderOptions list;
  list.scheduler_discovery = SchedulerDiscovery::kList;
  const auto before = Render(OrcaDeploymentBuilder().Replicas(2), list);
  const auto after = Render(OrcaDeploymentBuilder().Replicas(2).Set("/spec/scheduler/maxBatchSize", 4), list);
  EXPECT_EQ(Find(before, "Deployment", "demo-gateway"), Find(after, "Deployment", "demo-gateway"));
  const auto three = Render(OrcaDeploymentBuilder().Replicas(3), list);
  EXPECT_NE(Find(before, "Deployment", "demo-gateway"), Find(three, "Deployment", "demo-gateway"));
}

TEST(RendererTest, GpuWorkersGetTheCudaImageShmAndRuntimeClass) {
  const auto b = OrcaDeploymentBuilder()
                     .Tensor(2)
                     .Set("/spec/worker/resources/limits", {{"nvidia.com/gpu", 2}, {"memory", "16Gi"}})
                     .Set("/spec/worker/nodeSelector", {{"gpu", "a100"}})
                     .Set("/spec/worker/runtimeClassName", "nvidia")
                     .Set("/spec/worker/shmSize", "4Gi");
  const auto objects = Render(b);
  const std::string group = "demo-r0-" + Revision(b);
  const json& pod = Find(objects, "StatefulSet", group)["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "ghcr.io/orca-serving/orca-cuda:0.1.0");
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "2");
  EXPECT_EQ(pod["nodeSelector"]["gpu"], "a100");
  EXPECT_EQ(pod["runtimeClassName"], "nvidia");
  EXPECT_EQ(pod["volumes"].back(),
            json({{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "4Gi"}}}}));
  EXPECT_EQ(c["volumeMounts"].back(), json({{"name", "dshm"}, {"mountPath", "/dev/shm"}}));
  EXPECT_EQ(FlagFile(objects, group, "worker.yaml")["device"], "cuda");
  // Schedulers and gateways need no GPU and keep the CPU image.
  EXPECT_EQ(Find(objects, "StatefulSet", group + "-sched")["spec"]["template"]["spec"]["containers"][0]["image"],
            "ghcr.io/orca-serving/orca:0.1.0");
  EXPECT_EQ(Find(objects, "Deployment", "demo-gateway")["spec"]["template"]["spec"]["containers"][0]["image"],
            "ghcr.io/orca-serving/orca:0.1.0");
  // The device plugin chooses the GPUs: nothing may pin NVIDIA_VISIBLE_DEVICES.
  EXPECT_THAT(json(objects).dump(), ::testing::Not(HasSubstr("NVIDIA_VISIBLE_DEVICES")));
  // An explicit worker image wins; CPU pods get no shared-memory volume and no device flag.
  const auto pinned = OrcaDeploymentBuilder()
                          .Tensor(2)
                          .Set("/spec/worker/resources/limits", {{"nvidia.com/gpu", 2}})
                          .Set("/spec/worker/image", "registry.example.com/orca-cuda:dev");
  const auto pinned_objects = Render(pinned);
  EXPECT_EQ(Find(pinned_objects, "StatefulSet",
                 "demo-r0-" + Revision(pinned))["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.example.com/orca-cuda:dev");
  const auto cpu = OrcaDeploymentBuilder();
  const auto cpu_objects = Render(cpu);
  const json& cpu_pod = Find(cpu_objects, "StatefulSet", "demo-r0-" + Revision(cpu))["spec"]["template"]["spec"];
  EXPECT_THAT(cpu_pod["volumes"].dump(), ::testing::Not(HasSubstr("dshm")));
  EXPECT_FALSE(cpu_pod.contains("runtimeClassName"));
  EXPECT_FALSE(FlagFile(cpu_objects, "demo-r0-" + Revision(cpu), "worker.yaml").contains("device"));
}

TEST(RendererTest, ExtraEnvAndArgsComeAfterTheRenderedOnes) {
  const auto b = OrcaDeploymentBuilder()
                     .Set("/spec/worker/env", {{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}})
                     .Set("/spec/worker/args", {"--peer-timeout-ms=20000", "--data-plane-host=10.0.0.9"})
                     .Set("/spec/scheduler/args", {"--worker-timeout-ms=9000"})
                     .Set("/spec/gateway/env", {{{"name", "TZ"}, {"value", "UTC"}}});
  const auto objects = Render(b);
  const std::string group = "demo-r0-" + Revision(b);
  const json& worker = Find(objects, "StatefulSet", group)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_THAT(worker["args"], ElementsAre("--config=/etc/orca/worker.yaml", "--data-plane-host=$(POD_IP)",
                                          "--peer-timeout-ms=20000", "--data-plane-host=10.0.0.9"));
  EXPECT_EQ(worker["env"].back()["name"], "NCCL_DEBUG");
  EXPECT_EQ(worker["env"][0]["name"], "POD_IP");
  const json& sched = Find(objects, "StatefulSet", group + "-sched")["spec"]["template"]["spec"]["containers"][0];
  EXPECT_THAT(sched["args"], ElementsAre("--config=/etc/orca/scheduler.yaml", "--worker-timeout-ms=9000"));
  EXPECT_EQ(Find(objects, "Deployment", "demo-gateway")["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"],
            "TZ");
}

TEST(RendererTest, DisruptionBudgetTakesOneGroupAtATime) {
  const auto objects = Render(OrcaDeploymentBuilder().Replicas(3).Pipeline(2));
  const json& pdb = Find(objects, "PodDisruptionBudget", "demo-engine");
  EXPECT_EQ(pdb["spec"]["maxUnavailable"], 1);
  EXPECT_EQ(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
  EXPECT_EQ(pdb["spec"]["selector"]["matchExpressions"][0]["values"], json::array({"scheduler", "worker"}));
  // It selects every engine pod and no gateway pod.
  auto selects = [&](const json& pod_labels) {
    for (auto it = pdb["spec"]["selector"]["matchLabels"].begin(); it != pdb["spec"]["selector"]["matchLabels"].end();
         ++it) {
      if (pod_labels.value(it.key(), "") != it.value()) return false;
    }
    const std::string component = pod_labels.value(kLabelComponent, "");
    return component == "scheduler" || component == "worker";
  };
  int engine = 0;
  for (const json& o : objects) {
    if (!o.contains("spec") || !o["spec"].contains("template")) continue;
    const bool is_engine = o["kind"] == "StatefulSet";
    EXPECT_EQ(selects(o["spec"]["template"]["metadata"]["labels"]), is_engine) << o["metadata"]["name"];
    engine += is_engine;
  }
  EXPECT_EQ(engine, 6);
  EXPECT_EQ(Find(objects, "PodDisruptionBudget", "demo-gateway")["spec"]["selector"]["matchLabels"][kLabelComponent],
            "gateway");
}

TEST(RendererTest, NetworkPoliciesAdmitTheDataPlaneByItsNamedPort) {
  const auto b = OrcaDeploymentBuilder().Pipeline(2).Set("/spec/networkPolicy/enabled", true);
  const auto objects = Render(b);
  const std::string group = "demo-r0-" + Revision(b);
  // Every named port a policy admits is a container port of the pods it selects.
  for (const json& np : objects) {
    if (np["kind"] != "NetworkPolicy") continue;
    const std::string component = np["spec"]["podSelector"]["matchLabels"][kLabelComponent];
    std::set<std::string> ports;
    for (const json& o : objects) {
      if (!o.contains("spec") || !o["spec"].contains("template")) continue;
      if (o["spec"]["template"]["metadata"]["labels"][kLabelComponent] != component) continue;
      for (const json& p : o["spec"]["template"]["spec"]["containers"][0]["ports"]) ports.insert(p["name"]);
    }
    for (const json& rule : np["spec"]["ingress"]) {
      for (const json& p : rule["ports"]) EXPECT_TRUE(ports.count(p["port"])) << np["metadata"]["name"] << " " << p;
    }
  }
  const json& workers = Find(objects, "NetworkPolicy", "demo-workers");
  EXPECT_EQ(workers["spec"]["ingress"][1]["ports"][0]["port"], "data-plane");
  EXPECT_EQ(workers["spec"]["ingress"][1]["from"][0]["podSelector"]["matchLabels"][kLabelComponent], "worker");
  const json& c = Find(objects, "StatefulSet", group)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["ports"][2], json({{"name", "data-plane"}, {"containerPort", 7200}, {"protocol", "TCP"}}));
  EXPECT_EQ(Ids(Render(OrcaDeploymentBuilder())).size(), 10u);  // none unless enabled
}

TEST(RendererTest, ServiceMonitorScrapesEachPodOnceWithReplicaLabels) {
  const auto monitored = OrcaDeploymentBuilder().Replicas(2).Set(
      "/spec/monitoring/serviceMonitor", {{"enabled", true}, {"interval", "15s"}, {"labels", {{"release", "kps"}}}});
  const auto objects = Render(monitored);
  const json& sm = Find(objects, "ServiceMonitor", "demo");
  EXPECT_EQ(sm["metadata"]["labels"]["release"], "kps");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"], "http");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["interval"], "15s");
  std::vector<std::string> targets;
  for (const json& r : sm["spec"]["endpoints"][0]["relabelings"]) targets.push_back(r["targetLabel"]);
  EXPECT_THAT(targets, ElementsAre("orca_deployment", "replica"));
  std::vector<std::string> scraped;
  for (const json& o : objects) {
    if (o["kind"] != "Service") continue;
    bool selected = true;
    for (auto it = sm["spec"]["selector"]["matchLabels"].begin(); it != sm["spec"]["selector"]["matchLabels"].end();
         ++it)
      selected = selected && o["metadata"]["labels"].value(it.key(), "") == it.value();
    if (!selected) continue;
    scraped.push_back(o["metadata"]["name"]);
    bool has_http = false;
    for (const json& p : o["spec"]["ports"]) has_http = has_http || p["name"] == "http";
    EXPECT_TRUE(has_http) << o["metadata"]["name"];
  }
  // The per-replica scheduler Services select the same pods as demo-schedulers: not scraped twice.
  EXPECT_THAT(scraped, ElementsAre("demo-workers", "demo-schedulers", "demo-gateway"));
  RenderOptions unmanaged;
  unmanaged.service_monitors = false;
  for (const json& o : Render(monitored, unmanaged)) EXPECT_NE(o["kind"], "ServiceMonitor");
}

TEST(RendererTest, WorkerPlacementDefaultsAndOverrides) {
  const auto b = OrcaDeploymentBuilder().Replicas(2);
  const auto objects = Render(b);
  const json& pod = Find(objects, "StatefulSet", "demo-r1-" + Revision(b))["spec"]["template"]["spec"];
  const json& term =
      pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"];
  EXPECT_EQ(term["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(term["labelSelector"]["matchExpressions"][0],
            json({{"key", kLabelReplica}, {"operator", "NotIn"}, {"values", {"1"}}}));
  EXPECT_EQ(pod["topologySpreadConstraints"][0]["topologyKey"], "topology.kubernetes.io/zone");
  EXPECT_EQ(pod["topologySpreadConstraints"][0]["whenUnsatisfiable"], "ScheduleAnyway");
  const json mine = {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", json::object()}}}};
  const auto custom = OrcaDeploymentBuilder()
                          .Set("/spec/worker/affinity", mine)
                          .Set("/spec/worker/topologySpreadConstraints", json::array());
  const auto custom_objects = Render(custom);
  const json& custom_pod =
      Find(custom_objects, "StatefulSet", "demo-r0-" + Revision(custom))["spec"]["template"]["spec"];
  EXPECT_EQ(custom_pod["affinity"], mine);
  EXPECT_EQ(custom_pod["topologySpreadConstraints"], json::array());
}

TEST(RendererTest, EveryFlagFileKeyIsAFlagOfItsBinary) {
  // The binaries refuse unknown keys. tests/deploy checks these against each binary's --help;
  // data-plane-port (worker) and schedulers-dns (gateway) are the flags this rendering relies on.
  const std::map<std::string, std::set<std::string>> allowed = {
      {"worker",
       {"listen",
        "http-listen",
        "model",
        "model-name",
        "dtype",
        "stage",
        "stage-from-hostname",
        "num-stages",
        "tensor-parallel",
        "workers",
        "scheduler",
        "deployment-id",
        "data-plane-host",
        "data-plane-port",
        "n-slots",
        "threads",
        "peer-timeout-ms",
        "device",
        "kv-block-size",
        "internal-token-file",
        "reserve-tokens",
        "swa-full",
        "kv-local-slots"}},
      {"scheduler",
       {"listen",
        "http-listen",
        "workers",
        "model",
        "model-name",
        "policy",
        "max-bs",
        "n-slots",
        "n-workers",
        "max-queued-requests",
        "max-queued-tokens",
        "default-deadline-ms",
        "drain-grace-seconds",
        "worker-timeout-ms",
        "kv-block-size",
        "max-num-batched-tokens",
        "max-prefill-slowdown",
        "long-prefill-token-threshold",
        "enable-prefix-caching",
        "scheduling-order",
        "priority-aging-ms",
        "internal-token-file"}},
      {"gateway",
       {"listen", "grpc-listen", "schedulers", "schedulers-dns", "model", "served-model-name", "api-keys",
        "api-keys-file", "max-body-bytes", "max-concurrent-requests", "chat-template", "max-model-len",
        "internal-token-file", "drain-grace-seconds"}}};
  RenderOptions dns;
  dns.scheduler_discovery = SchedulerDiscovery::kDns;
  for (const RenderOptions& o : {RenderOptions{}, dns}) {
    const auto b = OrcaDeploymentBuilder()
                       .Replicas(2)
                       .Tensor(2)
                       .Set("/spec/worker/threads", 4)
                       .Set("/spec/scheduler/maxNumBatchedTokens", 256)
                       .Set("/spec/worker/resources/limits", {{"nvidia.com/gpu", 2}})
                       .Set("/spec/gateway/apiKeys", {{"secretName", "keys"}})
                       .Set("/spec/scheduler/apiKeys", {{"secretName", "sched-keys"}});
    const auto objects = Render(b, o);
    int files = 0;
    for (const json& cm : objects) {
      if (cm["kind"] != "ConfigMap") continue;
      for (auto it = cm["data"].begin(); it != cm["data"].end(); ++it) {
        ++files;
        const std::string binary = it.key().substr(0, it.key().find('.'));
        const json flags = FlagFile(objects, cm["metadata"]["name"], it.key());
        for (auto f = flags.begin(); f != flags.end(); ++f) {
          EXPECT_TRUE(allowed.at(binary).count(f.key())) << it.key() << ": " << f.key();
        }
      }
    }
    EXPECT_EQ(files, 5);
  }
}

TEST(RendererTest, ObjectsAreOwnedAndLabelled) {
  for (const json& o : Render(OrcaDeploymentBuilder()
                                  .Set("/spec/monitoring/serviceMonitor/enabled", true)
                                  .Set("/spec/networkPolicy/enabled", true))) {
    SCOPED_TRACE(o["kind"].get<std::string>());
    const json& meta = o["metadata"];
    EXPECT_EQ(meta["namespace"], "team-a");
    EXPECT_EQ(meta["labels"]["app.kubernetes.io/managed-by"], "orca-operator");
    EXPECT_EQ(meta["labels"]["serving.orca.dev/deployment"], "demo");
    EXPECT_EQ(meta["labels"]["app.kubernetes.io/instance"], "demo");
    ASSERT_EQ(meta["ownerReferences"].size(), 1u);
    EXPECT_EQ(meta["ownerReferences"][0]["uid"], "uid-demo");
    EXPECT_EQ(meta["ownerReferences"][0]["kind"], "OrcaDeployment");
    EXPECT_EQ(meta["ownerReferences"][0]["controller"], true);
  }
  for (const json& o : Render(OrcaDeploymentBuilder().NoUid())) EXPECT_FALSE(o["metadata"].contains("ownerReferences"));
}

TEST(RendererTest, SelectorsMatchTheirPodsAndOnlyTheirPods) {
  const auto b = OrcaDeploymentBuilder().Replicas(2);
  RenderOptions list;
  list.scheduler_discovery = SchedulerDiscovery::kList;
  const auto objects = Render(b, list);
  for (const json& o : objects) {
    if (o["kind"] != "StatefulSet" && o["kind"] != "Deployment") continue;
    const json& selector = o["spec"]["selector"]["matchLabels"];
    const json& pod_labels = o["spec"]["template"]["metadata"]["labels"];
    for (auto it = selector.begin(); it != selector.end(); ++it) EXPECT_EQ(pod_labels[it.key()], it.value());
  }
  // Replica 1's stable scheduler Service must not select replica 0's scheduler.
  EXPECT_EQ(Find(objects, "Service", "demo-r1-scheduler")["spec"]["selector"]["serving.orca.dev/replica"], "1");
  EXPECT_EQ(
      Find(objects, "StatefulSet", "demo-r0-" + Revision(b, list))["spec"]["selector"]["matchLabels"][kLabelRevision],
      Revision(b, list));
}

TEST(RendererTest, RenderingIsPure) {
  const auto b = OrcaDeploymentBuilder().Replicas(3).Pipeline(2).Tensor(2);
  EXPECT_EQ(Render(b), Render(b));
}

TEST(RendererTest, SyntheticModelIsSynthesizedByAnInitContainer) {
  const auto b = OrcaDeploymentBuilder().Uri("synthetic://llama?layers=2&hidden=32&heads=2&seed=9");
  const auto objects = Render(b);
  const std::string group = "demo-r0-" + Revision(b);
  for (const auto& [kind, name] :
       {std::pair<std::string, std::string>{"StatefulSet", group}, {"Deployment", "demo-gateway"}}) {
    const json& pod = Find(objects, kind, name)["spec"]["template"]["spec"];
    ASSERT_EQ(pod["initContainers"].size(), 1u) << name;
    const json& init = pod["initContainers"][0];
    EXPECT_EQ(init["command"], json::array({"orca"}));
    const std::vector<std::string> args = init["args"];
    EXPECT_THAT(std::vector<std::string>(args.begin(), args.begin() + 6),
                ElementsAre("model", "synth", "--arch", "llama", "--out", "/models/synthetic"));
    EXPECT_THAT(args, ::testing::Contains("--seed"));
    EXPECT_EQ(pod["volumes"].back()["name"], "model");
    EXPECT_TRUE(pod["volumes"].back().contains("emptyDir"));
  }
  // The scheduler never loads the model.
  EXPECT_FALSE(Find(objects, "StatefulSet", group + "-sched")["spec"]["template"]["spec"].contains("initContainers"));
}

TEST(RendererTest, PvcModelIsMountedReadOnly) {
  const auto b = OrcaDeploymentBuilder().Uri("pvc://weights/llama");
  const auto objects = Render(b);
  const std::string group = "demo-r0-" + Revision(b);
  const json& pod = Find(objects, "StatefulSet", group)["spec"]["template"]["spec"];
  EXPECT_FALSE(pod.contains("initContainers"));
  EXPECT_EQ(pod["volumes"].back()["persistentVolumeClaim"]["claimName"], "weights");
  EXPECT_EQ(pod["volumes"].back()["persistentVolumeClaim"]["readOnly"], true);
  EXPECT_EQ(FlagFile(objects, group, "worker.yaml")["model"], "/models/llama");
  EXPECT_EQ(FlagFile(objects, "demo-gateway", "gateway.yaml")["model"], "/models/llama");
}

TEST(RendererTest, PodsRunAsNonRootWithProbes) {
  for (const json& o : Render(OrcaDeploymentBuilder())) {
    if (o["kind"] != "StatefulSet" && o["kind"] != "Deployment") continue;
    const json& pod = o["spec"]["template"]["spec"];
    EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
    EXPECT_EQ(pod["automountServiceAccountToken"], false);
    const json& c = pod["containers"][0];
    EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
    EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/ready");
    EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/health");
    EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"], "http");
  }
}

TEST(RendererTest, GatewayServiceAndApiKeys) {
  const auto objects = Render(OrcaDeploymentBuilder()
                                  .Set("/spec/gateway/replicas", 3)
                                  .Set("/spec/gateway/service", {{"type", "LoadBalancer"}, {"port", 80}})
                                  .Set("/spec/gateway/apiKeys", {{"secretName", "orca-keys"}, {"key", "keys.txt"}}));
  const json& svc = Find(objects, "Service", "demo-gateway");
  EXPECT_EQ(svc["spec"]["type"], "LoadBalancer");
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 80);
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], "http");
  const json& gw = Find(objects, "Deployment", "demo-gateway");
  EXPECT_EQ(gw["spec"]["replicas"], 3);
  EXPECT_EQ(gw["spec"]["template"]["spec"]["volumes"].back()["secret"]["secretName"], "orca-keys");
  EXPECT_EQ(FlagFile(objects, "demo-gateway", "gateway.yaml")["api-keys-file"], "/etc/orca-secrets/keys.txt");
  EXPECT_EQ(FlagFile(objects, "demo-gateway", "gateway.yaml")["listen"], "0.0.0.0:8000");
  // With no engine replica the gateway scales to zero too.
  const auto none = Render(OrcaDeploymentBuilder().Replicas(0));
  EXPECT_EQ(Find(none, "Deployment", "demo-gateway")["spec"]["replicas"], 0);
}

TEST(RendererTest, ClusterDomainIsConfigurable) {
  RenderOptions options;
  options.cluster_domain = "corp.internal";
  const OrcaDeployment d = Parse(OrcaDeploymentBuilder());
  EXPECT_EQ(StageAddress(d, 0, "abc", 1, options), "demo-r0-abc-1.demo-workers.team-a.svc.corp.internal:7100");
  EXPECT_EQ(GroupSchedulerAddress(d, 0, "abc", options),
            "demo-r0-abc-sched-0.demo-schedulers.team-a.svc.corp.internal:7000");
  EXPECT_EQ(ReplicaSchedulerAddress(d, 2, options), "demo-r2-scheduler.team-a.svc.corp.internal:7000");
  EXPECT_EQ(SchedulersDnsAddress(d, options), "demo-schedulers.team-a.svc.corp.internal:7000");
}

// Every scheduling knob of the CRD reaches the flag of the binary that reads it: one row per
// field, the value given, the flag file and key it must appear under.
TEST(RendererTest, EverySchedulingFieldBecomesItsFlag) {
  struct Row {
    const char* field;
    json value;
    std::vector<std::pair<std::string, std::string>> files_and_flags;  // {"scheduler.yaml", "policy"}
  };
  const std::vector<Row> rows = {
      {"policy", "paged", {{"scheduler.yaml", "policy"}}},
      {"kvBlockSize", 32, {{"scheduler.yaml", "kv-block-size"}, {"worker.yaml", "kv-block-size"}}},
      {"maxNumBatchedTokens", 512, {{"scheduler.yaml", "max-num-batched-tokens"}, {"worker.yaml", "reserve-tokens"}}},
      {"maxPrefillSlowdown", 2.5, {{"scheduler.yaml", "max-prefill-slowdown"}}},
      {"longPrefillTokenThreshold", 128, {{"scheduler.yaml", "long-prefill-token-threshold"}}},
      {"enablePrefixCaching", true, {{"scheduler.yaml", "enable-prefix-caching"}, {"worker.yaml", "swa-full"}}},
      {"schedulingOrder", "priority", {{"scheduler.yaml", "scheduling-order"}}},
      {"priorityAgingMs", 250, {{"scheduler.yaml", "priority-aging-ms"}}},
      {"drainGraceSeconds", 90, {{"scheduler.yaml", "drain-grace-seconds"}}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.field);
    const auto b = OrcaDeploymentBuilder().Set(std::string("/spec/scheduler/") + row.field, row.value);
    const auto objects = Render(b);
    const std::string group = "demo-r0-" + Revision(b);
    for (const auto& [file, flag] : row.files_and_flags) EXPECT_EQ(FlagFile(objects, group, file)[flag], row.value);
    // A new value is a new revision: the group is replaced, never edited.
    EXPECT_NE(Revision(b), Revision(OrcaDeploymentBuilder()));
  }
  const auto gw = Render(OrcaDeploymentBuilder().Set("/spec/gateway/drainGraceSeconds", 75));
  EXPECT_EQ(FlagFile(gw, "demo-gateway", "gateway.yaml")["drain-grace-seconds"], 75);
}

// The sliding-window layers' pool reaches the workers; with prefix caching they keep every position instead.
TEST(RendererTest, WorkerKvLocalSlotsBecomesItsFlag) {
  const auto plain = OrcaDeploymentBuilder();
  EXPECT_FALSE(FlagFile(Render(plain), "demo-r0-" + Revision(plain), "worker.yaml").contains("kv-local-slots"));
  const auto sized = OrcaDeploymentBuilder().Set("/spec/worker/kvLocalSlots", 4096);
  const json worker = FlagFile(Render(sized), "demo-r0-" + Revision(sized), "worker.yaml");
  EXPECT_EQ(worker["kv-local-slots"], 4096);
  EXPECT_FALSE(worker.contains("swa-full"));
  EXPECT_NE(Revision(sized), Revision(plain));
  const auto cached = OrcaDeploymentBuilder().Set("/spec/scheduler/enablePrefixCaching", true);
  EXPECT_EQ(FlagFile(Render(cached), "demo-r0-" + Revision(cached), "worker.yaml")["swa-full"], true);
}

TEST(RendererTest, DefaultsRenderTheBinariesDefaults) {
  const auto b = OrcaDeploymentBuilder();
  const auto objects = Render(b);
  const std::string group = "demo-r0-" + Revision(b);
  const json scheduler = FlagFile(objects, group, "scheduler.yaml");
  EXPECT_EQ(scheduler["policy"], "orca");
  EXPECT_EQ(scheduler["kv-block-size"], 16);
  EXPECT_EQ(scheduler["max-num-batched-tokens"], 0);
  EXPECT_EQ(scheduler["max-prefill-slowdown"], 0);
  EXPECT_EQ(scheduler["long-prefill-token-threshold"], 0);
  EXPECT_EQ(scheduler["enable-prefix-caching"], false);
  EXPECT_EQ(scheduler["scheduling-order"], "fcfs");
  EXPECT_EQ(scheduler["priority-aging-ms"], 1000);
  EXPECT_EQ(scheduler["drain-grace-seconds"], 30);
  EXPECT_EQ(FlagFile(objects, group, "worker.yaml")["kv-block-size"], 16);
  EXPECT_EQ(FlagFile(objects, "demo-gateway", "gateway.yaml")["drain-grace-seconds"], 30);
}

// Pods, by name, with their main container and pod spec.
std::vector<std::pair<std::string, const json*>> PodTemplates(const std::vector<json>& objects) {
  std::vector<std::pair<std::string, const json*>> out;
  for (const json& o : objects) {
    if (o["kind"] == "StatefulSet" || o["kind"] == "Deployment") {
      out.emplace_back(o["metadata"]["name"].get<std::string>(), &o["spec"]["template"]["spec"]);
    }
  }
  return out;
}

// Issue 45: every process of every rendered layout gets the internal token as a file of a
// mounted Secret (--internal-token-file): the Secret the operator creates (NAME-internal-token),
// or the user's own (spec.scheduler.apiKeys). Never in args or env.
TEST(RendererTest, EveryProcessReadsTheInternalTokenFromAMountedSecret) {
  struct Case {
    const char* name;
    OrcaDeploymentBuilder builder;
    const char* secret;
    const char* key;
  };
  const Case cases[] = {
      {"operator-created", OrcaDeploymentBuilder().Pipeline(2).Replicas(2), "demo-internal-token", "token"},
      {"own Secret",
       OrcaDeploymentBuilder().Pipeline(2).Set("/spec/scheduler/apiKeys",
                                               {{"secretName", "sched-auth"}, {"key", "keys.txt"}}),
       "sched-auth", "keys.txt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto objects = Render(c.builder);
    int files = 0;
    for (const json& cm : objects) {
      if (cm["kind"] != "ConfigMap") continue;
      for (auto it = cm["data"].begin(); it != cm["data"].end(); ++it, ++files)
        EXPECT_EQ(FlagFile(objects, cm["metadata"]["name"], it.key())["internal-token-file"],
                  "/etc/orca-internal-auth/token")
            << it.key();
    }
    EXPECT_GE(files, 3);  // worker.yaml, scheduler.yaml per group; gateway.yaml
    const auto pods = PodTemplates(objects);
    ASSERT_GE(pods.size(), 3u);  // pipelines, schedulers, gateway
    for (const auto& [name, pod] : pods) {
      SCOPED_TRACE(name);
      const json* volume = nullptr;
      for (const json& v : (*pod)["volumes"]) {
        if (v["name"] == "internal-token") volume = &v;
      }
      ASSERT_NE(volume, nullptr);
      EXPECT_EQ((*volume)["secret"]["secretName"], c.secret);
      EXPECT_EQ((*volume)["secret"]["items"], json::array({{{"key", c.key}, {"path", "token"}}}));
      EXPECT_EQ((*volume)["secret"]["defaultMode"], 0440);
      const json& container = (*pod)["containers"][0];
      const json mount = {{"name", "internal-token"}, {"mountPath", "/etc/orca-internal-auth"}, {"readOnly", true}};
      EXPECT_NE(std::find(container["volumeMounts"].begin(), container["volumeMounts"].end(), mount),
                container["volumeMounts"].end());
      // The token itself is never in the pod's spec: no env from the Secret, no token flag in args.
      EXPECT_EQ(container.dump().find("secretKeyRef"), std::string::npos);
      for (const json& a : container["args"]) EXPECT_EQ(a.get<std::string>().find("token"), std::string::npos) << a;
    }
    // The Secret is created by the reconciler, once: never among the objects applied on every pass.
    for (const json& o : objects) EXPECT_NE(o["kind"], "Secret");
  }
}

TEST(RendererTest, TheInternalTokenSecretIsOwnedAndHoldsTheToken) {
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder().Build());
  ASSERT_TRUE(d.ok()) << d.status();
  const json secret = RenderInternalTokenSecret(*d, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(secret["kind"], "Secret");
  EXPECT_EQ(secret["metadata"]["name"], "demo-internal-token");
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(secret["data"]["token"], "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYK");  // base64 of the token + "\n"
}

// The preStop hook's `sleep N`, 0 without one.
int PreStopSeconds(const json& pod) {
  const json& c = pod["containers"][0];
  if (!c.contains("lifecycle")) return 0;
  const json& command = c["lifecycle"]["preStop"]["exec"]["command"];
  EXPECT_EQ(command.size(), 2u);
  EXPECT_EQ(command[0], "sleep");
  return std::stoi(command[1].get<std::string>());
}

TEST(RendererTest, TerminationGraceCoversPreStopAndDrain) {
  for (const int drain : {0, 1, 30, 600}) {
    SCOPED_TRACE(drain);
    const auto b = OrcaDeploymentBuilder()
                       .Set("/spec/scheduler/drainGraceSeconds", drain)
                       .Set("/spec/gateway/drainGraceSeconds", drain);
    const auto objects = Render(b);
    const std::string group = "demo-r0-" + Revision(b);
    const json& gateway = Find(objects, "Deployment", "demo-gateway")["spec"]["template"]["spec"];
    const json& scheduler = Find(objects, "StatefulSet", group + "-sched")["spec"]["template"]["spec"];
    const json& worker = Find(objects, "StatefulSet", group)["spec"]["template"]["spec"];
    // The gateway waits for endpoint propagation, then drains, then has time to end streams and exit.
    EXPECT_EQ(PreStopSeconds(gateway), kGatewayPreStopSeconds);
    EXPECT_EQ(gateway["terminationGracePeriodSeconds"], kGatewayPreStopSeconds + drain + kShutdownMarginSeconds);
    EXPECT_EQ(PreStopSeconds(scheduler), 0);
    EXPECT_EQ(scheduler["terminationGracePeriodSeconds"], drain + kShutdownMarginSeconds);
    // Workers outlive their scheduler's drain: the batches it finishes need every stage.
    EXPECT_EQ(PreStopSeconds(worker), drain);
    EXPECT_GT(worker["terminationGracePeriodSeconds"].get<int>(), PreStopSeconds(worker));
    EXPECT_GE(worker["terminationGracePeriodSeconds"].get<int>(),
              scheduler["terminationGracePeriodSeconds"].get<int>());
  }
}

}  // namespace
}  // namespace orca::k8s
