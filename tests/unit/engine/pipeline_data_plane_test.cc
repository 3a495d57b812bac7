// The GPU pipeline data plane (paper §4.1) end to end: a PP 2 × TP 2 CUDA engine — two
// stages, each an Engine with two GPU shards on threads of its own, four ranks in all — runs
// iterations the way two workers do (RunStageIteration over a PipelineChannel: frame headers
// over Gloo, activations device to device over each shard's NCCL link, all-reduces inside each
// stage over NCCL), and its logits match the CPU engine's holding the whole model.
//
// Compiled twice from this file: against the host emulation of CUDA and NCCL
// (tests/unit/kernels/cuda_emulation, label unit, every build) and against the real CUDA
// runtime and NCCL (label gpu; skips without 4 GPUs). The emulation adds what only it can
// observe: how many host waits each GPU's stream saw per iteration (none on the first stage;
// on the last, only rank 0's wait for the logits it samples) and what went over NCCL.
//
// Tolerance: every path is f32; the engines differ only in summation order (the
// all-reduce's, the GEMMs'), so logits agree within 1e-3 of the reference logits' standard
// deviation (the f32 bound of engine_equivalence_test) and greedy tokens are identical.

#include <gloo/rendezvous/store.h>

#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/gloo_communicator.h"
#include "core/engine/model_weights.h"
#include "core/engine/pipeline_channel.h"
#include "core/engine/synthetic_checkpoint.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/unit/engine/test_models.h"
#ifdef ORCA_CUDA_EMULATION
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace orca::engine {
namespace {

using testing::ExpectLogitsClose;
using testing::NewSeq;
using testing::TempDir;

constexpr int kStages = 2;
constexpr int kTp = 2;
constexpr int kLayers = 4;
constexpr int kHidden = 64;
constexpr int kVocab = 301;  // split 151 + 150 by the vocabulary-parallel head

class PipelineDataPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::CudaBackend::DeviceCount() < kStages * kTp)
      GTEST_SKIP() << "needs " << kStages * kTp << " GPUs (one per rank), " << kernels::CudaBackend::DeviceCount()
                   << " visible";
    SyntheticModelOptions m;
    m.arch = ModelArch::kLlama;
    m.hidden_size = kHidden, m.num_layers = kLayers, m.num_heads = 4, m.num_kv_heads = 2, m.intermediate_size = 96;
    m.vocab_size = kVocab, m.max_position = 128, m.dtype = DType::kF32, m.seed = 7;
    dir_ = absl::StrCat(TempDir(), "/pipeline-data-plane");
    ASSERT_TRUE(WriteSyntheticCheckpoint(m, dir_).ok());
  }

  Engine::Options BaseOptions() const {
    Engine::Options o;
    o.model_path = dir_;
    o.dtype = DType::kF32;
    o.kv_dtype = DType::kF32;
    o.n_slots = 256;
    o.kv_block_size = 16;
    o.num_threads = 1;
    o.keep_logits = true;
    return o;
  }

  // Stage s of the CUDA pipeline: its shards on GPUs 2s and 2s + 1.
  absl::Status MakeStages(int64_t last_stage_slots = 256) {
    for (int s = 0; s < kStages; ++s) {
      Engine::Options o = BaseOptions();
      o.device = "cuda";
      o.stage = s;
      o.num_stages = kStages;
      o.tp_size = kTp;
      o.first_device = s * kTp;
      if (s == kStages - 1) o.n_slots = last_stage_slots;
      absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(o);
      if (!e.ok()) return e.status();
      stages_.push_back(std::move(*e));
    }
    return absl::OkStatus();
  }

  // Every stage forms its channel at once, as the workers of a session do.
  absl::Status Connect(const std::string& session) {
    channels_.resize(kStages);
    std::vector<absl::Status> status(kStages);
    std::vector<std::thread> threads;
    for (int s = 0; s < kStages; ++s)
      threads.emplace_back([&, s] {
        PipelineChannel::Options o;
        o.store = store_.get();
        o.prefix = session;
        o.stage = s;
        o.num_stages = kStages;
        o.timeout = std::chrono::seconds(30);
        o.op_timeout = std::chrono::seconds(30);
        o.engine = stages_[s].get();
        absl::StatusOr<std::unique_ptr<PipelineChannel>> c = PipelineChannel::Create(o);
        status[s] = c.status();
        if (c.ok()) channels_[s] = std::move(*c);
      });
    for (auto& t : threads) t.join();
    for (const absl::Status& s : status)
      if (!s.ok()) return s;
    return absl::OkStatus();
  }

  // One iteration on every stage, each on its own thread like its worker's compute thread.
  std::vector<StageIteration> RunPipeline(const StepInput& in) {
    std::vector<StageIteration> its(kStages);
    std::vector<std::thread> threads;
    for (int s = 0; s < kStages; ++s)
      threads.emplace_back([&, s] { its[s] = RunStageIteration(*stages_[s], channels_[s].get(), in, &outs_[s]); });
    for (auto& t : threads) t.join();
    return its;
  }

  std::string dir_;
  std::unique_ptr<gloo::rendezvous::Store> store_ = GlooCommunicator::MakeLocalStore();
  std::vector<std::unique_ptr<Engine>> stages_;
  std::vector<std::unique_ptr<PipelineChannel>> channels_;
  StepOutput outs_[kStages];
};

