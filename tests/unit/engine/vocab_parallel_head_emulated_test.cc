// The vocabulary-parallel LM head on the CUDA backend, run on the host
// emulation of the CUDA runtime (tests/unit/kernels/cuda_emulation): two
// tensor-parallel shards, each a CudaBackend holding its slice of the head
// (151 and 150 rows of a 301-token vocabulary), run ModelRunner::Forward on
// their own threads and gather their logit slices on shard 0 — the GPU path's
// code, sharding and device buffers. Emulated device memory is host memory,
// so the shards can talk over Gloo here, the host-ordered path (the NCCL one
// is pipeline_data_plane_test's). The logits must match one CPU shard holding
// the whole model.

#include <gloo/rendezvous/store.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "core/engine/checkpoint.h"
#include "core/engine/gloo_communicator.h"
#include "core/engine/kv_cache.h"
#include "core/engine/model_runner.h"
#include "core/engine/model_weights.h"
#include "core/engine/synthetic_checkpoint.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

using testing::TempDir;

// One shard: its backend, weights, KV cache and runner.
struct Shard {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<ModelRunner> runner;
};

std::unique_ptr<Shard> LoadShard(const Checkpoint& ckpt, std::unique_ptr<kernels::Backend> backend, int rank,
                                 int tp_size) {
  auto s = std::make_unique<Shard>();
  s->backend = std::move(backend);
  ModelWeights::Options wo;
  wo.partition = Partition::ForStage(0, 1, ckpt.config().num_layers, rank, tp_size);
  auto w = ModelWeights::Load(ckpt, wo, s->backend.get());
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return nullptr;
  s->weights = std::move(*w);
  KvCache::Options ko;
  ko.num_layers = s->weights->num_local_layers();
  ko.num_kv_heads = s->weights->local_kv_heads();
  ko.head_dim = ckpt.config().head_dim;
  ko.n_slots = 256;
  ko.block_size = 16;
  ko.dtype = DType::kF32;
  auto kv = KvCache::Create(ko, s->backend.get());
  EXPECT_TRUE(kv.ok()) << kv.status();
  if (!kv.ok()) return nullptr;
  s->kv = std::move(*kv);
  return s;
}

absl::Status MakeRunner(Shard& s) {
  ModelRunner::Options ro;
  ro.weights = s.weights.get();
  ro.kv = s.kv.get();
  ro.backend = s.backend.get();
  ro.tp = s.tp.get();
  absl::StatusOr<std::unique_ptr<ModelRunner>> r = ModelRunner::Create(ro);
  if (!r.ok()) return r.status();
  s.runner = std::move(*r);
  return absl::OkStatus();
}

TEST(VocabParallelHeadEmulatedTest, CudaShardsGatherTheSameLogitsAsOneCpuShard) {
  ASSERT_GT(kernels::CudaBackend::DeviceCount(), 0) << "the emulation provides a device";
  SyntheticModelOptions m;
  m.arch = ModelArch::kLlama;
  m.hidden_size = 64, m.num_layers = 2, m.num_heads = 4, m.num_kv_heads = 2, m.intermediate_size = 96;
  m.vocab_size = 301, m.max_position = 128, m.dtype = DType::kF32, m.seed = 11;
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied head" : "untied head");
    m.tie_word_embeddings = tied;
    const std::string dir = absl::StrCat(TempDir(), "/vocab-parallel-emulated-", tied);
    ASSERT_TRUE(WriteSyntheticCheckpoint(m, dir).ok());
    auto ckpt = Checkpoint::Open(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();

    kernels::CpuBackend::Options co;
    co.num_threads = 1;
    std::unique_ptr<Shard> cpu = LoadShard(**ckpt, kernels::CpuBackend::Create(co), 0, 1);
    ASSERT_NE(cpu, nullptr);
    ASSERT_TRUE(MakeRunner(*cpu).ok());
    std::vector<std::unique_ptr<Shard>> gpu;
    for (int r = 0; r < 2; ++r) {
      auto backend = kernels::CudaBackend::Create(0);
      ASSERT_TRUE(backend.ok()) << backend.status();
      gpu.push_back(LoadShard(**ckpt, std::move(*backend), r, 2));
      ASSERT_NE(gpu.back(), nullptr);
    }
    // Every shard holds only its slice of the head.
    EXPECT_TRUE(gpu[0]->weights->vocab_parallel_head());
    EXPECT_EQ(gpu[0]->weights->lm_head().n, 151);
    EXPECT_EQ(gpu[1]->weights->head_vocab().begin, 151);
    EXPECT_EQ(gpu[1]->weights->lm_head().n, 150);
    auto store = GlooCommunicator::MakeLocalStore();
    {
      std::vector<std::thread> threads;
      std::vector<absl::Status> joined(2);
      for (int r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
          GlooCommunicator::Options go;
          go.store = store.get();
          go.prefix = absl::StrCat("emulated-", tied);
          go.rank = r;
          go.size = 2;
          auto c = GlooCommunicator::Create(go);
          joined[r] = c.status();
          if (c.ok()) gpu[r]->tp = std::move(*c);
        });
      for (auto& t : threads) t.join();
      for (int r = 0; r < 2; ++r) ASSERT_TRUE(joined[r].ok()) << joined[r];
    }
    for (auto& s : gpu) ASSERT_TRUE(MakeRunner(*s).ok());

    // A prefill of two requests (5 and 1 tokens, one of them asking for every
    // prompt position's logits), then a decode step of both.
    std::vector<std::vector<SeqSpec>> steps = {{{1, 5, 0, true, true}, {2, 1, 0, true, false}},
                                               {{1, 1, 5, true, false}, {2, 1, 1, true, false}}};
    std::vector<std::vector<int32_t>> ids = {{3, 300, 151, 150, 7, 42}, {299, 0}};
    for (auto* s : {cpu.get(), gpu[0].get(), gpu[1].get()})
      for (uint64_t id : {1, 2}) ASSERT_TRUE(s->kv->Reserve(id, 16).ok());
    for (size_t step = 0; step < steps.size(); ++step) {
      int64_t rows = 0;
      for (const SeqSpec& s : steps[step]) rows += s.LogitRows();
      const ForwardInput in{steps[step], ids[step], nullptr};
      std::vector<float> want(rows * 301), got(rows * 301, -1e30f);
      ASSERT_TRUE(cpu->runner->Forward(in, nullptr, want.data(), nullptr).ok());
      std::vector<absl::Status> status(2);
      std::vector<ForwardTimings> timings(2);
      std::thread peer([&] { status[1] = gpu[1]->runner->Forward(in, nullptr, nullptr, &timings[1]); });
      status[0] = gpu[0]->runner->Forward(in, nullptr, got.data(), &timings[0]);
      peer.join();
      ASSERT_TRUE(status[0].ok()) << status[0];
      ASSERT_TRUE(status[1].ok()) << status[1];
      double worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
        scale = std::max(scale, static_cast<double>(std::abs(want[i])));
      }
      EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << "step " << step << ": max |logit diff| " << worst;
      for (auto* s : {cpu.get(), gpu[0].get(), gpu[1].get()})
        for (const SeqSpec& q : steps[step]) s->kv->CommitWrite(q.request_id, q.start_pos, q.num_tokens);
    }
  }
}

}  // namespace
}  // namespace orca::engine
