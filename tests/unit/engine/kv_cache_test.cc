#include "core/engine/kv_cache.h"

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace orca::engine {
namespace {

class KvCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<KvCache> Make(int64_t n_slots, int32_t block = 16) {
    KvCache::Options o;
    o.num_layers = 2;
    o.num_kv_heads = 2;
    o.head_dim = 8;
    o.n_slots = n_slots;
    o.block_size = block;
    auto kv = KvCache::Create(o, backend_.get());
    EXPECT_TRUE(kv.ok()) << kv.status();
    return std::move(*kv);
  }
  std::unique_ptr<kernels::CpuBackend> backend_ = kernels::CpuBackend::Create({});
};

TEST_F(KvCacheTest, PoolIsSizedExactlyFromTheSlotBudget) {
  auto kv = Make(100, 16);
  EXPECT_EQ(kv->num_blocks(), 7);  // ceil(100 / 16)
  EXPECT_EQ(kv->slots_total(), 112);
  EXPECT_EQ(kv->bytes(), 112u * 2 * 8 * 2 /*K,V*/ * 2 /*layers*/ * sizeof(float));
}

TEST_F(KvCacheTest, ReserveAndReleaseReturnEveryBlock) {
  auto kv = Make(64);
  ASSERT_TRUE(kv->Reserve(1, 20).ok());  // 2 blocks
  ASSERT_TRUE(kv->Reserve(2, 16).ok());  // 1 block
  EXPECT_EQ(kv->slots_used(), 48);
  EXPECT_EQ(kv->BlockTable(1)->size(), 2u);
  ASSERT_TRUE(kv->Release(1).ok());
  ASSERT_TRUE(kv->Release(2).ok());
  EXPECT_EQ(kv->slots_used(), 0);
  EXPECT_EQ(kv->num_free_blocks(), 4);
}

TEST_F(KvCacheTest, MisuseIsAnErrorNotCorruption) {
  auto kv = Make(64);
  ASSERT_TRUE(kv->Reserve(1, 32).ok());
  EXPECT_EQ(kv->Reserve(1, 8).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(kv->Reserve(2, 64).code(), absl::StatusCode::kResourceExhausted);  // only 2 blocks left
  EXPECT_EQ(kv->Release(3).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(kv->Reserve(4, 0).code(), absl::StatusCode::kInvalidArgument);
  // Writes must stay inside the reservation and must not skip positions.
  EXPECT_TRUE(kv->CheckWrite(1, 0, 10).ok());
  EXPECT_EQ(kv->CheckWrite(1, 5, 1).code(), absl::StatusCode::kInvalidArgument);
  kv->CommitWrite(1, 0, 10);
  EXPECT_TRUE(kv->CheckWrite(1, 10, 1).ok());
  EXPECT_EQ(kv->CheckWrite(1, 10, 23).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(kv->CheckWrite(9, 0, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(kv->slots_used(), 32);  // the failed reservation took nothing
}

TEST_F(KvCacheTest, SlotsFollowTheBlockTable) {
  auto kv = Make(64, 4);
  ASSERT_TRUE(kv->Reserve(7, 10).ok());
  const auto& table = *kv->BlockTable(7);
  ASSERT_EQ(table.size(), 3u);
  for (int p = 0; p < 10; ++p) EXPECT_EQ(kv->Slot(7, p), table[p / 4] * 4 + p % 4);
}

TEST_F(KvCacheTest, AssignedTablesShareBlocksAndNeverMixWithReservations) {
  auto kv = Make(64, 4);  // 16 blocks
  ASSERT_TRUE(kv->Assign(1, 12, std::vector<int32_t>{5, 2}, 0).ok());
  ASSERT_TRUE(kv->Assign(2, 12, std::vector<int32_t>{5, 9}, 4).ok());  // block 5 shared: a cached prefix
  EXPECT_EQ(kv->slots_used(), 12);                                     // 5, 2, 9
  EXPECT_EQ(kv->Slot(2, 1), 5 * 4 + 1);
  EXPECT_EQ(kv->Slot(2, 6), 9 * 4 + 2);
  EXPECT_EQ(kv->CheckWrite(2, 0, 1).code(), absl::StatusCode::kOk);               // position 0 <= 4 cached
  EXPECT_EQ(kv->CheckWrite(2, 5, 1).code(), absl::StatusCode::kInvalidArgument);  // skips position 4
  EXPECT_EQ(kv->CheckWrite(2, 4, 5).code(), absl::StatusCode::kOutOfRange);       // the table holds 8
  ASSERT_TRUE(kv->AppendBlocks(2, std::vector<int32_t>{11}).ok());
  EXPECT_TRUE(kv->CheckWrite(2, 4, 5).ok());
  EXPECT_EQ(kv->AppendBlocks(2, std::vector<int32_t>{9}).code(), absl::StatusCode::kInvalidArgument);   // twice
  EXPECT_EQ(kv->AppendBlocks(2, std::vector<int32_t>{16}).code(), absl::StatusCode::kInvalidArgument);  // outside
  EXPECT_EQ(kv->AppendBlocks(3, std::vector<int32_t>{1}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(kv->Reserve(3, 4).code(), absl::StatusCode::kFailedPrecondition);  // no mixing
  kv->DropLastBlocks(2, 1);
  EXPECT_EQ(kv->slots_used(), 12);
  ASSERT_TRUE(kv->Release(1).ok());
  EXPECT_EQ(kv->slots_used(), 8);  // 5 (still held by 2) and 9
  ASSERT_TRUE(kv->Release(2).ok());
  EXPECT_EQ(kv->slots_used(), 0);
  EXPECT_TRUE(kv->Reserve(3, 4).ok());  // the pool is free to reserve again
  EXPECT_EQ(kv->Assign(4, 4, std::vector<int32_t>{0}, 0).code(), absl::StatusCode::kFailedPrecondition);
}

// Sliding-window layers in a pool of their own: layer 1 local (window 6), blocks of 4. Memory is the main pool for
// layer 0 and the local pool for layer 1; a request holds local blocks from its window's first on, and misuse
// (too few blocks, a step back past the freed window, a prefix hit) is an error.
// Layer 1 of 2 attends over a window of 6, blocks of 4, a main pool of 64 slots; `n_local_slots` 0: no local pool.
std::unique_ptr<KvCache> MakeWindowed(kernels::Backend* backend, int64_t n_local_slots) {
  KvCache::Options o;
  o.num_layers = 2;
  o.num_kv_heads = 2;
  o.head_dim = 8;
  o.n_slots = 64;
  o.block_size = 4;
  o.local_layers = {false, true};
  o.window = 6;
  o.n_local_slots = n_local_slots;
  auto made = KvCache::Create(o, backend);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.ok() ? std::move(*made) : nullptr;
}

TEST_F(KvCacheTest, LocalPoolHoldsOnlyTheWindow) {
  std::unique_ptr<KvCache> made = MakeWindowed(backend_.get(), 12);  // 3 local blocks
  ASSERT_NE(made, nullptr);
  KvCache& kv = *made;
  EXPECT_TRUE(kv.has_local_pool());
  EXPECT_FALSE(kv.IsLocal(0));
  EXPECT_TRUE(kv.IsLocal(1));
  EXPECT_EQ(kv.bytes(), (64u + 12u) * 2 * 8 * 2 /*K,V*/ * sizeof(float));
  EXPECT_NE(kv.Layer(0).k, kv.Layer(1).k);
  ASSERT_TRUE(kv.Reserve(1, 40).ok());
  // A 10-token prompt at once: 3 local blocks (positions 0..9), the whole pool.
  ASSERT_TRUE(kv.AllocateLocal(1, 0, 10).ok());
  EXPECT_EQ(kv.local_slots_used(), 12);
  ASSERT_TRUE(kv.Reserve(2, 8).ok());
  EXPECT_EQ(kv.AllocateLocal(2, 0, 1).code(), absl::StatusCode::kResourceExhausted);
  kv.CommitWrite(1, 0, 10);
  // Decoding position 10 sees (4, 10]: block 0 (positions 0..3) is out of every later window and goes.
  kv.FreeOutOfWindow(1, 10);
  EXPECT_EQ(kv.local_slots_used(), 8);
  ASSERT_TRUE(kv.AllocateLocal(1, 10, 1).ok());  // block 2 holds position 10 already
  EXPECT_EQ(kv.local_slots_used(), 8);
  ASSERT_TRUE(kv.AllocateLocal(2, 0, 1).ok());  // the freed block serves another request
  EXPECT_EQ(kv.local_slots_used(), 12);
  EXPECT_EQ(kv.LocalSlot(1, 10), (*kv.LocalBlockTable(1))[2] * 4 + 2);
  EXPECT_NE((*kv.LocalBlockTable(2))[0], (*kv.LocalBlockTable(1))[1]);
  // Recomputing from position 3 would need block 0's keys again: they are gone.
  EXPECT_EQ(kv.AllocateLocal(1, 3, 1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(kv.Release(1).ok());
  EXPECT_EQ(kv.local_slots_used(), 4);
  kv.ReleaseAll();
  EXPECT_EQ(kv.local_slots_used(), 0);
  // A prefix hit's window was never computed here.
  EXPECT_EQ(kv.Assign(3, 16, std::vector<int32_t>{0, 1}, 4).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(kv.Assign(3, 16, std::vector<int32_t>{0, 1}, 0).ok());
}

TEST_F(KvCacheTest, WithoutALocalPoolEveryLayerKeepsEveryPosition) {
  std::unique_ptr<KvCache> kv = MakeWindowed(backend_.get(), 0);  // swa_full
  ASSERT_NE(kv, nullptr);
  EXPECT_FALSE(kv->has_local_pool());
  EXPECT_FALSE(kv->IsLocal(1));
  EXPECT_EQ(kv->bytes(), 64u * 2 * 8 * 2 * 2 * sizeof(float));
  ASSERT_TRUE(kv->Reserve(1, 40).ok());
  EXPECT_TRUE(kv->AllocateLocal(1, 0, 40).ok());  // no-op
  EXPECT_EQ(kv->local_slots_used(), 0);
}

}  // namespace
}  // namespace orca::engine
