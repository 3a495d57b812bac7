// KvBlockPool and KvManager on their own: allocation order, reference counts, the prefix
// cache's exact matching and LRU eviction, and both KV modes' admission and growth.

#include "core/sched/kv_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/unit/sched/request_builder.h"

namespace orca::sched {
namespace {

using ::orca::sched::testing::RequestBuilder;
using ::testing::ElementsAre;

const absl::Time kT0 = absl::UnixEpoch();

TEST(KvBlockPoolTest, AllocatesUntilEmptyAndCountsReferences) {
  KvBlockPool pool(3);
  std::vector<int32_t> blocks;
  ASSERT_TRUE(pool.Allocate(2, &blocks));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_FALSE(pool.Allocate(2, &blocks));  // nothing changes
  EXPECT_EQ(blocks.size(), 2u);
  pool.Acquire(blocks[0]);
  EXPECT_EQ(pool.ref_count(blocks[0]), 2);
  pool.Release(blocks[0]);
  pool.Release(blocks[0]);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.CheckInvariants(), "");
}

TEST(KvBlockPoolTest, LookupIsExactAndAnEvictedParentInvalidatesItsChildren) {
  KvBlockPool pool(4);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.Allocate(2, &b));
  const std::vector<int32_t> t0 = {1, 2}, t1 = {3, 4};
  const uint64_t h0 = KvBlockPool::HashBlock(0, t0), h1 = KvBlockPool::HashBlock(h0, t1);
  EXPECT_EQ(pool.Register(b[0], h0, KvBlockPool::kNoBlock, t0), b[0]);
  EXPECT_EQ(pool.Register(b[1], h1, b[0], t1), b[1]);
  EXPECT_EQ(pool.Lookup(h0, KvBlockPool::kNoBlock, t0), b[0]);
  EXPECT_EQ(pool.Lookup(h1, b[0], t1), b[1]);
  EXPECT_EQ(pool.Lookup(h1, b[0], std::vector<int32_t>{3, 5}), KvBlockPool::kNoBlock);  // tokens compared
  EXPECT_EQ(pool.Lookup(h1, b[1], t1), KvBlockPool::kNoBlock);                          // parent compared
  // Free both (cached: MRU end); allocating 3 takes the 2 uncached blocks, then evicts b[1]
  // (released first, so least recently used).
  pool.Release(b[1]);
  pool.Release(b[0]);
  std::vector<int32_t> more;
  ASSERT_TRUE(pool.Allocate(3, &more));
  EXPECT_EQ(more.back(), b[1]);
  EXPECT_FALSE(pool.is_cached(b[1]));
  EXPECT_TRUE(pool.is_cached(b[0]));
  // Re-register b[1] with other content, then drop and re-register b[0]: the old child entry
  // under h1 is gone, and a new child of a re-registered parent must re-register too.
  pool.Acquire(b[0]);
  EXPECT_EQ(pool.Lookup(h0, KvBlockPool::kNoBlock, t0), b[0]);  // a hit on a free cached block
  EXPECT_EQ(pool.CheckInvariants(), "");
  pool.ClearCache();
  EXPECT_EQ(pool.Lookup(h0, KvBlockPool::kNoBlock, t0), KvBlockPool::kNoBlock);
  EXPECT_EQ(pool.num_cached(), 0);
}

TEST(KvBlockPoolTest, BlockHashesArePinned) {
  // Prefix-cache keys: a chain of hashes over the blocks' token ids. They name cached blocks
  // in the scheduler's KV block events, so a change must be deliberate.
  const uint64_t h0 = KvBlockPool::HashBlock(0, std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_EQ(h0, 9666623794203265846ULL);
  EXPECT_EQ(KvBlockPool::HashBlock(h0, std::vector<int32_t>{5, 6, 7, 8}), 12975509657443320455ULL);
  EXPECT_EQ(KvBlockPool::HashBlock(0, std::vector<int32_t>{}), 10965084058942171375ULL);
}

TEST(KvBlockPoolTest, TheSameContentRegisteredTwiceKeepsTheFirstBlock) {
  KvBlockPool pool(2);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.Allocate(2, &b));
  const std::vector<int32_t> t = {7, 7};
  const uint64_t h = KvBlockPool::HashBlock(0, t);
  EXPECT_EQ(pool.Register(b[0], h, KvBlockPool::kNoBlock, t), b[0]);
  EXPECT_EQ(pool.Register(b[1], h, KvBlockPool::kNoBlock, t), b[0]);
  EXPECT_FALSE(pool.is_cached(b[1]));
  EXPECT_EQ(pool.num_cached(), 1);
}

