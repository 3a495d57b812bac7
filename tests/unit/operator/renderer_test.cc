#include "services/operator/renderer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

std::vector<json> Render(const OrcaDeploymentBuilder& b) { return RenderDesiredObjects(Parse(b), RenderOptions{}); }

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
json FlagFile(const std::vector<json>& objects, const std::string& file) {
  const json& cm = Find(objects, "ConfigMap", "demo-config");
  auto docs = ParseYamlDocuments(cm["data"].value(file, std::string()));
  EXPECT_TRUE(docs.ok() && docs->size() == 1) << file;
  return docs.ok() && !docs->empty() ? (*docs)[0] : json();
}

struct TopologyCase {
  const char* name;
  OrcaDeploymentBuilder builder;
  std::vector<std::string> ids;
};

class TopologyTest : public ::testing::TestWithParam<TopologyCase> {};

TEST_P(TopologyTest, RendersExactlyTheseObjectsInApplyOrder) {
  EXPECT_THAT(Ids(Render(GetParam().builder)), ElementsAreArray(GetParam().ids));
}

INSTANTIATE_TEST_SUITE_P(
    Table, TopologyTest,
    ::testing::Values(TopologyCase{"OneReplica",
                                   OrcaDeploymentBuilder(),
                                   {"ConfigMap/demo-config", "Service/demo-r0-pipeline", "StatefulSet/demo-r0-pipeline",
                                    "Service/demo-r0-scheduler", "Deployment/demo-r0-scheduler", "Service/demo-gateway",
                                    "Deployment/demo-gateway"}},
                      TopologyCase{
                          "TwoReplicas",
                          OrcaDeploymentBuilder().Replicas(2).Pipeline(3),
                          {"ConfigMap/demo-config", "Service/demo-r0-pipeline", "StatefulSet/demo-r0-pipeline",
                           "Service/demo-r0-scheduler", "Deployment/demo-r0-scheduler", "Service/demo-r1-pipeline",
                           "StatefulSet/demo-r1-pipeline", "Service/demo-r1-scheduler", "Deployment/demo-r1-scheduler",
                           "Service/demo-gateway", "Deployment/demo-gateway"}},
                      TopologyCase{"ScaledToZero",
                                   OrcaDeploymentBuilder().Replicas(0),
                                   {"ConfigMap/demo-config", "Service/demo-gateway", "Deployment/demo-gateway"}},
                      TopologyCase{"WithServiceMonitor",
                                   OrcaDeploymentBuilder().Set("/spec/monitoring/serviceMonitor/enabled", true),
                                   {"ConfigMap/demo-config", "Service/demo-r0-pipeline", "StatefulSet/demo-r0-pipeline",
                                    "Service/demo-r0-scheduler", "Deployment/demo-r0-scheduler", "Service/demo-gateway",
                                    "Deployment/demo-gateway", "ServiceMonitor/demo"}}),
    [](const ::testing::TestParamInfo<TopologyCase>& info) { return std::string(info.param.name); });

struct ParallelismCase {
  int replicas;
  int pipeline;
  int tensor;
};

class ParallelismTest : public ::testing::TestWithParam<ParallelismCase> {};

