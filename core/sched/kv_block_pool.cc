#include "core/sched/kv_block_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/common/split_mix64.h"

namespace orca::sched {

KvBlockPool::KvBlockPool(int32_t num_blocks)
    : ref_counts_(num_blocks, 0),
      generations_(num_blocks, 0),
      entries_(num_blocks),
      prev_(num_blocks, kNoBlock),
      next_(num_blocks, kNoBlock),
      in_queue_(num_blocks, false) {
  for (int32_t b = 0; b < num_blocks; ++b) PushBack(b);
}

uint64_t KvBlockPool::HashBlock(uint64_t parent_hash, absl::Span<const int32_t> tokens) {
  uint64_t h = SplitMix64Hash(parent_hash ^ 0x6f726361ULL);
  for (int32_t t : tokens) h = SplitMix64Hash(h ^ static_cast<uint32_t>(t));
  return h;
}

void KvBlockPool::PushFront(int32_t b) {
  prev_[b] = kNoBlock;
  next_[b] = head_;
  if (head_ != kNoBlock) prev_[head_] = b;
  head_ = b;
  if (tail_ == kNoBlock) tail_ = b;
  in_queue_[b] = true;
  ++num_free_;
}

void KvBlockPool::PushBack(int32_t b) {
  next_[b] = kNoBlock;
  prev_[b] = tail_;
  if (tail_ != kNoBlock) next_[tail_] = b;
  tail_ = b;
  if (head_ == kNoBlock) head_ = b;
  in_queue_[b] = true;
  ++num_free_;
}

void KvBlockPool::Unlink(int32_t b) {
  ORCA_CHECK(in_queue_[b]) << "block " << b << " is not free";
  if (prev_[b] != kNoBlock) next_[prev_[b]] = next_[b];
  if (next_[b] != kNoBlock) prev_[next_[b]] = prev_[b];
  if (head_ == b) head_ = next_[b];
  if (tail_ == b) tail_ = prev_[b];
  prev_[b] = next_[b] = kNoBlock;
  in_queue_[b] = false;
  --num_free_;
}

void KvBlockPool::Uncache(int32_t b) {
  Entry& e = entries_[b];
  if (!e.cached) return;
  cache_.erase(e.hash);
  e = Entry{};
  ++generations_[b];
}

bool KvBlockPool::Allocate(int32_t n, std::vector<int32_t>* out) {
  if (n < 0 || n > num_free_) return false;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = head_;
    Unlink(b);
    Uncache(b);  // eviction
    ref_counts_[b] = 1;
    out->push_back(b);
  }
  return true;
}

int32_t KvBlockPool::Lookup(uint64_t hash, int32_t parent, absl::Span<const int32_t> tokens) const {
  auto it = cache_.find(hash);
  if (it == cache_.end()) return kNoBlock;
  const Entry& e = entries_[it->second];
  if (e.parent != parent) return kNoBlock;
  if (parent != kNoBlock && e.parent_generation != generations_[parent]) return kNoBlock;
  if (!std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) return kNoBlock;
  return it->second;
}

void KvBlockPool::Acquire(int32_t b) {
  if (ref_counts_[b] == 0) Unlink(b);
  ++ref_counts_[b];
}

void KvBlockPool::Release(int32_t b) {
  ORCA_CHECK(ref_counts_[b] > 0) << "block " << b << " released while free";
  if (--ref_counts_[b] > 0) return;
  if (entries_[b].cached) {
    PushBack(b);
  } else {
    PushFront(b);
  }
}

int32_t KvBlockPool::Register(int32_t b, uint64_t hash, int32_t parent, absl::Span<const int32_t> tokens) {
  ORCA_CHECK(ref_counts_[b] > 0) << "registering free block " << b;
  if (entries_[b].cached) return b;
  auto it = cache_.find(hash);
  if (it != cache_.end()) {
    // Same content computed twice (two requests prefilled it at once), or a 64-bit hash
    // collision: keep the earlier block; this one stays private.
    const int32_t existing = it->second;
    return Lookup(hash, parent, tokens) == existing ? existing : b;
  }
  Entry& e = entries_[b];
  e.cached = true;
  e.hash = hash;
  e.parent = parent;
  e.parent_generation = parent == kNoBlock ? 0 : generations_[parent];
  e.tokens.assign(tokens.begin(), tokens.end());
  cache_.emplace(hash, b);
  return b;
}

void KvBlockPool::ClearCache() {
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (!entries_[b].cached) continue;
    Uncache(b);
    if (in_queue_[b]) {  // a free block that held a cached prefix: now worth nothing
      Unlink(b);
      PushFront(b);
    }
  }
}

std::string KvBlockPool::CheckInvariants() const {
  int32_t queued = 0;
  for (int32_t b = head_, prev = kNoBlock; b != kNoBlock; prev = b, b = next_[b]) {
    if (prev_[b] != prev) return absl::StrCat("free queue broken at block ", b);
    if (ref_counts_[b] != 0)
      return absl::StrCat("block ", b, " is queued as free with ", ref_counts_[b], " references");
    if (++queued > num_blocks()) return "free queue has a cycle";
  }
  if (queued != num_free_) return absl::StrCat("free queue holds ", queued, " blocks, num_free says ", num_free_);
  int32_t cached = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (ref_counts_[b] < 0) return absl::StrCat("block ", b, " has ", ref_counts_[b], " references");
    if ((ref_counts_[b] == 0) != in_queue_[b])
      return absl::StrCat("block ", b, " free but not queued, or queued in use");
    if (!entries_[b].cached) continue;
    ++cached;
    auto it = cache_.find(entries_[b].hash);
    if (it == cache_.end() || it->second != b) return absl::StrCat("cached block ", b, " missing from the cache map");
  }
  if (cached != static_cast<int32_t>(cache_.size())) return "cache map and cached blocks disagree";
  return "";
}

}  // namespace orca::sched