class KvManagerTest : public ::testing::Test {
 protected:
  std::unique_ptr<KvManager> Make(KvMode mode, bool prefix, int64_t n_slots = 32, int32_t block = 4) {
    KvManager::Options o;
    o.n_slots = n_slots;
    o.block_size = block;
    o.mode = mode;
    o.prefix_caching = prefix;
    auto kv = KvManager::Create(o);
    EXPECT_TRUE(kv.ok()) << kv.status();
    return std::move(*kv);
  }
  // A request that computed `computed` of its prompt (admitted, iteration returned).
  Request& Add(std::vector<int32_t> prompt, int32_t max_new, int64_t kv_reservation_slots) {
    requests_.push_back(std::make_unique<Request>(next_id_++,
                                                  RequestBuilder().PromptIds(prompt).MaxNewTokens(max_new).Build(),
                                                  max_new, kv_reservation_slots, kT0));
    return *requests_.back();
  }
  void RunPrompt(KvManager& kv, Request& r) {
    r.Admit(kT0, kv.num_cached_tokens(r.id()));
    (void)r.StartIteration(1);
    (void)r.CompleteIteration(SampledToken{1, 0.0f, {}}, kT0);
    kv.OnTokensComputed(r);
  }

  std::vector<std::unique_ptr<Request>> requests_;
  RequestId next_id_ = 1;
};

TEST_F(KvManagerTest, ReservedModeWithoutPrefixCachingOnlyCounts) {
  auto kv = Make(KvMode::kReserved, false);
  EXPECT_FALSE(kv->owns_block_tables());
  Request& a = Add({1, 2, 3}, 5, 8);
  Request& b = Add({1, 2, 3}, 30, 32);
  EXPECT_TRUE(kv->TryAdmit(a, 0));
  EXPECT_FALSE(kv->TryAdmit(b, 0));  // 8 + 32 > 32
  EXPECT_EQ(kv->stats().num_used_slots, 8);
  EXPECT_TRUE(kv->TakeNewBlockIds(a.id()).empty());
  kv->Free(a.id());
  EXPECT_TRUE(kv->TryAdmit(b, 0));
  EXPECT_EQ(kv->CheckInvariants(), "");
}

TEST_F(KvManagerTest, PagedModeAdmitsOnTheFirstChunkAndGrowsBlockByBlock) {
  auto kv = Make(KvMode::kPaged, false, 16, 4);
  Request& a = Add({1, 2, 3, 4, 5, 6}, 10, 16);
  EXPECT_EQ(kv->BlocksToAdmit(a, 6), 2);
  ASSERT_TRUE(kv->TryAdmit(a, 6));
  EXPECT_THAT(kv->TakeNewBlockIds(a.id()), ::testing::SizeIs(2));
  RunPrompt(*kv, a);                     // 6 computed, 7 tokens
  EXPECT_EQ(kv->BlocksToGrow(a, 1), 0);  // position 6 is in the second block
  (void)a.StartIteration(2);
  (void)a.CompleteIteration(SampledToken{1, 0.0f, {}}, kT0);
  (void)a.StartIteration(3);
  (void)a.CompleteIteration(SampledToken{1, 0.0f, {}}, kT0);  // 8 computed
  EXPECT_EQ(kv->BlocksToGrow(a, 1), 1);
  ASSERT_TRUE(kv->TryGrow(a, 1));
  EXPECT_THAT(kv->TakeNewBlockIds(a.id()), ::testing::SizeIs(1));
  EXPECT_EQ(kv->stats().num_used_slots, 12);
  EXPECT_EQ(kv->NumBlocksFreedBy(a.id()), 3);
  EXPECT_EQ(kv->CheckInvariants(), "");
  kv->Free(a.id());
  EXPECT_EQ(kv->num_free_blocks(), 4);
}

