// Decode iterations as CUDA Graphs (Engine::Options::cuda_graphs, issue 16 item 2) on the host
// emulation of the CUDA runtime (tests/unit/kernels/cuda_emulation): while the backend's stream
// captures, the emulation records kernel launches, copies and GEMMs instead of running them, a
// graph launch runs them in order, and an operation that would make the host wait inside the
// capture fails it (the real runtime's cudaErrorStreamCaptureUnsupported), which aborts the
// engine — so every capture these tests make holds no host synchronisation.
//
// Three engines run the same iterations: the CPU engine (the reference), the CUDA engine without
// graphs, and the CUDA engine with them. Each decode shape (B rows) runs eagerly once, is
// recorded and launched the next time, and is replayed afterwards; positions and token ids
// advance every step and the batch changes shape, so a replay that read a stale input (a
// position, a token, a slot, a block table, attention's sequences) would not give the
// eager path's logits, which the graph path must match bit for bit (same kernels, same launch
// shapes, same order). Against the CPU engine: 1e-3 of the reference logits' standard
// deviation (the f32 bound of engine_equivalence_test) and the same greedy tokens.
//
// Timeline (requests 1-6; P = prefill, D = decode, R = released; graph column: what the
// graph engine did with its decode shape):
//   it  batch               shape  graph
//    0  P1 P2 P3 P4          -     eager (prompts; 4 samples, so iteration 6 grows nothing)
//    1  D1 D2 D3   R4        3     eager (first time: sizes scratch)
//    2  D1 D2 D3             3     capture #1 + launch
//    3-5 D1 D2 D3            3     replay
//    6  D1 D2 D3 P5          -     eager (mixed prefill + decode)
//    7  D1 D2 D3   R5        3     replay
//    8  D1   R2 R3           1     eager (first time)
//    9  D1                   1     capture #2 + launch
//   10-11 D1                 1     replay
//   12  D1 P6 (24 tokens)    -     eager; the activation buffers grow (reallocated)
//   13  D1   R6              1     capture #3 + launch (the old graph read the old buffers)
//   14  D1                   1     replay

#include <cuda_runtime_api.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/engine/engine.h"
#include "core/engine/synthetic_checkpoint.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using testing::ExpectLogitsClose;
using testing::NewSeq;
using testing::TempDir;

constexpr int kEagerGpu = 0;
constexpr int kGraphGpu = 1;

class DecodeGraphTest : public ::testing::Test {
 protected:
  void WriteModel(ModelArch arch) {
    ASSERT_GT(kernels::CudaBackend::DeviceCount(), kGraphGpu) << "the emulation provides the devices";
    SyntheticModelOptions m;
    m.arch = arch;
    m.hidden_size = 64, m.num_layers = 2, m.num_heads = 4, m.num_kv_heads = m.arch == ModelArch::kGpt2 ? 4 : 2;
    m.intermediate_size = 96, m.vocab_size = 301, m.max_position = 128, m.dtype = DType::kF32, m.seed = 11;
    if (arch == ModelArch::kQwen3) m.head_dim = 32;  // q/k norms, heads × head_dim ≠ hidden
    if (arch == ModelArch::kGemma2 || arch == ModelArch::kGemma3) {
      // Sandwich norms, GeGLU, scaled embeddings; a window of 8 on layer 0 (soft-capping: Gemma 2; q/k norms and
      // the local layer's own RoPE base: Gemma 3).
      m.head_dim = 32, m.sliding_window = 8, m.sliding_window_pattern = 2, m.rope_theta_local = 1e4;
      m.tie_word_embeddings = false;
    }
    if (arch == ModelArch::kStarcoder2) m.sliding_window = 8;  // LayerNorm, biases, a window on every layer
    if (arch == ModelArch::kPhi3) {  // fused qkv/gate_up, half of each head rotated, LongRoPE's long factors
      m.partial_rotary_factor = 0.5;
      m.rope_scaling.type = RopeScaling::Type::kLongRope;
      m.rope_scaling.original_max_position = 32;
    }
    if (arch == ModelArch::kMistral3) {  // YaRN; the queries' temperature steps every 8 positions (captured too)
      m.head_dim = 32;
      m.rope_scaling.type = RopeScaling::Type::kYarn;
      m.rope_scaling.factor = 4;
      m.rope_scaling.original_max_position = 8;
      m.attn_temperature_scale = 0.5f;
    }
    dir_ = absl::StrCat(TempDir(), "/decode-graph-", ModelArchName(m.arch));
    ASSERT_TRUE(WriteSyntheticCheckpoint(m, dir_).ok());
  }

