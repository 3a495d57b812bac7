// The distributed engine end to end (paper §4.1): real worker processes on
// loopback (one per pipeline stage, tensor-parallel shards as threads), Gloo
// for activations and all-reduces, gRPC for control. Greedy output must be
// token-identical to the single-process engine.

#include <sys/stat.h>

#include <future>
#include <thread>

#include "core/engine/engine.h"
#include "gtest/gtest.h"
#include "orca/v1/worker.grpc.pb.h"
#include "services/common/channels.h"
#include "tests/integration/cluster.h"
#include "tests/unit/engine/test_models.h"

namespace orca::testing {
namespace {

using engine::testing::SharedModelsDir;
using engine::testing::SmallGpt2;
using engine::testing::SmallLlama;
using engine::testing::SyntheticModel;

std::vector<int32_t> ReferenceGreedy(const std::string& model, const std::vector<int32_t>& prompt, int n) {
  engine::Engine::Options o;
  o.model_path = model;
  o.n_slots = static_cast<int64_t>(prompt.size()) + n + 16;
  auto engine = engine::Engine::Create(o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::vector<int32_t> out;
  engine::StepInput in;
  in.seqs.push_back({1, prompt, 0, true, engine::SequenceSetup{static_cast<int32_t>(prompt.size()) + n, {}, prompt}});
  int32_t pos = 0;
  for (int i = 0; i < n; ++i) {
    engine::StepOutput r;
    EXPECT_TRUE((*engine)->Step(in, nullptr, &r).ok());
    out.push_back(r.samples[0].sample.token_id);
    pos += static_cast<int32_t>(in.seqs[0].token_ids.size());
    in.seqs[0] = {1, {out.back()}, pos, true, std::nullopt};
  }
  return out;
}

struct Topology {
  const char* name;
  int pipeline;  // 0 = in-process engine in the scheduler
  int tensor;
};

std::string ModelPath(const std::string& which) {
  if (which == "llama") {
    engine::SyntheticModelOptions o = SmallLlama(DType::kF32);
    o.num_layers = 4;
    o.vocab_size = 400;
    return SyntheticModel(o);
  }
  if (which == "gpt2") return SyntheticModel(SmallGpt2(DType::kF32));
  return SharedModelsDir() + "/stories260K.gguf";
}

class PipelineTest : public ::testing::TestWithParam<std::tuple<std::string, Topology>> {};

TEST_P(PipelineTest, GreedyOutputIsTokenIdenticalToTheSingleProcessEngine) {
  const auto& [model_name, topo] = GetParam();
  const std::string model = ModelPath(model_name);
  struct stat st {};
  if (::stat(model.c_str(), &st) != 0) GTEST_SKIP() << model << " is absent";
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3, 4, 5, 6, 7}, {42}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12, 13}, {100, 200}};
  const int n = 24;
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(ReferenceGreedy(model, p, n));

  ClusterOptions co;
  co.model = model;
  co.pipeline = topo.pipeline;
  co.tensor_parallel = topo.tensor;
  co.name = std::string(topo.name) + "-" + model_name;
  Cluster cluster(co);
  ASSERT_TRUE(cluster.Start()) << cluster.Logs();
  auto stub = cluster.NewStub();
  // Concurrent requests: they share iterations (selective batching) across the pipeline.
  std::vector<std::future<GenerateResult>> futures;
  for (const auto& p : prompts)
    futures.push_back(std::async(std::launch::async, [&, p] { return Generate(stub.get(), p, n); }));
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateResult r = futures[i].get();
    ASSERT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << cluster.Logs();
    EXPECT_EQ(r.finish, v1::FINISH_REASON_LENGTH) << r.error;
    EXPECT_EQ(r.tokens, want[i]) << "prompt " << i << "\n" << cluster.Logs();
  }
  // Every slot came back (stats are published once per scheduler round).
  v1::SchedulerStats stats = SettledStats(stub.get());
  EXPECT_EQ(stats.kv_slots_used(), 0);
  EXPECT_EQ(stats.num_requests_running(), 0);
}

