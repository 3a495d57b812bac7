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

}  // namespace
}  // namespace orca::engine