  Engine::Options Options(const std::string& device, int first_device, bool graphs) const {
    Engine::Options o;
    o.model_path = dir_;
    o.dtype = DType::kF32;
    o.kv_dtype = DType::kF32;
    o.n_slots = 256;
    o.kv_block_size = 16;
    o.num_threads = 1;
    o.keep_logits = true;
    o.device = device;
    o.first_device = first_device;
    o.cuda_graphs = graphs;
    // Buffers sized by the iterations themselves, none reserved at load: iteration 11's long
    // prompt must grow them, so that the decode graphs recorded before are recorded again.
    o.reserve_tokens = 0;
    return o;
  }

  std::string dir_;
};

class DecodeGraphArchTest : public DecodeGraphTest, public ::testing::WithParamInterface<ModelArch> {
 protected:
  void SetUp() override { WriteModel(GetParam()); }
};

TEST_P(DecodeGraphArchTest, ReplaysMatchTheEagerCudaPathBitForBitAndTheCpuEngine) {
  auto cpu = Engine::Create(Options("cpu", 0, false));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto eager = Engine::Create(Options("cuda", kEagerGpu, false));
  ASSERT_TRUE(eager.ok()) << eager.status();
  auto graphs = Engine::Create(Options("cuda", kGraphGpu, true));
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  const long eager_launches0 = EmulatedGraphLaunches(kEagerGpu), launches0 = EmulatedGraphLaunches(kGraphGpu);
  const long nodes0 = EmulatedCapturedNodes(kGraphGpu);

  // What the graph engine must have done after each iteration: {graphs captured, graph launches}.
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 0}, {0, 0}, {1, 1}, {1, 2}, {1, 3},
                                                             {1, 4}, {1, 4}, {1, 5}, {1, 5}, {2, 6},
                                                             {2, 7}, {2, 8}, {2, 8}, {3, 9}, {3, 10}};
  StepInput in;
  in.seqs = {NewSeq(1, {5, 17, 42, 9, 100}), NewSeq(2, {7, 3, 250}), NewSeq(3, {1, 2, 3, 4, 5, 6, 7}),
             NewSeq(4, {8, 8})};
  std::vector<int32_t> long_prompt(24);
  for (int32_t i = 0; i < 24; ++i) long_prompt[i] = (i * 37 + 5) % 301;
  long nodes_after_first_capture = 0;
  for (int it = 0; it < static_cast<int>(expected.size()); ++it) {
    in.iteration_id = static_cast<uint64_t>(it);
    const std::string what = absl::StrCat("iteration ", it);
    StepOutput want, got_eager, got;
    ASSERT_TRUE((*cpu)->Step(in, nullptr, &want).ok()) << what;
    absl::Status s = (*eager)->Step(in, nullptr, &got_eager);
    ASSERT_TRUE(s.ok()) << what << ": " << s;
    s = (*graphs)->Step(in, nullptr, &got);
    ASSERT_TRUE(s.ok()) << what << ": " << s;

    EXPECT_EQ(got.logits, got_eager.logits) << what << ": the graph path must be the eager path, bit for bit";
    ExpectLogitsClose(got.logits, want.logits, what + ": CUDA graphs vs the CPU engine");
    ASSERT_EQ(got.samples.size(), want.samples.size()) << what;
    for (size_t i = 0; i < want.samples.size(); ++i) {
      EXPECT_EQ(got.samples[i].request_id, want.samples[i].request_id) << what;
      EXPECT_EQ(got.samples[i].sample.token_id, want.samples[i].sample.token_id) << what << " request " << i;
      EXPECT_EQ(got.samples[i].sample.token_id, got_eager.samples[i].sample.token_id) << what << " request " << i;
    }
    EXPECT_EQ((*graphs)->graphs_captured(), expected[it].first) << what;
    EXPECT_EQ((*graphs)->graph_launches(), expected[it].second) << what;
    // The runtime saw exactly those launches; the engine without the option never launches one.
    EXPECT_EQ(EmulatedGraphLaunches(kGraphGpu) - launches0, expected[it].second) << what;
    EXPECT_EQ(EmulatedGraphLaunches(kEagerGpu), eager_launches0) << what;
    if (it == 2) {
      nodes_after_first_capture = EmulatedCapturedNodes(kGraphGpu) - nodes0;
      // Per layer at least: norm, QKV, attention, out-proj, norm, MLP; plus embedding and head.
      EXPECT_GT(nodes_after_first_capture, 2 * 6 + 2) << "the capture recorded the iteration's ops";
    }

    // The next iteration: every sequence decodes one more token, one position further. Not the
    // sampled token: a tiny random model often samples the same one again, and the input must
    // change every step for a stale one to show.
    StepInput next;
    for (size_t i = 0; i < in.seqs.size(); ++i) {
      const StepSequence& q = in.seqs[i];
      if ((it == 0 && q.request_id == 4) || (it == 6 && q.request_id == 5) || (it == 12 && q.request_id == 6)) {
        next.released_ids.push_back(q.request_id);
        continue;
      }
      if (it == 7 && (q.request_id == 2 || q.request_id == 3)) {
        next.released_ids.push_back(q.request_id);
        continue;
      }
      next.seqs.push_back({q.request_id,
                           {(want.samples[i].sample.token_id + 31 * it + 7 * static_cast<int32_t>(q.request_id)) % 301},
                           q.start_position + static_cast<int32_t>(q.token_ids.size()),
                           true,
                           std::nullopt});
    }
    if (it == 5) next.seqs.push_back(NewSeq(5, {33, 44, 55, 66}));
    if (it == 11) next.seqs.push_back(NewSeq(6, long_prompt));
    in = std::move(next);
  }
  // Later captures recorded ops of their own.
  EXPECT_GT(EmulatedCapturedNodes(kGraphGpu) - nodes0, nodes_after_first_capture);
}