TEST_P(ParallelismTest, EveryReplicaGetsItsOwnPipelineInStageOrder) {
  const auto [replicas, pipeline, tensor] = GetParam();
  const auto objects = Render(OrcaDeploymentBuilder().Replicas(replicas).Pipeline(pipeline).Tensor(tensor));
  std::vector<std::string> schedulers;
  for (int r = 0; r < replicas; ++r) {
    const std::string sts_name = absl::StrCat("demo-r", r, "-pipeline");
    const json& sts = Find(objects, "StatefulSet", sts_name);
    EXPECT_EQ(sts["spec"]["replicas"], pipeline);
    EXPECT_EQ(sts["spec"]["serviceName"], sts_name);
    EXPECT_EQ(sts["spec"]["podManagementPolicy"], "Parallel");
    EXPECT_EQ(Find(objects, "Service", sts_name)["spec"]["clusterIP"], "None");
    std::vector<std::string> stages;
    for (int i = 0; i < pipeline; ++i) {
      stages.push_back(absl::StrCat(sts_name, "-", i, ".", sts_name, ".team-a.svc.cluster.local:7100"));
    }
    const std::string joined = absl::StrJoin(stages, ",");
    const json worker = FlagFile(objects, absl::StrCat("worker-r", r, ".yaml"));
    EXPECT_EQ(worker["workers"], joined);
    EXPECT_EQ(worker["num-stages"], pipeline);
    EXPECT_EQ(worker["tensor-parallel"], tensor);
    EXPECT_EQ(worker["stage-from-hostname"], true);
    EXPECT_EQ(worker["scheduler"], absl::StrCat("demo-r", r, "-scheduler.team-a.svc.cluster.local:7000"));
    EXPECT_EQ(worker["deployment-id"], absl::StrCat("team-a.", sts_name));
    const json scheduler = FlagFile(objects, absl::StrCat("scheduler-r", r, ".yaml"));
    EXPECT_EQ(scheduler["workers"], joined);
    EXPECT_EQ(scheduler["listen"], "0.0.0.0:7000");
    schedulers.push_back(absl::StrCat("demo-r", r, "-scheduler.team-a.svc.cluster.local:7000"));
    const json& sched = Find(objects, "Deployment", absl::StrCat("demo-r", r, "-scheduler"));
    EXPECT_EQ(sched["spec"]["replicas"], 1);
    EXPECT_EQ(sched["spec"]["strategy"]["type"], "Recreate");
  }
  EXPECT_EQ(FlagFile(objects, "gateway.yaml")["schedulers"], absl::StrJoin(schedulers, ","));
}

INSTANTIATE_TEST_SUITE_P(Table, ParallelismTest,
                         ::testing::Values(ParallelismCase{1, 1, 1}, ParallelismCase{1, 4, 1}, ParallelismCase{2, 2, 2},
                                           ParallelismCase{3, 1, 4}, ParallelismCase{2, 8, 2}));

TEST(RendererTest, SchedulerFlagsCarryThePaperKnobs) {
  const auto objects = Render(OrcaDeploymentBuilder()
                                  .Set("/spec/scheduler/policy", "request-level")
                                  .Set("/spec/scheduler/maxBatchSize", 32)
                                  .Set("/spec/scheduler/kvSlots", 4096)
                                  .Set("/spec/scheduler/maxQueued", 77)
                                  .Set("/spec/scheduler/numWorkers", 3)
                                  .Set("/spec/model/servedModelName", "chat"));
  const json s = FlagFile(objects, "scheduler-r0.yaml");
  EXPECT_EQ(s["policy"], "request-level");
  EXPECT_EQ(s["max-bs"], 32);
  EXPECT_EQ(s["n-slots"], 4096);
  EXPECT_EQ(s["n-workers"], 3);
  EXPECT_EQ(s["max-queued-requests"], 77);
  EXPECT_EQ(s["model-name"], "chat");
  EXPECT_EQ(FlagFile(objects, "worker-r0.yaml")["n-slots"], 4096);
  EXPECT_EQ(FlagFile(objects, "gateway.yaml")["served-model-name"], "chat");
}

TEST(RendererTest, EveryFlagFileKeyIsAFlagOfItsBinary) {
  // docs/services.md is the contract; a key outside it would make the binary refuse its config.
  const std::map<std::string, std::set<std::string>> allowed = {
      {"worker",
       {"listen", "http-listen", "model", "dtype", "stage", "stage-from-hostname", "num-stages", "tensor-parallel",
        "workers", "scheduler", "deployment-id", "data-plane-host", "n-slots", "threads", "peer-timeout-ms"}},
      {"scheduler",
       {"listen", "http-listen", "workers", "model", "model-name", "policy", "max-bs", "n-slots", "n-workers",
        "max-queued-requests", "max-queued-tokens", "default-deadline-ms", "drain-grace-seconds", "worker-timeout-ms"}},
      {"gateway",
       {"listen", "grpc-listen", "schedulers", "model", "served-model-name", "api-keys", "api-keys-file",
        "max-body-bytes", "max-concurrent-requests", "chat-template", "max-model-len"}}};
  const auto objects = Render(OrcaDeploymentBuilder()
                                  .Replicas(2)
                                  .Set("/spec/worker/threads", 4)
                                  .Set("/spec/gateway/apiKeys", {{"secretName", "keys"}}));
  const json& data = Find(objects, "ConfigMap", "demo-config")["data"];
  ASSERT_EQ(data.size(), 5u);
  for (auto it = data.begin(); it != data.end(); ++it) {
    const std::string binary = it.key().substr(0, it.key().find_first_of("-."));
    const json flags = FlagFile(objects, it.key());
    for (auto f = flags.begin(); f != flags.end(); ++f) {
      EXPECT_TRUE(allowed.at(binary).count(f.key())) << it.key() << ": " << f.key();
    }
  }
}

