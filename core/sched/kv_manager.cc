#include "core/sched/kv_manager.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/common/kv_footprint.h"
#include "core/common/logging.h"
#include "core/common/status_macros.h"

namespace orca::sched {

absl::StatusOr<std::unique_ptr<KvManager>> KvManager::Create(const Options& options) {
  ORCA_ASSIGN_OR_RETURN(KvSlotBudget budget, KvSlotBudget::Create(options.n_slots, options.block_size));
  const int64_t num_blocks = options.n_slots / options.block_size;
  if ((options.mode == KvMode::kPaged || options.prefix_caching) && num_blocks > INT32_MAX / 2) {
    return absl::InvalidArgumentError(absl::StrCat("n_slots / kv_block_size (", num_blocks, ") is too many blocks"));
  }
  if (options.sliding_window < 0 || options.n_local_slots < 0 || options.max_prefill_chunk < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sliding_window (", options.sliding_window, "), n_local_slots (",
                                                   options.n_local_slots, ") and max_prefill_chunk (",
                                                   options.max_prefill_chunk, ") must be >= 0"));
  }
  if (options.n_local_slots > 0 && options.sliding_window == 0) {
    return absl::InvalidArgumentError(absl::StrCat("n_local_slots (", options.n_local_slots,
                                                   ") is a pool for sliding-window layers but sliding_window is 0"));
  }
  if (options.n_local_slots > 0 && options.n_local_slots < options.block_size) {
    return absl::InvalidArgumentError(absl::StrCat("n_local_slots (", options.n_local_slots,
                                                   ") holds no whole KV block of ", options.block_size, " tokens"));
  }
  return std::unique_ptr<KvManager>(new KvManager(options, budget));
}

KvManager::KvManager(const Options& options, KvSlotBudget budget)
    : options_(options), budget_(budget), num_local_blocks_(options.n_local_slots / options.block_size) {
  if (options_.mode == KvMode::kPaged || options_.prefix_caching) {
    pool_ = std::make_unique<KvBlockPool>(static_cast<int32_t>(options_.n_slots / options_.block_size));
  }
}

KvManager::Match KvManager::FindPrefix(const Request& request) const {
  if (!options_.prefix_caching) return {};
  // A cached prefix has no logits: a request asking for prompt logprobs computes its whole prompt (as vLLM does).
  // Its blocks are still registered for others to reuse.
  if (request.spec().sampling.WantsPromptLogprobs()) return {};
  // At least the last token is computed: its logits give the next token.
  return FindPrefixOf(request.token_ids(), (request.num_tokens() - 1) / options_.block_size);
}