INSTANTIATE_TEST_SUITE_P(Archs, DecodeGraphArchTest,
                         ::testing::Values(ModelArch::kLlama, ModelArch::kGpt2, ModelArch::kQwen3, ModelArch::kGemma2,
                                           ModelArch::kGemma3, ModelArch::kGranite, ModelArch::kOlmo2,
                                           ModelArch::kStarcoder2, ModelArch::kPhi3, ModelArch::kMistral3),
                         [](const ::testing::TestParamInfo<ModelArch>& info) {
                           return std::string(ModelArchName(info.param));
                         });

TEST_F(DecodeGraphTest, IsRefusedOnTheCpuBackendAndForPipelineOrTensorParallelism) {
  WriteModel(ModelArch::kLlama);
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(Options("cpu", 0, true));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
  EXPECT_NE(e.status().message().find("need the cuda device"), std::string::npos) << e.status();

  Engine::Options pp = Options("cuda", 0, true);
  pp.num_stages = 2;
  e = Engine::Create(pp);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("one pipeline stage with tensor parallelism 1"), std::string::npos) << e.status();

  Engine::Options tp = Options("cuda", 0, true);
  tp.tp_size = 2;
  e = Engine::Create(tp);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("got 1 stages, tensor parallelism 2"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace orca::engine
