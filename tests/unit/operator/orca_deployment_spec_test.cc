#include "services/operator/orca_deployment_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/operator/orca_deployment_builder.h"

namespace orca::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::OrcaDeploymentBuilder;

TEST(OrcaDeploymentSpecTest, MinimalSpecGetsTheCrdDefaults) {
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder("chat", "ns1").Build());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "chat");
  EXPECT_EQ(d->namespace_, "ns1");
  EXPECT_EQ(d->replicas, 1);
  EXPECT_EQ(d->pipeline, 1);
  EXPECT_EQ(d->tensor, 1);
  EXPECT_EQ(d->model.served_model_name, "chat");  // defaults to the object's name
  EXPECT_EQ(d->model.format, "hf");
  EXPECT_EQ(d->model.dtype, "auto");
  EXPECT_EQ(d->image.Reference(), "ghcr.io/orca-serving/orca:0.1.0");
  EXPECT_EQ(d->image.pull_policy, "IfNotPresent");
  EXPECT_EQ(d->scheduler.policy, "orca");
  EXPECT_EQ(d->scheduler.max_batch_size, 16);
  EXPECT_EQ(d->scheduler.kv_slots, 8192);
  EXPECT_EQ(d->scheduler.max_queued, 1024);
  EXPECT_EQ(d->scheduler.num_workers, 0);
  EXPECT_EQ(d->gateway.replicas, 1);
  EXPECT_EQ(d->gateway.service_type, "ClusterIP");
  EXPECT_EQ(d->gateway.port, 8000);
  EXPECT_FALSE(d->monitoring.service_monitor);
  EXPECT_EQ(d->monitoring.interval, "30s");
}

TEST(OrcaDeploymentSpecTest, KvSlotsAreDerivedFromTheMemoryBudget) {
  // llama, 4 layers, hidden 64, 4 heads (head_dim 16), 2 kv heads, f32:
  // 2 * 4 * 2 * 16 * 4 = 1024 bytes per token.
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder().Set("/spec/scheduler/kvMemory", {{"size", "1Mi"}}).Build());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.kv_bytes_per_token, 1024);
  EXPECT_EQ(d->scheduler.kv_slots, 1024);
  auto explicit_rate =
      ParseOrcaDeployment(OrcaDeploymentBuilder()
                              .Uri("pvc://models/llama")
                              .Set("/spec/scheduler/kvMemory", {{"size", "4Gi"}, {"bytesPerToken", 131072}})
                              .Build());
  ASSERT_TRUE(explicit_rate.ok()) << explicit_rate.status();
  EXPECT_EQ(explicit_rate->scheduler.kv_slots, 32768);
  EXPECT_EQ(*explicit_rate->scheduler.kv_memory_bytes, int64_t{4} << 30);
}

TEST(OrcaDeploymentSpecTest, SchedulingKnobsDefaultToTheBinariesDefaults) {
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder().Build());
  ASSERT_TRUE(d.ok()) << d.status();
  // orca-scheduler's and orca-worker's own defaults (services/scheduler/main.cc, services/worker/main.cc).
  EXPECT_EQ(d->scheduler.kv_block_size, 16);
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 0);
  EXPECT_FALSE(d->scheduler.enable_prefix_caching);
  EXPECT_EQ(d->scheduler.scheduling_order, "fcfs");
  EXPECT_EQ(d->scheduler.priority_aging_ms, 1000);
  EXPECT_EQ(d->scheduler.drain_grace_seconds, 30);
  EXPECT_EQ(d->gateway.drain_grace_seconds, 30);
  EXPECT_FALSE(d->scheduler.api_keys.enabled());
  EXPECT_EQ(d->scheduler.api_keys.key, "scheduler-api-keys");
}