TEST(RendererTest, ObjectsAreOwnedAndLabelled) {
  for (const json& o : Render(OrcaDeploymentBuilder().Set("/spec/monitoring/serviceMonitor/enabled", true))) {
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
  const auto objects = Render(OrcaDeploymentBuilder().Replicas(2));
  for (const json& o : objects) {
    if (o["kind"] != "StatefulSet" && o["kind"] != "Deployment") continue;
    const json& selector = o["spec"]["selector"]["matchLabels"];
    const json& pod_labels = o["spec"]["template"]["metadata"]["labels"];
    for (auto it = selector.begin(); it != selector.end(); ++it) EXPECT_EQ(pod_labels[it.key()], it.value());
  }
  // Replica 0's pipeline Service must not select replica 1's pods.
  EXPECT_EQ(Find(objects, "Service", "demo-r0-pipeline")["spec"]["selector"]["serving.orca.dev/replica"], "0");
  EXPECT_EQ(Find(objects, "Service", "demo-r1-scheduler")["spec"]["selector"]["serving.orca.dev/replica"], "1");
}

TEST(RendererTest, ConfigHashChangesOnlyForPodsWhoseFlagsChanged) {
  auto hash = [](const std::vector<json>& objects, const std::string& kind, const std::string& name) {
    return Find(objects, kind, name)["spec"]["template"]["metadata"]["annotations"][kConfigHashAnnotation];
  };
  const auto one = Render(OrcaDeploymentBuilder().Replicas(1));
  const auto two = Render(OrcaDeploymentBuilder().Replicas(2));
  // Scaling out must not restart the running replica.
  EXPECT_EQ(hash(one, "StatefulSet", "demo-r0-pipeline"), hash(two, "StatefulSet", "demo-r0-pipeline"));
  EXPECT_EQ(hash(one, "Deployment", "demo-r0-scheduler"), hash(two, "Deployment", "demo-r0-scheduler"));
  // The gateway's scheduler list did change.
  EXPECT_NE(hash(one, "Deployment", "demo-gateway"), hash(two, "Deployment", "demo-gateway"));
  const auto bigger = Render(OrcaDeploymentBuilder().Replicas(1).Set("/spec/scheduler/maxBatchSize", 64));
  EXPECT_NE(hash(one, "Deployment", "demo-r0-scheduler"), hash(bigger, "Deployment", "demo-r0-scheduler"));
}

TEST(RendererTest, RenderingIsPure) {
  const auto b = OrcaDeploymentBuilder().Replicas(3).Pipeline(2).Tensor(2);
  EXPECT_EQ(Render(b), Render(b));
}

TEST(RendererTest, SyntheticModelIsSynthesizedByAnInitContainer) {
  const auto objects = Render(OrcaDeploymentBuilder().Uri("synthetic://llama?layers=2&hidden=32&heads=2&seed=9"));
  for (const auto& [kind, name] : {std::pair{"StatefulSet", "demo-r0-pipeline"}, {"Deployment", "demo-gateway"}}) {
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
  EXPECT_FALSE(Find(objects, "Deployment", "demo-r0-scheduler")["spec"]["template"]["spec"].contains("initContainers"));
}

TEST(RendererTest, PvcModelIsMountedReadOnly) {
  const auto objects = Render(OrcaDeploymentBuilder().Uri("pvc://weights/llama"));
  const json& pod = Find(objects, "StatefulSet", "demo-r0-pipeline")["spec"]["template"]["spec"];
  EXPECT_FALSE(pod.contains("initContainers"));
  EXPECT_EQ(pod["volumes"].back()["persistentVolumeClaim"]["claimName"], "weights");
  EXPECT_EQ(pod["volumes"].back()["persistentVolumeClaim"]["readOnly"], true);
  EXPECT_EQ(FlagFile(objects, "worker-r0.yaml")["model"], "/models/llama");
  EXPECT_EQ(FlagFile(objects, "gateway.yaml")["model"], "/models/llama");
}

TEST(RendererTest, LocalPathNeedsNoVolume) {
  const auto objects = Render(OrcaDeploymentBuilder().Uri("/opt/models/tiny"));
  const json& pod = Find(objects, "StatefulSet", "demo-r0-pipeline")["spec"]["template"]["spec"];
  EXPECT_EQ(pod["volumes"].size(), 2u);  // config + tmp
  EXPECT_EQ(FlagFile(objects, "worker-r0.yaml")["model"], "/opt/models/tiny");
}

TEST(RendererTest, WorkersGetTheirResourcesAndPodIpForTheDataPlane) {
  const auto objects = Render(OrcaDeploymentBuilder()
                                  .Tensor(2)
                                  .Set("/spec/worker/resources/limits", {{"nvidia.com/gpu", 2}, {"memory", "16Gi"}})
                                  .Set("/spec/worker/nodeSelector", {{"gpu", "a100"}}));
  const json& pod = Find(objects, "StatefulSet", "demo-r0-pipeline")["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "2");
  EXPECT_EQ(c["resources"]["limits"]["memory"], "16Gi");
  EXPECT_EQ(pod["nodeSelector"]["gpu"], "a100");
  EXPECT_THAT(c["args"].dump(), HasSubstr("--data-plane-host=$(POD_IP)"));
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
  EXPECT_EQ(FlagFile(objects, "worker-r0.yaml")["device"], "cuda");  // GPU pods run the CUDA backend
  EXPECT_FALSE(FlagFile(Render(OrcaDeploymentBuilder()), "worker-r0.yaml").contains("device"));
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
  EXPECT_EQ(FlagFile(objects, "gateway.yaml")["api-keys-file"], "/etc/orca-secrets/keys.txt");
  EXPECT_EQ(FlagFile(objects, "gateway.yaml")["listen"], "0.0.0.0:8000");
  // With no engine replica the gateway scales to zero too.
  EXPECT_EQ(Find(Render(OrcaDeploymentBuilder().Replicas(0)), "Deployment", "demo-gateway")["spec"]["replicas"], 0);
}

TEST(RendererTest, ServiceMonitorScrapesEveryHttpPort) {
  const auto objects = Render(OrcaDeploymentBuilder().Set(
      "/spec/monitoring/serviceMonitor", {{"enabled", true}, {"interval", "15s"}, {"labels", {{"release", "kps"}}}}));
  const json& sm = Find(objects, "ServiceMonitor", "demo");
  EXPECT_EQ(sm["apiVersion"], "monitoring.coreos.com/v1");
  EXPECT_EQ(sm["metadata"]["labels"]["release"], "kps");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"], "http");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["interval"], "15s");
  for (const json& o : objects) {
    if (o["kind"] != "Service") continue;
    bool has_http = false;
    for (const json& p : o["spec"]["ports"]) has_http = has_http || p["name"] == "http";
    EXPECT_TRUE(has_http) << o["metadata"]["name"];
    for (auto it = sm["spec"]["selector"]["matchLabels"].begin(); it != sm["spec"]["selector"]["matchLabels"].end();
         ++it) {
      EXPECT_EQ(o["metadata"]["labels"][it.key()], it.value());
    }
  }
}

TEST(RendererTest, ClusterDomainIsConfigurable) {
  RenderOptions options;
  options.cluster_domain = "corp.internal";
  const OrcaDeployment d = Parse(OrcaDeploymentBuilder());
  EXPECT_EQ(StageAddress(d, 0, 1, options), "demo-r0-pipeline-1.demo-r0-pipeline.team-a.svc.corp.internal:7100");
  EXPECT_EQ(SchedulerAddress(d, 2, options), "demo-r2-scheduler.team-a.svc.corp.internal:7000");
}

}  // namespace
}  // namespace orca::k8s