INSTANTIATE_TEST_SUITE_P(Topologies, PipelineTest,
                         ::testing::Values(std::make_tuple("llama", Topology{"inproc", 0, 1}),
                                           std::make_tuple("llama", Topology{"pp1", 1, 1}),
                                           std::make_tuple("llama", Topology{"pp2", 2, 1}),
                                           std::make_tuple("llama", Topology{"tp2", 1, 2}),
                                           std::make_tuple("llama", Topology{"pp2tp2", 2, 2}),
                                           std::make_tuple("gpt2", Topology{"pp2", 2, 1}),
                                           std::make_tuple("gpt2", Topology{"tp2", 1, 2}),
                                           std::make_tuple("gpt2", Topology{"pp2tp2", 2, 2}),
                                           std::make_tuple("stories260K", Topology{"pp2", 2, 1}),
                                           std::make_tuple("stories260K", Topology{"pp2tp2", 2, 2})),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param).name; });

// Issue 45: every internal port of a running pipeline (the scheduler's and each worker's)
// wants the cluster's internal token. The pipeline forms only because every process sends
// it (workers to the scheduler's rendezvous, the scheduler to the workers, stage 0 to
// stage 1); a caller without it, or with another, is refused on every port, and a Control
// message that would start a new session (which failed live streams before) changes nothing.
TEST(InternalAuthTest, EveryInternalPortOfARunningPipelineWantsTheToken) {
  ClusterOptions co;
  co.model = ModelPath("llama");
  co.pipeline = 2;
  co.name = "auth";
  Cluster cluster(co);
  ASSERT_TRUE(cluster.Start()) << cluster.Logs();
  auto stub = cluster.NewStub();
  GenerateResult before = Generate(stub.get(), {1, 2, 3}, 4);
  ASSERT_TRUE(before.status.ok()) << before.status.error_message() << cluster.Logs();

  const std::string wrong = "Bearer not-the-cluster-token-0123456789";
  for (const std::string& authorization : {std::string(), wrong}) {
    const char* who = authorization.empty() ? "no credential" : "a wrong token";
    auto anyone = cluster.NewUnauthenticatedStub();
    grpc::ClientContext gen_ctx;
    if (!authorization.empty()) gen_ctx.AddMetadata("authorization", authorization);
    v1::GenerateRequest req;
    req.add_prompt_token_ids(1);
    req.set_max_new_tokens(4);
    auto reader = anyone->Generate(&gen_ctx, req);
    v1::GenerateResponse resp;
    while (reader->Read(&resp)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED) << who << ": Generate";
    {
      grpc::ClientContext ctx;
      if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
      v1::CancelRequest cancel;
      cancel.set_request_id("someone-elses");
      v1::CancelResponse out;
      EXPECT_EQ(anyone->Cancel(&ctx, cancel, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED) << who;
    }
    {
      grpc::ClientContext ctx;
      if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
      v1::StoreSetRequest set;
      set.set_key("auth/session/1/rank0");
      set.set_value("attacker");
      v1::StoreSetResponse out;
      EXPECT_EQ(anyone->StoreSet(&ctx, set, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED) << who;
    }
    {
      grpc::ClientContext ctx;
      if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
      v1::SchedulerStats stats;
      EXPECT_EQ(anyone->GetStats(&ctx, v1::StatsRequest(), &stats).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    }
    for (int stage = 0; stage < co.pipeline; ++stage) {
      auto worker =
          v1::Worker::NewStub(grpc::CreateChannel(cluster.worker_address(stage), grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
      v1::ControlSummary summary;
      auto control = worker->Control(&ctx, &summary);
      v1::ControlMessage reset;
      reset.set_session_id(999999);
      control->Write(reset);
      control->WritesDone();
      EXPECT_EQ(control->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED) << who << ": stage " << stage;
      grpc::ClientContext info_ctx;
      if (!authorization.empty()) info_ctx.AddMetadata("authorization", authorization);
      v1::WorkerInfo info;
      EXPECT_EQ(worker->GetInfo(&info_ctx, v1::WorkerInfoRequest(), &info).error_code(),
                grpc::StatusCode::UNAUTHENTICATED)
          << who << ": stage " << stage;
    }
  }
  // Nothing reached the pipeline: no new session, and it still serves.
  for (int stage = 0; stage < co.pipeline; ++stage) {
    auto worker =
        v1::Worker::NewStub(services::CreateInternalChannel(cluster.worker_address(stage), cluster.internal_auth()));
    grpc::ClientContext ctx;
    v1::WorkerInfo info;
    ASSERT_TRUE(worker->GetInfo(&ctx, v1::WorkerInfoRequest(), &info).ok());
    EXPECT_NE(info.session_id(), 999999u) << "stage " << stage;
  }
  GenerateResult after = Generate(stub.get(), {1, 2, 3}, 4);
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  EXPECT_EQ(after.tokens, before.tokens);
}

}  // namespace
}  // namespace orca::testing