KvManager::Match KvManager::FindPrefixOf(absl::Span<const int32_t> tokens, int32_t max_blocks) const {
  Match match;
  const int32_t bs = options_.block_size;
  max_blocks = std::min<int32_t>(max_blocks, static_cast<int32_t>(tokens.size()) / bs);
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

int64_t KvManager::SharedPromptSlots(int64_t num_prompt_tokens, int64_t num_sequences,
                                     bool wants_prompt_logprobs) const {
  if (!shares_group_prompts() || num_sequences < 2 || wants_prompt_logprobs) return 0;
  return SharedPromptBlocks(num_prompt_tokens, options_.block_size) * options_.block_size;
}

bool KvManager::AddGroup(const std::vector<const Request*>& members) {
  if (members.empty()) return false;
  const Request& leader = *members.front();
  bool prompt_logprobs = false;
  for (const Request* m : members) prompt_logprobs |= m->spec().sampling.WantsPromptLogprobs();
  const int64_t shared_slots =
      SharedPromptSlots(leader.num_prompt_tokens(), static_cast<int64_t>(members.size()), prompt_logprobs);
  if (shared_slots == 0) return false;
  Group group;
  group.leader = leader.id();
  group.num_shared_blocks = static_cast<int32_t>(shared_slots / options_.block_size);
  int64_t footprint = shared_slots;
  for (const Request* m : members) {
    ORCA_CHECK(m->state() == RequestState::kQueued && !holds(m->id()) && m->group_id() == leader.id() &&
               m->spec().prompt_token_ids == leader.spec().prompt_token_ids)
        << "request " << m->id() << " cannot join group " << leader.id();
    const int64_t own = m->kv_reservation_slots() - shared_slots;
    group.waiting.emplace(m->id(), own);
    footprint += own;
  }
  // Reserved mode admits the whole group at once: it must fit.
  if (!paged() && footprint > budget_.n_slots()) return false;
  groups_.emplace(leader.id(), std::move(group));
  return true;
}

KvManager::Group* KvManager::GroupOf(const Request& request) {
  if (request.group_id() == 0) return nullptr;
  auto it = groups_.find(request.group_id());
  return it == groups_.end() ? nullptr : &it->second;
}

const KvManager::Group* KvManager::GroupOf(const Request& request) const {
  if (request.group_id() == 0) return nullptr;
  auto it = groups_.find(request.group_id());
  return it == groups_.end() ? nullptr : &it->second;
}

bool KvManager::WaitsForSharedPrompt(const Request& request) const {
  const Group* group = GroupOf(request);
  return group != nullptr && request.id() != group->leader && !group->ready && group->waiting.contains(request.id());
}

bool KvManager::ReservedWithGroup(const Request& request) const {
  const Group* group = GroupOf(request);
  return !paged() && group != nullptr && group->reserved && group->waiting.contains(request.id());
}

int64_t KvManager::SlotsToAdmit(const Request& request) const {
  if (paged()) return 0;
  const Group* group = GroupOf(request);
  if (group != nullptr && group->waiting.contains(request.id())) {
    if (group->reserved) return 0;
    if (request.id() == group->leader) {
      int64_t slots = static_cast<int64_t>(group->num_shared_blocks) * options_.block_size;
      for (const auto& [id, own] : group->waiting) slots += own;
      return slots;
    }
  }
  return request.kv_reservation_slots();
}

void KvManager::ForgetQueued(const Request& request) {
  Group* group = GroupOf(request);
  if (group == nullptr) return;
  auto it = group->waiting.find(request.id());
  if (it == group->waiting.end()) return;
  if (request.id() == group->leader) {
    Dissolve(*group);  // nobody computes the shared prompt now
    MaybeErase(*group);
    return;
  }
  if (!paged() && group->reserved) budget_.Release(it->second);
  group->waiting.erase(it);
  if (group->waiting.empty()) ReleaseHeld(*group);
  MaybeErase(*group);
}

void KvManager::JoinGroup(Group& group, const Request& request, int32_t num_hit_blocks) {
  Record& record = records_.at(request.id());
  const bool leader = request.id() == group.leader;
  record.group = group.leader;
  if (!paged()) {
    // The shared blocks' slots are the group's: its admission counted them once.
    const int64_t shared_slots = static_cast<int64_t>(group.num_shared_blocks) * options_.block_size;
    record.reserved -= shared_slots;
    record.num_group_blocks = group.num_shared_blocks;
    ++group.num_holding;
    if (leader) {
      group.reserved = true;
      group.shared_reserved = shared_slots;
    }
  }
  group.waiting.erase(request.id());
  if (leader && num_hit_blocks >= group.num_shared_blocks) {
    MakeReady(group, request);  // the prompt was cached already
  } else if (group.ready && group.waiting.empty()) {
    ReleaseHeld(group);
  }
  MaybeErase(group);
}

void KvManager::MakeReady(Group& group, const Request& leader) {
  group.ready = true;
  if (group.waiting.empty()) return;
  if (!paged()) {
    // The members will hit the cached chain of the prompt: it must be the leader's own
    // blocks, which the group's reservation counts (another request may have registered
    // equal blocks first), and the group keeps it from eviction until they are admitted.
    const Record& record = records_.at(leader.id());
    const Match match = FindPrefixOf(leader.spec().prompt_token_ids, group.num_shared_blocks);
    if (static_cast<int32_t>(match.blocks.size()) != group.num_shared_blocks ||
        !std::equal(match.blocks.begin(), match.blocks.end(), record.blocks.begin())) {
      Dissolve(group);
      return;
    }
    for (int32_t b : match.blocks) pool_->Acquire(b);
    group.held = match.blocks;
  }
}

void KvManager::Dissolve(Group& group) {
  if (!paged() && group.reserved) {
    for (const auto& [id, own] : group.waiting) budget_.Release(own);
  }
  group.waiting.clear();
  ReleaseHeld(group);
}

void KvManager::ReleaseHeld(Group& group) {
  for (int32_t b : group.held) pool_->Release(b);
  group.held.clear();
}

void KvManager::MaybeErase(Group& group) {
  if (!group.waiting.empty() || group.num_holding > 0) return;
  budget_.Release(group.shared_reserved);
  ReleaseHeld(group);
  groups_.erase(group.leader);
}

int64_t KvManager::LocalBlocksOf(int64_t start, int64_t count) const {
  if (!has_local_pool()) return 0;
  return SlidingWindowKvBlocks(start, count, options_.sliding_window, options_.block_size);
}

int64_t KvManager::LocalBlocksBound(int64_t num_positions, int64_t longest_iteration) const {
  if (!has_local_pool()) return 0;
  int64_t chunk = std::max<int64_t>(1, longest_iteration);
  if (options_.max_prefill_chunk > 0) chunk = std::min<int64_t>(chunk, options_.max_prefill_chunk);
  return SlidingWindowKvBound(num_positions, chunk, options_.sliding_window, options_.block_size);
}

int64_t KvManager::LocalReservation(int64_t max_positions, int64_t longest_iteration,
                                    int32_t num_padding_tokens) const {
  const int64_t padding = num_padding_tokens > 0 ? LocalBlocksOf(0, num_padding_tokens) : 0;
  return LocalBlocksBound(max_positions, longest_iteration) + padding;
}

int64_t KvManager::LocalBlocksToAdmit(const Request& request, int32_t num_new_tokens,
                                      const ReservedFootprint& footprint) const {
  if (!has_local_pool()) return 0;
  if (paged()) return LocalBlocksOf(MatchPrefix(request), num_new_tokens);
  // Reserved mode is never preempted: its tokens are its prompt, computed in one iteration
  // (or in chunks of max_prefill_chunk), then one token per decode.
  const int64_t max_positions = footprint.max_positions > 0
                                    ? footprint.max_positions
                                    : static_cast<int64_t>(request.num_tokens()) + request.max_new_tokens();
  return LocalReservation(max_positions, request.num_tokens(), footprint.num_padding_tokens);
}

bool KvManager::FitsToAdmit(const Request& request, int32_t num_new_tokens) const {
  if (LocalBlocksToAdmit(request, num_new_tokens) > num_free_local_blocks()) return false;
  return paged() ? BlocksToAdmit(request, num_new_tokens) <= num_free_blocks()
                 : budget_.Fits(SlotsToAdmit(request));
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

bool KvManager::TryAdmit(const Request& request, int32_t num_new_tokens, const ReservedFootprint& footprint) {
  ORCA_CHECK(!records_.contains(request.id())) << "request " << request.id() << " admitted twice";
  ORCA_CHECK((footprint.slots == 0 && footprint.max_positions == 0 && footprint.num_padding_tokens == 0) || !paged())
      << "request " << request.id() << ": a reservation with paged KV";
  int64_t reserved_slots = footprint.slots;
  ORCA_CHECK(!WaitsForSharedPrompt(request)) << "request " << request.id() << " admitted before its group's prompt";
  Group* group = GroupOf(request);
  if (group != nullptr && !group->waiting.contains(request.id())) group = nullptr;
  if (reserved_slots == 0) reserved_slots = request.kv_reservation_slots();
  Match match = FindPrefix(request);
  const int32_t hit = static_cast<int32_t>(match.blocks.size());
  int32_t total_blocks = 0;
  Record record;
  // The local pool first: a refusal must change nothing.
  record.local = LocalBlocksToAdmit(request, num_new_tokens, footprint);
  if (record.local > num_free_local_blocks()) return false;
  if (has_local_pool() && !paged()) {
    record.local_padding = footprint.num_padding_tokens > 0 ? LocalBlocksOf(0, footprint.num_padding_tokens) : 0;
    record.max_positions = footprint.max_positions > 0
                               ? footprint.max_positions
                               : static_cast<int64_t>(request.num_tokens()) + request.max_new_tokens();
  }
  if (paged()) {
    ORCA_CHECK(num_new_tokens >= 1 && hit * options_.block_size + num_new_tokens <= request.num_tokens())
        << "request " << request.id() << " admitted for " << num_new_tokens << " tokens";
    total_blocks = BlocksFor(static_cast<int64_t>(hit) * options_.block_size + num_new_tokens);
    if (total_blocks - hit + NumFreeAmong(match.blocks) > pool_->num_free()) return false;
  } else {
    // A sharing group's members hit its shared blocks, which the group keeps cached.
    ORCA_CHECK(group == nullptr || request.id() == group->leader || hit == group->num_shared_blocks)
        << "request " << request.id() << " of group " << group->leader << " hit " << hit << " of "
        << group->num_shared_blocks << " shared blocks";
    if (!budget_.TryReserve(group != nullptr ? SlotsToAdmit(request) : reserved_slots)) return false;
    record.reserved = reserved_slots;
    total_blocks = BlocksFor(reserved_slots);
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
  num_local_used_ += record.local;
  records_.emplace(request.id(), std::move(record));
  if (group != nullptr) JoinGroup(*group, request, hit);
  return true;
}

int32_t KvManager::BlocksToGrow(const Request& request, int32_t num_new_tokens) const {
  if (!paged()) return 0;
  auto it = records_.find(request.id());
  ORCA_CHECK(it != records_.end()) << "request " << request.id() << " holds no KV";
  const int32_t have = static_cast<int32_t>(it->second.blocks.size());
  return std::max(0, BlocksFor(static_cast<int64_t>(request.num_computed_tokens()) + num_new_tokens) - have);
}

int64_t KvManager::LocalBlocksToGrow(const Request& request, int32_t num_new_tokens) const {
  if (!paged() || !has_local_pool()) return 0;
  auto it = records_.find(request.id());
  ORCA_CHECK(it != records_.end()) << "request " << request.id() << " holds no KV";
  return LocalBlocksOf(request.num_computed_tokens(), num_new_tokens) - it->second.local;
}

bool KvManager::FitsToGrow(const Request& request, int32_t num_new_tokens) const {
  return BlocksToGrow(request, num_new_tokens) <= num_free_blocks() &&
         LocalBlocksToGrow(request, num_new_tokens) <= num_free_local_blocks();
}

bool KvManager::TryGrow(const Request& request, int32_t num_new_tokens) {
  if (!FitsToGrow(request, num_new_tokens)) return false;
  Record& record = records_.at(request.id());
  const int32_t need = BlocksToGrow(request, num_new_tokens);
  if (need > 0) ORCA_CHECK(pool_->Allocate(need, &record.blocks)) << "request " << request.id() << " could not grow";
  const int64_t local = LocalBlocksToGrow(request, num_new_tokens);
  record.local += local;
  num_local_used_ += local;
  return true;
}

void KvManager::OnIterationStarted(const Request& request, int32_t start, int32_t count) {
  auto it = records_.find(request.id());
  if (it == records_.end()) return;
  Record& r = it->second;
  r.last_start = start;
  r.last_count = count;
  if (paged() || !has_local_pool() || r.local_shrunk || start < request.num_prompt_tokens()) return;
  // Its first decode: from now on every iteration computes one token. The workers free the
  // blocks of its longer prefill iterations in this plan, before they allocate for others.
  const int64_t decode = LocalReservation(r.max_positions, 1, 0) + r.local_padding;
  r.local_shrunk = true;
  if (decode >= r.local) return;
  num_local_used_ -= r.local - decode;
  r.local = decode;
}

int64_t KvManager::NumLocalBlocksFreedBy(RequestId id) const {
  return local_blocks(id);  // the local pool's blocks are never shared
}

int64_t KvManager::local_blocks(RequestId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? 0 : it->second.local;
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
  const Record record = std::move(it->second);
  records_.erase(it);
  budget_.Release(record.reserved);
  num_local_used_ -= record.local;
  // Last blocks first, so that the tail of a cached prefix is evicted before its head.
  for (auto b = record.blocks.rbegin(); b != record.blocks.rend(); ++b) pool_->Release(*b);
  auto g = groups_.find(record.group);
  if (record.group == 0 || g == groups_.end()) return;
  Group& group = g->second;
  if (record.num_group_blocks > 0) --group.num_holding;
  if (id == group.leader && !group.ready) Dissolve(group);  // it left before computing the shared blocks
  MaybeErase(group);
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
  auto g = groups_.find(r.group);
  if (r.group == 0 || g == groups_.end() || g->second.leader != request.id() || g->second.ready) return;
  if (r.chain_broken) {
    Dissolve(g->second);
  } else if (r.num_registered >= g->second.num_shared_blocks) {
    MakeReady(g->second, request);
  }
  MaybeErase(g->second);
}

void KvManager::ClearPrefixCache() {
  if (pool_ == nullptr) return;
  // The shared prompts are gone with the workers' KV: members still waiting start over alone.
  std::vector<RequestId> groups;
  for (const auto& [id, group] : groups_) groups.push_back(id);
  for (RequestId id : groups) {
    Dissolve(groups_.at(id));
    MaybeErase(groups_.at(id));
  }
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
  s.num_local_used_slots = num_local_used_ * options_.block_size;
  s.n_local_slots = num_local_blocks_ * options_.block_size;
  for (const auto& [id, group] : groups_) {
    s.num_group_reserved_slots += group.shared_reserved;
    if (group.reserved && !paged()) {
      for (const auto& [member, own] : group.waiting) s.num_group_reserved_slots += own;
    }
  }
  return s;
}

const std::vector<int32_t>* KvManager::block_table(RequestId id) const {
  auto it = records_.find(id);
  if (it == records_.end() || pool_ == nullptr) return nullptr;
  return &it->second.blocks;
}

std::string KvManager::CheckGroupInvariants() const {
  for (const auto& [gid, group] : groups_) {
    int32_t holding = 0;
    for (const auto& [id, r] : records_) holding += r.group == gid && r.num_group_blocks > 0 ? 1 : 0;
    if (holding != group.num_holding) {
      return absl::StrCat("group ", gid, " counts ", group.num_holding, " members holding its blocks, not ", holding);
    }
    if (group.waiting.empty() && group.num_holding == 0) return absl::StrCat("group ", gid, " outlived its members");
    if (!group.held.empty() && (!group.ready || group.waiting.empty())) {
      return absl::StrCat("group ", gid, " holds blocks while no member waits for them");
    }
    for (int32_t b : group.held) {
      if (!pool_->is_cached(b)) return absl::StrCat("group ", gid, " holds block ", b, " which is not cached");
    }
  }
  return "";
}

std::string KvManager::CheckLocalInvariants() const {
  int64_t used = 0;
  for (const auto& [id, r] : records_) {
    used += r.local;
    if (!has_local_pool()) {
      if (r.local != 0) return absl::StrCat("request ", id, " holds ", r.local, " local blocks without a local pool");
      continue;
    }
    if (r.last_count == 0) continue;  // admitted in a plan still being made
    const int64_t held = LocalBlocksOf(r.last_start, r.last_count) + r.local_padding;
    if (paged() ? r.local != held : r.local < held) {
      return absl::StrCat("request ", id, " counts ", r.local, " local blocks but the workers hold ", held,
                          " after its iteration [", r.last_start, ", ", r.last_start + r.last_count, ")");
    }
  }
  if (used != num_local_used_) {
    return absl::StrCat("the local pool counts ", num_local_used_, " blocks in use but requests hold ", used);
  }
  if (num_local_used_ < 0 || num_local_used_ > num_local_blocks_) {
    return absl::StrCat("local blocks in use (", num_local_used_, ") outside [0, ", num_local_blocks_, "]");
  }
  return "";
}

std::string KvManager::CheckInvariants() const {
  if (std::string problem = CheckLocalInvariants(); !problem.empty()) return problem;
  int64_t reserved = stats().num_group_reserved_slots;
  for (const auto& [id, r] : records_) reserved += r.reserved;
  if (reserved != budget_.n_rsrv()) {
    return absl::StrCat("n_rsrv ", budget_.n_rsrv(), " but requests and groups reserve ", reserved);
  }
  if (pool_ == nullptr) return "";
  if (std::string problem = CheckGroupInvariants(); !problem.empty()) return problem;
  if (std::string problem = pool_->CheckInvariants(); !problem.empty()) return problem;
  std::vector<int32_t> refs(pool_->num_blocks(), 0);
  for (const auto& [id, r] : records_) {
    absl::flat_hash_set<int32_t> seen;
    for (int32_t b : r.blocks) {
      if (b < 0 || b >= pool_->num_blocks()) return absl::StrCat("request ", id, " holds block ", b);
      if (!seen.insert(b).second) return absl::StrCat("request ", id, " holds block ", b, " twice");
      ++refs[b];
    }
    if (!paged() && static_cast<int64_t>(r.blocks.size() - r.num_group_blocks) * options_.block_size != r.reserved) {
      return absl::StrCat("request ", id, " reserves ", r.reserved, " slots in ", r.blocks.size(), " blocks (",
                          r.num_group_blocks, " of them its group's)");
    }
  }
  for (const auto& [gid, group] : groups_) {
    for (int32_t b : group.held) ++refs[b];
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
