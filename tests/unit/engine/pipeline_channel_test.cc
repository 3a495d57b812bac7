// PipelineChannel's host path (the CPU engine's, core/engine/pipeline_channel.h): two CPU
// stages run iterations the way two workers do (RunStageIteration: frame header and
// activations over Gloo) and match the whole model; a stage's failure reaches the next stage
// as its frame; CPU engines refuse device links. The device path (NCCL) is
// pipeline_data_plane_test's.

#include "core/engine/pipeline_channel.h"

#include <gloo/rendezvous/store.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "core/engine/gloo_communicator.h"
#include "core/engine/synthetic_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using testing::TempDir;

class PipelineChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelOptions m;
    m.arch = ModelArch::kLlama;
    m.hidden_size = 64, m.num_layers = 2, m.num_heads = 4, m.num_kv_heads = 2, m.intermediate_size = 96;
    m.vocab_size = 97, m.max_position = 64, m.dtype = DType::kF32, m.seed = 3;
    dir_ = absl::StrCat(TempDir(), "/pipeline-channel");
    ASSERT_TRUE(WriteSyntheticCheckpoint(m, dir_).ok());
  }

  std::unique_ptr<Engine> MakeEngine(int stage, int num_stages) {
    Engine::Options o;
    o.model_path = dir_;
    o.n_slots = 256;
    o.num_threads = 1;
    o.keep_logits = true;
    o.stage = stage;
    o.num_stages = num_stages;
    auto e = Engine::Create(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }

  void Connect() {
    for (int s = 0; s < 2; ++s) stages_.push_back(MakeEngine(s, 2));
    channels_.resize(2);
    std::vector<std::thread> threads;
    for (int s = 0; s < 2; ++s)
      threads.emplace_back([&, s] {
        PipelineChannel::Options o;
        o.store = store_.get();
        o.prefix = "session";
        o.stage = s;
        o.num_stages = 2;
        o.timeout = std::chrono::seconds(30);
        o.op_timeout = std::chrono::seconds(30);
        o.engine = stages_[s].get();
        auto c = PipelineChannel::Create(o);
        EXPECT_TRUE(c.ok()) << c.status();
        if (c.ok()) channels_[s] = std::move(*c);
      });
    for (auto& t : threads) t.join();
  }

  std::vector<StageIteration> Run(const StepInput& in) {
    std::vector<StageIteration> its(2);
    std::thread first([&] { its[0] = RunStageIteration(*stages_[0], channels_[0].get(), in, &outs_[0]); });
    its[1] = RunStageIteration(*stages_[1], channels_[1].get(), in, &outs_[1]);
    first.join();
    return its;
  }

  std::string dir_;
  std::unique_ptr<gloo::rendezvous::Store> store_ = GlooCommunicator::MakeLocalStore();
  std::vector<std::unique_ptr<Engine>> stages_;
  std::vector<std::unique_ptr<PipelineChannel>> channels_;
  StepOutput outs_[2];
};

TEST_F(PipelineChannelTest, CpuStagesOverGlooMatchTheWholeModel) {
  Connect();
  ASSERT_NE(channels_[1], nullptr);
  EXPECT_FALSE(channels_[0]->device_activations());
  auto whole = MakeEngine(0, 1);
  StepInput in;
  in.iteration_id = 1;
  in.seqs.push_back({1, {5, 6, 7, 8}, 0, true, SequenceSetup{32, {}, {}}});
  in.seqs.push_back({2, {42}, 0, true, SequenceSetup{32, {}, {}}});
  for (int step = 0; step < 3; ++step) {
    std::vector<StageIteration> its = Run(in);
    for (int s = 0; s < 2; ++s) ASSERT_TRUE(its[s].status.ok()) << "stage " << s << ": " << its[s].status;
    size_t tokens = 0;
    for (const StepSequence& s : in.seqs) tokens += s.token_ids.size();
    EXPECT_EQ(outs_[0].hidden.size(), tokens * 64) << "stage 0's activations went through the host";
    StepOutput want;
    ASSERT_TRUE(whole->Step(in, nullptr, &want).ok());
    ASSERT_EQ(outs_[1].logits.size(), want.logits.size());
    for (size_t i = 0; i < want.logits.size(); ++i) ASSERT_NEAR(outs_[1].logits[i], want.logits[i], 1e-4) << i;
    StepInput next;
    next.iteration_id = in.iteration_id + 1;
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const StepSequence& s = in.seqs[i];
      next.seqs.push_back({s.request_id,
                           {want.samples[i].sample.token_id},
                           s.start_position + static_cast<int32_t>(s.token_ids.size()),
                           true,
                           std::nullopt});
    }
    in = std::move(next);
  }
}

// Stage 0 rejects an iteration (a token outside the vocabulary): its frame carries the error,
// stage 1 computes nothing but applies the iteration's releases, and the channel goes on.
TEST_F(PipelineChannelTest, AStagesFailureTravelsInItsFrame) {
  Connect();
  ASSERT_NE(channels_[1], nullptr);
  StepInput ok;
  ok.iteration_id = 1;
  ok.seqs.push_back({1, {5, 6}, 0, true, SequenceSetup{16, {}, {}}});
  std::vector<StageIteration> its = Run(ok);
  ASSERT_TRUE(its[1].status.ok()) << its[1].status;
  EXPECT_EQ(stages_[1]->num_requests(), 1);

  StepInput bad;
  bad.iteration_id = 2;
  bad.released_ids = {1};
  bad.seqs.push_back({2, {5, 970}, 0, true, SequenceSetup{16, {}, {}}});
  its = Run(bad);
  EXPECT_EQ(its[0].status.code(), absl::StatusCode::kInvalidArgument) << its[0].status;
  EXPECT_TRUE(its[0].data_plane.ok());
  EXPECT_TRUE(its[1].data_plane.ok()) << its[1].data_plane;
  EXPECT_EQ(its[1].status.code(), absl::StatusCode::kAborted) << its[1].status;
  EXPECT_NE(its[1].status.message().find("outside the vocabulary"), std::string::npos) << its[1].status;
  EXPECT_EQ(stages_[1]->num_requests(), 0) << "the releases of a failed iteration still apply";

  its = Run(ok);
  ASSERT_TRUE(its[1].status.ok()) << its[1].status;
}

TEST_F(PipelineChannelTest, CpuEnginesHaveNoDeviceLinksAndBadStagesAreRefused) {
  auto e = MakeEngine(0, 2);
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->CanLinkDevices());
  Engine::PipelineLinkOptions lo;
  lo.store = store_.get();
  EXPECT_EQ(e->ConnectPipeline(lo).code(), absl::StatusCode::kFailedPrecondition);
  PipelineChannel::Options o;
  o.store = store_.get();
  o.engine = e.get();
  o.stage = 2;
  o.num_stages = 2;
  EXPECT_EQ(PipelineChannel::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.engine = nullptr;
  o.stage = 0;
  EXPECT_EQ(PipelineChannel::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orca::engine