TEST_F(PipelineDataPlaneTest, CudaPipelineOverNcclMatchesTheCpuEngine) {
  ASSERT_TRUE(MakeStages().ok());
  for (auto& e : stages_) ASSERT_TRUE(e->CanLinkDevices());
  ASSERT_TRUE(Connect("session-1").ok());
  for (auto& c : channels_) EXPECT_TRUE(c->device_activations());
  Engine::Options co = BaseOptions();
  auto cpu = Engine::Create(co);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  // Four prompts (7, 3, 1 and 5 tokens) — the largest iteration first, so that no buffer grows
  // later — then decode steps of all of them; at step 3 request 3 leaves and 5 joins with a
  // prompt while the others decode.
  StepInput in;
  in.seqs = {NewSeq(1, {3, 300, 151, 150, 7, 42, 9}), NewSeq(2, {299, 0, 12}), NewSeq(3, {17}),
             NewSeq(4, {5, 6, 7, 8, 9})};
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(absl::StrCat("iteration ", step));
    in.iteration_id = step + 1;
    int64_t tokens = 0;
    for (const StepSequence& s : in.seqs) tokens += static_cast<int64_t>(s.token_ids.size());
#ifdef ORCA_CUDA_EMULATION
    long waits_before[kStages * kTp];
    for (int d = 0; d < kStages * kTp; ++d) waits_before[d] = EmulatedHostWaits(d);
    const EmulatedNcclCounts nccl_before = EmulatedNcclTotals();
#endif
    std::vector<StageIteration> its = RunPipeline(in);
#ifdef ORCA_CUDA_EMULATION
    const EmulatedNcclCounts nccl = EmulatedNcclTotals();
    // The host waited for a GPU only on the last stage's rank 0 (GPU 2), for the logits it
    // samples from: a bounded wait that watches the links (Communicator::Drain), then the copy.
    for (int d = 0; d < kStages * kTp; ++d)
      EXPECT_EQ(EmulatedHostWaits(d) - waits_before[d], d == (kStages - 1) * kTp ? 2 : 0) << "GPU " << d;
    // Over NCCL: each shard's activations to the next stage, device to device, and the head's
    // logit slice of rank 1 to rank 0; an all-reduce per layer after attention and after the MLP.
    const int64_t samples = static_cast<int64_t>(in.seqs.size());
    const size_t activations = static_cast<size_t>(tokens) * kHidden * sizeof(float);
    const size_t slice = static_cast<size_t>(samples * VocabShard::MaxRows(kVocab, kTp)) * sizeof(float);
    EXPECT_EQ(nccl.sends - nccl_before.sends, kTp + (kTp - 1));
    EXPECT_EQ(nccl.recvs - nccl_before.recvs, kTp + (kTp - 1));
    EXPECT_EQ(nccl.bytes_sent - nccl_before.bytes_sent, kTp * activations + (kTp - 1) * slice);
    EXPECT_EQ(nccl.all_reduces - nccl_before.all_reduces, kLayers * 2 * kTp);
#endif
    for (int s = 0; s < kStages; ++s) {
      ASSERT_TRUE(its[s].data_plane.ok()) << "stage " << s << ": " << its[s].data_plane;
      ASSERT_TRUE(its[s].status.ok()) << "stage " << s << ": " << its[s].status;
    }
    EXPECT_TRUE(outs_[0].hidden.empty()) << "stage 0's activations went through the host";
    StepOutput want;
    ASSERT_TRUE((*cpu)->Step(in, nullptr, &want).ok());
    const StepOutput& got = outs_[kStages - 1];
    ExpectLogitsClose(got.logits, want.logits, "pp 2 x tp 2 on CUDA vs the CPU engine");
    ASSERT_EQ(got.samples.size(), want.samples.size());
    for (size_t i = 0; i < want.samples.size(); ++i) {
      EXPECT_EQ(got.samples[i].request_id, want.samples[i].request_id);
      EXPECT_EQ(got.samples[i].sample.token_id, want.samples[i].sample.token_id) << "request " << i;
    }

    StepInput next;
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const StepSequence& s = in.seqs[i];
      if (step == 2 && s.request_id == 3) {
        next.released_ids.push_back(3);
        continue;
      }
      next.seqs.push_back({s.request_id,
                           {want.samples[i].sample.token_id},
                           s.start_position + static_cast<int32_t>(s.token_ids.size()),
                           true,
                           std::nullopt});
    }
    if (step == 2) next.seqs.push_back(NewSeq(5, {250, 11}));
    in = std::move(next);
  }
}