TEST_F(KvManagerTest, PrefixHitsShareFullBlocksAndLeaveTheLastTokenToCompute) {
  auto kv = Make(KvMode::kReserved, true, 64, 4);
  Request& a = Add({1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 12);
  EXPECT_EQ(kv->MatchPrefix(a), 0);
  ASSERT_TRUE(kv->TryAdmit(a, 0));
  RunPrompt(*kv, a);  // registers blocks [1..4] and [5..8]
  Request& same = Add({1, 2, 3, 4, 5, 6, 7, 8}, 3, 12);
  EXPECT_EQ(kv->MatchPrefix(same), 4);  // not 8: its last token must be computed
  Request& longer = Add({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2, 12);
  EXPECT_EQ(kv->MatchPrefix(longer), 8);
  Request& other = Add({1, 2, 3, 4, 9, 9, 9, 9, 9}, 3, 12);
  EXPECT_EQ(kv->MatchPrefix(other), 4);
  ASSERT_TRUE(kv->TryAdmit(longer, 0));
  const std::vector<int32_t>& ta = *kv->block_table(a.id());
  const std::vector<int32_t>& tl = *kv->block_table(longer.id());
  EXPECT_EQ(tl[0], ta[0]);
  EXPECT_EQ(tl[1], ta[1]);
  EXPECT_NE(tl[2], ta[2]);
  EXPECT_EQ(kv->num_cached_tokens(longer.id()), 8);
  EXPECT_EQ(kv->CheckInvariants(), "");
  // a leaves: its shared blocks stay in use by `longer`, its private one is freed.
  kv->Free(a.id());
  EXPECT_EQ(kv->stats().num_blocks_in_use, 3);
  EXPECT_EQ(kv->stats().prefix_cache_hits, 8);
  EXPECT_EQ(kv->stats().prefix_cache_queries, 9 + 10);
}

// A group of sequences of one prompt (reserved mode, prefix caching): the leader's
// admission reserves the group (its 2 shared prompt blocks once, then each member's own
// part), and the group keeps the shared blocks cached until its last member is admitted.
// Here the leader ends at once and a more urgent request (admitted before the member, as
// priority order may) takes every slot the budget has free: without the group's
// references the LRU queue would hand it the shared blocks (freed behind the blocks of a
// request that left later), and the member would find its prompt gone.
TEST_F(KvManagerTest, AGroupKeepsItsSharedPromptBlocksUntilItsLastMemberIsAdmitted) {
  KvManager::Options o;
  o.n_slots = 32;
  o.block_size = 4;
  o.mode = KvMode::kReserved;
  o.prefix_caching = true;
  o.share_group_prompts = true;
  auto created = KvManager::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  KvManager& kv = **created;
  Request& z = Add({50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61}, 4, 16);
  ASSERT_TRUE(kv.TryAdmit(z, 0));
  RunPrompt(kv, z);  // 3 full blocks cached
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  Request& leader = Add(prompt, 1, 12);
  Request& member = Add(prompt, 2, 12);
  leader.set_group_id(leader.id());
  member.set_group_id(leader.id());
  ASSERT_TRUE(kv.AddGroup({&leader, &member}));
  EXPECT_TRUE(kv.WaitsForSharedPrompt(member));
  EXPECT_EQ(kv.SlotsToAdmit(leader), 8 + 4 + 4);
  ASSERT_TRUE(kv.TryAdmit(leader, 0));
  EXPECT_EQ(kv.stats().num_used_slots, 16 + 16);
  EXPECT_TRUE(kv.ReservedWithGroup(member));
  RunPrompt(kv, leader);  // its two full prompt blocks are computed and cached
  EXPECT_FALSE(kv.WaitsForSharedPrompt(member));
  EXPECT_EQ(kv.SlotsToAdmit(member), 0);
  const std::vector<int32_t> shared(kv.block_table(leader.id())->begin(), kv.block_table(leader.id())->begin() + 2);
  kv.Free(leader.id());  // it ended with its first token
  kv.Free(z.id());
  EXPECT_EQ(kv.stats().num_used_slots, 8 + 4);  // the shared blocks and the member's part
  EXPECT_EQ(kv.stats().num_group_reserved_slots, 8 + 4);
  Request& urgent = Add({90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 90, 91, 92, 93, 94, 95, 96}, 3, 20);
  ASSERT_TRUE(kv.TryAdmit(urgent, 0));  // 5 blocks: all the budget has free
  EXPECT_EQ(kv.CheckInvariants(), "");
  EXPECT_EQ(kv.MatchPrefix(member), 8);
  ASSERT_TRUE(kv.TryAdmit(member, 0));
  EXPECT_EQ(kv.num_cached_tokens(member.id()), 8);
  EXPECT_THAT(std::vector<int32_t>(kv.block_table(member.id())->begin(), kv.block_table(member.id())->begin() + 2),
              ::testing::ElementsAreArray(shared));
  EXPECT_EQ(kv.reserved_slots(member.id()), 4);
  EXPECT_EQ(kv.stats().num_used_slots, 32);
  EXPECT_EQ(kv.CheckInvariants(), "");
  kv.Free(member.id());
  kv.Free(urgent.id());
  EXPECT_EQ(kv.stats().num_used_slots, 0);
  EXPECT_EQ(kv.stats().num_group_reserved_slots, 0);
  EXPECT_EQ(kv.CheckInvariants(), "");
}

TEST_F(KvManagerTest, ValidatesItsConfiguration) {
  KvManager::Options o;
  o.n_slots = 30;
  o.block_size = 4;
  EXPECT_EQ(KvManager::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.n_slots = 0;
  EXPECT_EQ(KvManager::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orca::sched