TEST(OrcaDeploymentSpecTest, SchedulingKnobsAreRead) {
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder()
                                   .Set("/spec/scheduler/policy", "paged")
                                   .Set("/spec/scheduler/kvBlockSize", 32)
                                   .Set("/spec/scheduler/kvSlots", 4096)
                                   .Set("/spec/scheduler/maxNumBatchedTokens", 512)
                                   .Set("/spec/scheduler/maxPrefillSlowdown", 2.5)
                                   .Set("/spec/scheduler/longPrefillTokenThreshold", 128)
                                   .Set("/spec/scheduler/enablePrefixCaching", true)
                                   .Set("/spec/scheduler/schedulingOrder", "priority")
                                   .Set("/spec/scheduler/priorityAgingMs", 0)
                                   .Set("/spec/scheduler/drainGraceSeconds", 120)
                                   .Set("/spec/scheduler/apiKeys", {{"secretName", "sched-auth"}})
                                   .Set("/spec/gateway/drainGraceSeconds", 0)
                                   .Build());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.policy, "paged");
  EXPECT_EQ(d->scheduler.kv_block_size, 32);
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 512);
  EXPECT_EQ(d->scheduler.max_prefill_slowdown, 2.5);
  EXPECT_EQ(d->scheduler.long_prefill_token_threshold, 128);
  EXPECT_TRUE(d->scheduler.enable_prefix_caching);
  EXPECT_EQ(d->scheduler.scheduling_order, "priority");
  EXPECT_EQ(d->scheduler.priority_aging_ms, 0);
  EXPECT_EQ(d->scheduler.drain_grace_seconds, 120);
  EXPECT_EQ(d->scheduler.api_keys.secret_name, "sched-auth");
  EXPECT_EQ(d->scheduler.api_keys.key, "scheduler-api-keys");
  EXPECT_EQ(d->gateway.drain_grace_seconds, 0);
  // The edges the scheduler accepts: a chunk of exactly maxBatchSize tokens, 256-token blocks.
  EXPECT_TRUE(ParseOrcaDeployment(OrcaDeploymentBuilder().Set("/spec/scheduler/maxNumBatchedTokens", 16).Build()).ok());
  EXPECT_TRUE(ParseOrcaDeployment(OrcaDeploymentBuilder().Set("/spec/scheduler/kvBlockSize", 256).Build()).ok());
}

TEST(OrcaDeploymentSpecTest, SlotsFromMemoryAreWholeBlocks) {
  // 1Mi + 5000 bytes at 1024 bytes per token = 1028 tokens, rounded down to 1024 (64 blocks of 16)...
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder().Set("/spec/scheduler/kvMemory", {{"size", 1053576}}).Build());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.kv_slots, 1024);
  // ... or to 1000 with blocks of 40 (25 blocks).
  auto forty = ParseOrcaDeployment(OrcaDeploymentBuilder()
                                       .Set("/spec/scheduler/kvBlockSize", 40)
                                       .Set("/spec/scheduler/kvMemory", {{"size", 1053576}})
                                       .Build());
  ASSERT_TRUE(forty.ok()) << forty.status();
  EXPECT_EQ(forty->scheduler.kv_slots, 1000);
}

TEST(OrcaDeploymentSpecTest, ModelUriForms) {
  auto pvc = ParseOrcaDeployment(OrcaDeploymentBuilder().Uri("pvc://weights/llama-3-8b/").Build());
  ASSERT_TRUE(pvc.ok()) << pvc.status();
  EXPECT_EQ(pvc->model.source.kind, ModelSource::Kind::kPvc);
  EXPECT_EQ(pvc->model.source.claim, "weights");
  EXPECT_EQ(pvc->model.source.ContainerModelPath(), "/models/llama-3-8b");
  auto file = ParseOrcaDeployment(OrcaDeploymentBuilder().Uri("file:///opt/models/tiny").Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->model.source.ContainerModelPath(), "/opt/models/tiny");
  auto gguf =
      ParseOrcaDeployment(OrcaDeploymentBuilder().Uri("/models/q.gguf").Set("/spec/model/format", "gguf").Build());
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  auto synth = ParseOrcaDeployment(OrcaDeploymentBuilder().Uri("synthetic://gpt2?layers=2&hidden=32&heads=2").Build());
  ASSERT_TRUE(synth.ok()) << synth.status();
  EXPECT_EQ(synth->model.source.synthetic.arch, "gpt2");
  EXPECT_EQ(synth->model.source.ContainerModelPath(), "/models/synthetic");
}

struct InvalidCase {
  const char* name;
  OrcaDeploymentBuilder builder;
  const char* message;  // a substring of the error
};

class InvalidSpecTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidSpecTest, IsRejectedWithAPreciseMessage) {
  auto d = ParseOrcaDeployment(GetParam().builder.Build());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidSpecTest,
    ::testing::Values(
        InvalidCase{"NoModel", OrcaDeploymentBuilder().Remove("/spec/model/uri"), "spec.model.uri: is required"},
        InvalidCase{"ZeroPipeline", OrcaDeploymentBuilder().Pipeline(0),
                    "spec.parallelism.pipeline: must be in [1, 64], got 0"},
        InvalidCase{"HugeTensor", OrcaDeploymentBuilder().Tensor(32),
                    "spec.parallelism.tensor: must be in [1, 16], got 32"},
        InvalidCase{"NegativeReplicas", OrcaDeploymentBuilder().Replicas(-1), "spec.replicas: must be in [0, 64]"},
        InvalidCase{"StringReplicas", OrcaDeploymentBuilder().Set("/spec/replicas", "two"),
                    "spec.replicas: must be an integer"},
        InvalidCase{"BadPolicy", OrcaDeploymentBuilder().Set("/spec/scheduler/policy", "fifo"),
                    "spec.scheduler.policy: must be one of orca, paged, request-level; got 'fifo'"},
        InvalidCase{"SlotsNotWholeBlocks", OrcaDeploymentBuilder().Set("/spec/scheduler/kvSlots", 8200),
                    "spec.scheduler.kvSlots: 8200 is not a multiple of kvBlockSize (16)"},
        InvalidCase{"DefaultSlotsNotWholeBlocks", OrcaDeploymentBuilder().Set("/spec/scheduler/kvBlockSize", 48),
                    "spec.scheduler.kvBlockSize: the default kvSlots (8192) is not a multiple of kvBlockSize (48)"},
        InvalidCase{"BlockSizeAboveTheEngines", OrcaDeploymentBuilder().Set("/spec/scheduler/kvBlockSize", 512),
                    "spec.scheduler.kvBlockSize: must be in [1, 256], got 512"},
        InvalidCase{"TooManyBlocksForAWorker", OrcaDeploymentBuilder().Set("/spec/scheduler/kvSlots", int64_t{1} << 32),
                    "4294967296 KV slots, 268435456 blocks of 16 tokens: at most 134217727 blocks fit"},
        InvalidCase{"TooManyBlocksForThePagedPool",
                    OrcaDeploymentBuilder()
                        .Set("/spec/scheduler/policy", "paged")
                        .Set("/spec/scheduler/kvBlockSize", 1)
                        .Set("/spec/scheduler/kvSlots", int64_t{1} << 30),
                    "and 1073741823 the paged block pool"},
        InvalidCase{"ChunkSmallerThanTheBatch", OrcaDeploymentBuilder().Set("/spec/scheduler/maxNumBatchedTokens", 8),
                    "spec.scheduler.maxNumBatchedTokens: must be 0 (off) or at least maxBatchSize (16)"},
        InvalidCase{"NegativeChunk", OrcaDeploymentBuilder().Set("/spec/scheduler/maxNumBatchedTokens", -1),
                    "spec.scheduler.maxNumBatchedTokens: must be in [0, 2147483647], got -1"},
        InvalidCase{"BaselineWithChunks",
                    OrcaDeploymentBuilder()
                        .Set("/spec/scheduler/policy", "request-level")
                        .Set("/spec/scheduler/maxNumBatchedTokens", 512),
                    "spec.scheduler.policy: the request-level baseline takes neither maxNumBatchedTokens"},
        InvalidCase{"SlowdownNotAboveOne", OrcaDeploymentBuilder().Set("/spec/scheduler/maxPrefillSlowdown", 0.5),
                    "spec.scheduler.maxPrefillSlowdown: must be 0 (off) or in (1, 1000], got 0.5"},
        InvalidCase{"SlowdownNotANumber", OrcaDeploymentBuilder().Set("/spec/scheduler/maxPrefillSlowdown", "2"),
                    "spec.scheduler.maxPrefillSlowdown: must be a number, got \"2\""},
        InvalidCase{"BaselineWithATimeBudget",
                    OrcaDeploymentBuilder()
                        .Set("/spec/scheduler/policy", "request-level")
                        .Set("/spec/scheduler/maxPrefillSlowdown", 2),
                    "spec.scheduler.policy: the request-level baseline takes neither maxNumBatchedTokens, "
                    "maxPrefillSlowdown"},
        InvalidCase{"BaselineWithALongPrefillCap",
                    OrcaDeploymentBuilder()
                        .Set("/spec/scheduler/policy", "request-level")
                        .Set("/spec/scheduler/longPrefillTokenThreshold", 64),
                    "longPrefillTokenThreshold nor schedulingOrder priority"},
        InvalidCase{"NegativeLongPrefillCap", OrcaDeploymentBuilder().Set("/spec/scheduler/longPrefillTokenThreshold", -1),
                    "spec.scheduler.longPrefillTokenThreshold: must be in [0, 2147483647], got -1"},
        InvalidCase{"BaselineWithPriorities",
                    OrcaDeploymentBuilder()
                        .Set("/spec/scheduler/policy", "request-level")
                        .Set("/spec/scheduler/schedulingOrder", "priority"),
                    "nor schedulingOrder priority"},
        InvalidCase{"SchedulingOrder", OrcaDeploymentBuilder().Set("/spec/scheduler/schedulingOrder", "lifo"),
                    "spec.scheduler.schedulingOrder: must be one of fcfs, priority; got 'lifo'"},
        InvalidCase{"NegativeAging", OrcaDeploymentBuilder().Set("/spec/scheduler/priorityAgingMs", -5),
                    "spec.scheduler.priorityAgingMs: must be in [0, "},
        InvalidCase{"PrefixCachingNotABool", OrcaDeploymentBuilder().Set("/spec/scheduler/enablePrefixCaching", "yes"),
                    "spec.scheduler.enablePrefixCaching: must be true or false"},
        InvalidCase{"SchedulerDrain", OrcaDeploymentBuilder().Set("/spec/scheduler/drainGraceSeconds", 7200),
                    "spec.scheduler.drainGraceSeconds: must be in [0, 3600], got 7200"},
        InvalidCase{"GatewayDrain", OrcaDeploymentBuilder().Set("/spec/gateway/drainGraceSeconds", -1),
                    "spec.gateway.drainGraceSeconds: must be in [0, 3600], got -1"},
        InvalidCase{"SchedulerKeysSecret", OrcaDeploymentBuilder().Set("/spec/scheduler/apiKeys", {{"key", "k"}}),
                    "spec.scheduler.apiKeys.secretName: is required"},
        InvalidCase{"SchedulerKeysKey",
                    OrcaDeploymentBuilder().Set("/spec/scheduler/apiKeys", {{"secretName", "s"}, {"key", ""}}),
                    "spec.scheduler.apiKeys.key: must not be empty"},
        InvalidCase{"SlotsBelowBatch",
                    OrcaDeploymentBuilder().Set("/spec/scheduler/kvSlots", 8).Set("/spec/scheduler/maxBatchSize", 16),
                    "gives 8 KV slots, fewer than maxBatchSize (16)"},
        InvalidCase{"SlotsAndMemory",
                    OrcaDeploymentBuilder()
                        .Set("/spec/scheduler/kvSlots", 64)
                        .Set("/spec/scheduler/kvMemory", {{"size", "1Gi"}}),
                    "set kvSlots or kvMemory, not both"},
        InvalidCase{"MemoryWithoutRate",
                    OrcaDeploymentBuilder().Uri("pvc://m/x").Set("/spec/scheduler/kvMemory", {{"size", "1Gi"}}),
                    "spec.scheduler.kvMemory.bytesPerToken: is required unless the model is synthetic://"},
        InvalidCase{"BadQuantity", OrcaDeploymentBuilder().Set("/spec/scheduler/kvMemory", {{"size", "lots"}}),
                    "spec.scheduler.kvMemory.size: 'lots' is not a quantity"},
        InvalidCase{"TinyMemory", OrcaDeploymentBuilder().Set("/spec/scheduler/kvMemory", {{"size", "100"}}),
                    "100 bytes hold no KV block of 16 tokens at 1024 bytes per token"},
        InvalidCase{"HttpUri", OrcaDeploymentBuilder().Uri("https://huggingface.co/x"),
                    "spec.model.uri: 'https://huggingface.co/x' is not supported"},
        InvalidCase{"BadClaim", OrcaDeploymentBuilder().Uri("pvc://Bad_Claim/x"),
                    "is not a valid PersistentVolumeClaim name"},
        InvalidCase{"DotDot", OrcaDeploymentBuilder().Uri("pvc://c/../etc"), "must not contain '..'"},
        InvalidCase{"SynthArch", OrcaDeploymentBuilder().Uri("synthetic://mamba"),
                    "synthetic architecture must be llama or gpt2"},
        InvalidCase{"SynthParam", OrcaDeploymentBuilder().Uri("synthetic://llama?layerz=2"),
                    "unknown synthetic parameter 'layerz'"},
        InvalidCase{"SynthHeads", OrcaDeploymentBuilder().Uri("synthetic://llama?hidden=60&heads=8"),
                    "must be divisible by heads"},
        InvalidCase{"SynthGqa", OrcaDeploymentBuilder().Uri("synthetic://llama?heads=4&kvHeads=3"),
                    "must be a multiple of kvHeads"},
        InvalidCase{"GgufNeedsFile", OrcaDeploymentBuilder().Uri("/models/dir").Set("/spec/model/format", "gguf"),
                    "needs the path of a .gguf file"},
        InvalidCase{"GpusNotTensor",
                    OrcaDeploymentBuilder().Tensor(2).Set("/spec/worker/resources/limits", {{"nvidia.com/gpu", 1}}),
                    "spec.worker.resources.limits[nvidia.com/gpu]: is 1 but parallelism.tensor is 2"},
        InvalidCase{"BadCpu", OrcaDeploymentBuilder().Set("/spec/worker/resources/requests", {{"cpu", "two"}}),
                    "spec.worker.resources.requests[cpu]: 'two' is not a quantity"},
        InvalidCase{"ServiceType", OrcaDeploymentBuilder().Set("/spec/gateway/service/type", "Ingress"),
                    "spec.gateway.service.type: must be one of ClusterIP, NodePort, LoadBalancer"},
        InvalidCase{"Port", OrcaDeploymentBuilder().Set("/spec/gateway/service/port", 70000),
                    "spec.gateway.service.port: must be in [1, 65535]"},
        InvalidCase{"ApiKeysSecret", OrcaDeploymentBuilder().Set("/spec/gateway/apiKeys", {{"key", "k"}}),
                    "spec.gateway.apiKeys.secretName: is required"},
        InvalidCase{"Interval", OrcaDeploymentBuilder().Set("/spec/monitoring/serviceMonitor/interval", "soon"),
                    "'soon' is not a duration"},
        InvalidCase{"PullPolicy", OrcaDeploymentBuilder().Set("/spec/image/pullPolicy", "Sometimes"),
                    "spec.image.pullPolicy: must be one of"},
        InvalidCase{"NotAnObject", OrcaDeploymentBuilder().Set("/spec/scheduler", 3),
                    "spec.scheduler: must be an object"},
        InvalidCase{"LongName", OrcaDeploymentBuilder("a-very-long-orca-deployment-name-for-tests-x").Replicas(10),
                    "StatefulSet 'a-very-long-orca-deployment-name-for-tests-x-r9-xxxxxxxx-sched' would have 62 "
                    "characters, the limit is 52"},
        InvalidCase{"NameOneTooLongFor10", OrcaDeploymentBuilder(std::string(35, 'a')).Replicas(10),
                    "would have 53 characters"},
        InvalidCase{"NameOneTooLongFor11", OrcaDeploymentBuilder(std::string(34, 'a')).Replicas(11),
                    "would have 53 characters"},
        InvalidCase{
            "NvidiaVisibleDevices",
            OrcaDeploymentBuilder().Set("/spec/worker/env", {{{"name", "A"}, {"value", "1"}},
                                                             {{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", "all"}}}),
            "spec.worker.env[1]: NVIDIA_VISIBLE_DEVICES is set by the NVIDIA device plugin"},
        InvalidCase{"EnvWithoutName", OrcaDeploymentBuilder().Set("/spec/gateway/env", {{{"value", "1"}}}),
                    "spec.gateway.env[0]: needs a non-empty name"},
        InvalidCase{"ArgNotAFlag", OrcaDeploymentBuilder().Set("/spec/scheduler/args", {"max-bs=4"}),
                    "spec.scheduler.args[0]: must be a flag starting with --"},
        InvalidCase{"ArgReplacesConfig", OrcaDeploymentBuilder().Set("/spec/worker/args", {"--config=/x.yaml"}),
                    "spec.worker.args[0]: --config is the rendered flag file"},
        InvalidCase{"NoRolloutBudget",
                    OrcaDeploymentBuilder().Set("/spec/rollout", {{"maxUnavailable", 0}, {"maxSurge", 0}}),
                    "spec.rollout: maxUnavailable and maxSurge cannot both be 0"},
        InvalidCase{"TinyShm", OrcaDeploymentBuilder().Set("/spec/worker/shmSize", "64Ki"),
                    "spec.worker.shmSize: must be at least 1Mi"},
        InvalidCase{"CudaRepository", OrcaDeploymentBuilder().Set("/spec/image/cudaRepository", ""),
                    "spec.image.cudaRepository: must not be empty"},
        InvalidCase{"UpperName", OrcaDeploymentBuilder("Chat"), "metadata.name: 'Chat' must be a DNS label"}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return std::string(info.param.name); });

TEST(OrcaDeploymentSpecTest, LongestNamesThatFit) {
  EXPECT_TRUE(ParseOrcaDeployment(OrcaDeploymentBuilder(std::string(34, 'a')).Replicas(10).Build()).ok());
  EXPECT_TRUE(ParseOrcaDeployment(OrcaDeploymentBuilder(std::string(33, 'a')).Replicas(11).Build()).ok());
  EXPECT_TRUE(ParseOrcaDeployment(OrcaDeploymentBuilder(std::string(33, 'a')).Replicas(64).Build()).ok());
}

TEST(OrcaDeploymentSpecTest, ExtrasRolloutAndGpuSettings) {
  auto d = ParseOrcaDeployment(OrcaDeploymentBuilder()
                                   .Tensor(2)
                                   .Set("/spec/worker/resources/limits", {{"nvidia.com/gpu", 2}})
                                   .Set("/spec/worker/shmSize", "8Gi")
                                   .Set("/spec/worker/runtimeClassName", "nvidia")
                                   .Set("/spec/worker/env", {{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}})
                                   .Set("/spec/worker/args", {"--peer-timeout-ms=20000"})
                                   .Set("/spec/rollout", {{"maxUnavailable", 0}, {"maxSurge", 1}})
                                   .Set("/spec/networkPolicy/enabled", true)
                                   .Build());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->UsesGpus());
  EXPECT_EQ(d->worker.shm_size, "8Gi");
  EXPECT_EQ(d->worker.runtime_class_name, "nvidia");
  EXPECT_EQ(d->worker.extras.env.size(), 1u);
  EXPECT_EQ(d->worker.extras.args, std::vector<std::string>{"--peer-timeout-ms=20000"});
  EXPECT_EQ(d->rollout.max_unavailable, 0);
  EXPECT_EQ(d->rollout.max_surge, 1);
  EXPECT_TRUE(d->network_policy);
  EXPECT_EQ(d->image.CudaReference(), "ghcr.io/orca-serving/orca-cuda:0.1.0");
  auto cpu = ParseOrcaDeployment(OrcaDeploymentBuilder().Build());
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->UsesGpus());
  EXPECT_EQ(cpu->rollout.max_unavailable, 1);  // the CRD's defaults
  EXPECT_EQ(cpu->rollout.max_surge, 0);
  EXPECT_EQ(cpu->worker.shm_size, "1Gi");
}

TEST(OrcaDeploymentSpecTest, ReportsEveryProblemAtOnce) {
  auto d =
      ParseOrcaDeployment(OrcaDeploymentBuilder().Pipeline(0).Tensor(0).Set("/spec/scheduler/policy", "x").Build());
  ASSERT_FALSE(d.ok());
  const std::string message(d.status().message());
  EXPECT_THAT(message, HasSubstr("spec.parallelism.pipeline"));
  EXPECT_THAT(message, HasSubstr("spec.parallelism.tensor"));
  EXPECT_THAT(message, HasSubstr("spec.scheduler.policy"));
}

TEST(OrcaDeploymentSpecTest, NonObjectsAreRejectedNotCrashedOn) {
  EXPECT_FALSE(ParseOrcaDeployment(json::array()).ok());
  EXPECT_FALSE(ParseOrcaDeployment(json("x")).ok());
  EXPECT_FALSE(ParseOrcaDeployment(json{{"metadata", {{"name", "x"}}}}).ok());
  EXPECT_FALSE(ParseOrcaDeployment(json{{"metadata", 5}, {"spec", {{"model", "x"}}}}).ok());
}

}  // namespace
}  // namespace orca::k8s