// The last stage rejects an iteration the first one computed (here its KV pool is too small
// for request 9): the activations already on the links are taken off and dropped, the failure
// reaches the last stage's result, and the next iteration runs as if nothing had happened.
TEST_F(PipelineDataPlaneTest, AnIterationTheLastStageRejectsLeavesTheLinksMatched) {
  ASSERT_TRUE(MakeStages(/*last_stage_slots=*/32).ok());
  ASSERT_TRUE(Connect("session-reject").ok());
  auto cpu = Engine::Create(BaseOptions());
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  StepInput big;
  big.iteration_id = 1;
  big.seqs = {NewSeq(9, {1, 2, 3}, /*kv_reservation_slots=*/64)};
  std::vector<StageIteration> its = RunPipeline(big);
  EXPECT_TRUE(its[0].status.ok()) << its[0].status;
  EXPECT_TRUE(its[1].data_plane.ok()) << its[1].data_plane;
  EXPECT_FALSE(its[1].status.ok());
  EXPECT_EQ(stages_[1]->num_requests(), 0);

  StepInput in;
  in.iteration_id = 2;
  in.released_ids = {9};
  in.seqs = {NewSeq(1, {4, 5, 6, 7}, 16)};
  its = RunPipeline(in);
  for (int s = 0; s < kStages; ++s) ASSERT_TRUE(its[s].status.ok()) << "stage " << s << ": " << its[s].status;
  StepOutput want;
  ASSERT_TRUE((*cpu)->Step(in, nullptr, &want).ok());
  ExpectLogitsClose(outs_[1].logits, want.logits, "after a rejected iteration");
}

// A first stage that announced its activations and then died (its NCCL links gone) fails the
// last stage's iteration with a data-plane error — the session is over — instead of a hang.
TEST_F(PipelineDataPlaneTest, APreviousStageGoneAfterItsHeaderIsADataPlaneError) {
  ASSERT_TRUE(MakeStages().ok());
  ASSERT_TRUE(Connect("session-dead-peer").ok());
  StepInput in;
  in.iteration_id = 1;
  in.seqs = {NewSeq(1, {4, 5, 6})};
  absl::Status announced;
  std::thread dying([&] {
    StepOutput nothing;
    announced = channels_[0]->SendFrame(absl::OkStatus(), 3 * kHidden, nothing);  // as if it had queued them
    stages_[0]->AbortPipeline();
  });
  const StageIteration it = RunStageIteration(*stages_[1], channels_[1].get(), in, &outs_[1]);
  dying.join();
  ASSERT_TRUE(announced.ok()) << announced;
  EXPECT_FALSE(it.data_plane.ok());
  EXPECT_TRUE(absl::IsUnavailable(it.status) || absl::IsDeadlineExceeded(it.status)) << it.status;
  EXPECT_EQ(stages_[1]->num_requests(), 0) << "the failed iteration's KV is released";
}

}  // namespace
}  // namespace orca::engine
