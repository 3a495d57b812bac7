#include "core/sched/kv_manager.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"

namespace orca::sched {

absl::StatusOr<std::unique_ptr<KvManager>> KvManager::Create(const Options& options) {
  ORCA_ASSIGN_OR_RETURN(KvSlotBudget budget, KvSlotBudget::Create(options.n_slots, options.block_size));
  const int64_t num_blocks = options.n_slots / options.block_size;
  if ((options.mode == KvMode::kPaged || options.prefix_caching) && num_blocks > INT32_MAX / 2) {
    return absl::InvalidArgumentError(absl::StrCat("n_slots / kv_block_size (", num_blocks, ") is too many blocks"));
  }
  return std::unique_ptr<KvManager>(new KvManager(options, budget));
}

KvManager::KvManager(const Options& options, KvSlotBudget budget) : options_(options), budget_(budget) {
  if (options_.mode == KvMode::kPaged || options_.prefix_caching) {
    pool_ = std::make_unique<KvBlockPool>(static_cast<int32_t>(options_.n_slots / options_.block_size));
  }
}

KvManager::Match KvManager::FindPrefix(const Request& request) const {
  Match match;
  if (!options_.prefix_caching) return match;
  // A cached prefix has no logits: a request asking for prompt logprobs computes its whole prompt (as vLLM does).
  // Its blocks are still registered for others to reuse.
  if (request.spec().sampling.WantsPromptLogprobs()) return match;
  const std::vector<int32_t>& tokens = request.token_ids();
  const int32_t bs = options_.block_size;
  // At least the last token is computed: its logits give the next token.
  const int32_t max_blocks = (request.num_tokens() - 1) / bs;
  int32_t parent = KvBlockPool::kNoBlock;
  uint64_t hash = 0;
  for (int32_t i = 0; i < max_blocks; ++i) {
    const absl::Span<const int32_t> block(tokens.data() + static_cast<size_t>(i) * bs, bs);
    hash = KvBlockPool::HashBlock(hash, block);
    const int32_t found = pool_->Lookup(hash, parent, block);
    if (found == KvBlockPool::kNoBlock) break;
    match.blocks.push_back(found);
    match.last_hash = hash;
    parent = found;
  }
  return match;
}

int32_t KvManager::NumFreeAmong(const std::vector<int32_t>& blocks) const {
  int32_t n = 0;
  for (int32_t b : blocks) n += pool_->ref_count(b) == 0 ? 1 : 0;
  return n;
}

int32_t KvManager::MatchPrefix(const Request& request) const {
  return static_cast<int32_t>(FindPrefix(request).blocks.size()) * options_.block_size;
}

int32_t KvManager::BlocksToAdmit(const Request& request, int32_t num_new_tokens) const {
  if (!paged()) return 0;
  const Match match = FindPrefix(request);
  const int32_t hit = static_cast<int32_t>(match.blocks.size());
  return BlocksFor(static_cast<int64_t>(hit) * options_.block_size + num_new_tokens) - hit + NumFreeAmong(match.blocks);
}

bool KvManager::TryAdmit(const Request& request, int32_t num_new_tokens, int64_t reservation) {
  ORCA_CHECK(!records_.contains(request.id())) << "request " << request.id() << " admitted twice";
  ORCA_CHECK(reservation == 0 || !paged()) << "request " << request.id() << ": a reservation with paged KV";
  if (reservation == 0) reservation = request.reservation();
  Match match = FindPrefix(request);
  const int32_t hit = static_cast<int32_t>(match.blocks.size());
  int32_t total_blocks = 0;
  Record record;
  if (paged()) {
    ORCA_CHECK(num_new_tokens >= 1 && hit * options_.block_size + num_new_tokens <= request.num_tokens())
        << "request " << request.id() << " admitted for " << num_new_tokens << " tokens";
    total_blocks = BlocksFor(static_cast<int64_t>(hit) * options_.block_size + num_new_tokens);
    if (total_blocks - hit + NumFreeAmong(match.blocks) > pool_->num_free()) return false;
  } else {
    if (!budget_.TryReserve(reservation)) return false;
    record.reserved = reservation;
    total_blocks = BlocksFor(reservation);
  }
  if (pool_ != nullptr) {
    for (int32_t b : match.blocks) pool_->Acquire(b);
    record.blocks = match.blocks;
    // Reserved mode cannot run out: the blocks in use are at most n_rsrv / block_size.
    ORCA_CHECK(pool_->Allocate(total_blocks - hit, &record.blocks))
        << "request " << request.id() << ": " << total_blocks - hit << " blocks do not fit in " << pool_->num_free();
    record.num_cached_tokens = hit * options_.block_size;
    record.num_registered = hit;
    record.cached_parent = hit > 0 ? match.blocks.back() : KvBlockPool::kNoBlock;
    record.parent_hash = match.last_hash;
  }
  if (options_.prefix_caching) {
    prefix_cache_queries_ += request.num_tokens();
    prefix_cache_hits_ += record.num_cached_tokens;
  }
  records_.emplace(request.id(), std::move(record));
  return true;
}

int32_t KvManager::BlocksToGrow(const Request& request, int32_t num_new_tokens) const {
  if (!paged()) return 0;
  auto it = records_.find(request.id());
  ORCA_CHECK(it != records_.end()) << "request " << request.id() << " holds no KV";
  const int32_t have = static_cast<int32_t>(it->second.blocks.size());
  return std::max(0, BlocksFor(static_cast<int64_t>(request.num_computed_tokens()) + num_new_tokens) - have);
}

bool KvManager::TryGrow(const Request& request, int32_t num_new_tokens) {
  const int32_t need = BlocksToGrow(request, num_new_tokens);
  if (need == 0) return true;
  return pool_->Allocate(need, &records_.at(request.id()).blocks);
}

int32_t KvManager::NumBlocksFreedBy(RequestId id) const {
  auto it = records_.find(id);
  if (it == records_.end() || pool_ == nullptr) return 0;
  int32_t n = 0;
  for (int32_t b : it->second.blocks) n += pool_->ref_count(b) == 1 ? 1 : 0;
  return n;
}

void KvManager::Free(RequestId id) {
  auto it = records_.find(id);
  ORCA_CHECK(it != records_.end()) << "request " << id << " holds no KV";
  budget_.Release(it->second.reserved);
  // Last blocks first, so that the tail of a cached prefix is evicted before its head.
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_->Release(*b);
  records_.erase(it);
}

int64_t KvManager::reserved_slots(RequestId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? 0 : it->second.reserved;
}

int32_t KvManager::num_cached_tokens(RequestId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? 0 : it->second.num_cached_tokens;
}

std::vector<int32_t> KvManager::TakeNewBlockIds(RequestId id) {
  auto it = records_.find(id);
  if (it == records_.end()) return {};
  Record& r = it->second;
  std::vector<int32_t> fresh(r.blocks.begin() + r.num_blocks_sent, r.blocks.end());
  r.num_blocks_sent = static_cast<int32_t>(r.blocks.size());
  return fresh;
}

void KvManager::OnTokensComputed(const Request& request) {
  if (!options_.prefix_caching) return;
  auto it = records_.find(request.id());
  if (it == records_.end()) return;
  Record& r = it->second;
  const int32_t bs = options_.block_size;
  const int32_t full = std::min<int32_t>(request.num_computed_tokens() / bs, static_cast<int32_t>(r.blocks.size()));
  const std::vector<int32_t>& tokens = request.token_ids();
  for (; !r.chain_broken && r.num_registered < full; ++r.num_registered) {
    const absl::Span<const int32_t> block(tokens.data() + static_cast<size_t>(r.num_registered) * bs, bs);
    const uint64_t hash = KvBlockPool::HashBlock(r.parent_hash, block);
    // Whichever block caches this content now (ours, or an equal one registered first)
    // is the parent of the next level: its KV is the same.
    const int32_t cached = pool_->Register(r.blocks[r.num_registered], hash, r.cached_parent, block);
    if (!pool_->is_cached(cached)) {
      r.chain_broken = true;  // a 64-bit hash collision: the rest of this chain stays private
      break;
    }
    r.cached_parent = cached;
    r.parent_hash = hash;
  }
}

void KvManager::ClearPrefixCache() {
  if (pool_ == nullptr) return;
  pool_->ClearCache();
  // A request still holding blocks would have to re-register its whole chain; none should
  // survive a pipeline restart, so any that does simply stops registering.
  for (auto& [id, r] : records_) r.chain_broken = true;
}

KvStats KvManager::stats() const {
  KvStats s;
  s.n_slots = budget_.n_slots();
  s.num_used_slots = paged() ? static_cast<int64_t>(pool_->num_in_use()) * options_.block_size : budget_.n_rsrv();
  if (pool_ != nullptr) {
    s.num_blocks = pool_->num_blocks();
    s.num_blocks_in_use = pool_->num_in_use();
    s.num_cached_blocks = pool_->num_cached();
  }
  s.prefix_cache_queries = prefix_cache_queries_;
  s.prefix_cache_hits = prefix_cache_hits_;
  return s;
}

const std::vector<int32_t>* KvManager::block_table(RequestId id) const {
  auto it = records_.find(id);
  if (it == records_.end() || pool_ == nullptr) return nullptr;
  return &it->second.blocks;
}

std::string KvManager::CheckInvariants() const {
  int64_t reserved = 0;
  for (const auto& [id, r] : records_) reserved += r.reserved;
  if (reserved != budget_.n_rsrv()) {
    return absl::StrCat("n_rsrv ", budget_.n_rsrv(), " but requests reserve ", reserved);
  }
  if (pool_ == nullptr) return "";
  if (std::string problem = pool_->CheckInvariants(); !problem.empty()) return problem;
  std::vector<int32_t> refs(pool_->num_blocks(), 0);
  for (const auto& [id, r] : records_) {
    absl::flat_hash_set<int32_t> seen;
    for (int32_t b : r.blocks) {
      if (b < 0 || b >= pool_->num_blocks()) return absl::StrCat("request ", id, " holds block ", b);
      if (!seen.insert(b).second) return absl::StrCat("request ", id, " holds block ", b, " twice");
      ++refs[b];
    }
    if (!paged() && static_cast<int64_t>(r.blocks.size()) * options_.block_size != r.reserved) {
      return absl::StrCat("request ", id, " reserves ", r.reserved, " slots in ", r.blocks.size(), " blocks");
    }
  }
  for (int32_t b = 0; b < pool_->num_blocks(); ++b) {
    if (refs[b] != pool_->ref_count(b)) {
      return absl::StrCat("block ", b, " is in ", refs[b], " tables but has ", pool_->ref_count(b), " references");
    }
    if (refs[b] > 1 && !pool_->is_cached(b)) {
      return absl::StrCat("block ", b, " is shared by ", refs[b], " requests but is not a cached full block");
    }
  }
  return "";
}

}  // namespace orca::sched
