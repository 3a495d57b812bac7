#pragma once
/// The physical KV blocks of the scheduler-owned block tables: reference counts, an LRU
/// free queue and the prefix cache (content-addressed full blocks). vLLM v1's BlockPool.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace orca::sched {

/// Blocks 0..num_blocks-1, each either in use (ref_count > 0: in some request's block
/// table) or free. Free blocks wait in one queue, least recently used first; a free block
/// may still be cached (its content registered under a key) and is reused by a prefix hit
/// until allocation takes it, which evicts it. Freed cached blocks join the queue's MRU end,
/// freed uncached blocks its LRU end (they hold nothing worth keeping).
///
/// Cache key of a full block: hash(parent block's key, its block_size token ids). K/V of a
/// position depend on every earlier token and on the model, its dtype and the block size,
/// which are fixed for the pool of one engine replica; so (parent, tokens) is the content.
/// Lookups are exact, never trusting the hash alone: the entry must have the same tokens and
/// the same parent block *registration* (block id and generation; a block's generation
/// changes whenever it is evicted, so a child of an evicted parent never matches again).
class KvBlockPool {
 public:
  static constexpr int32_t kNoBlock = -1;

  explicit KvBlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  /// Free blocks, cached or not (all of them can be allocated).
  int32_t num_free() const { return num_free_; }
  int32_t num_in_use() const { return num_blocks() - num_free_; }
  /// Blocks whose content is registered (in use or free).
  int32_t num_cached() const { return static_cast<int32_t>(cache_.size()); }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }
  bool is_cached(int32_t block) const { return entries_[block].cached; }

  /// Appends `n` free blocks (LRU first, evicting what they cached) to `out`, each with one
  /// reference. False, changing nothing, when fewer than `n` are free.
  [[nodiscard]] bool Allocate(int32_t n, std::vector<int32_t>* out);
  /// The cached block holding `tokens` after `parent` (kNoBlock for a request's first
  /// block) under `hash`, or kNoBlock.
  [[nodiscard]] int32_t Lookup(uint64_t hash, int32_t parent, absl::Span<const int32_t> tokens) const;
  /// Takes one more reference on a block (a prefix hit); a free block leaves the queue.
  void Acquire(int32_t block);
  /// Drops one reference; at zero the block is free.
  void Release(int32_t block);
  /// Registers an in-use full block's content. Returns the block now cached for that content:
  /// `block`, or the one registered earlier for the same content (then `block` stays
  /// uncached), or `block` if it was registered already.
  int32_t Register(int32_t block, uint64_t hash, int32_t parent, absl::Span<const int32_t> tokens);
  /// Forgets every cached content (the workers' KV is gone); reference counts stay.
  void ClearCache();

  /// "" when reference counts, the free queue and the cache agree, else the first problem.
  [[nodiscard]] std::string CheckInvariants() const;

  /// The key of a full block: its parent's key and its tokens.
  static uint64_t HashBlock(uint64_t parent_hash, absl::Span<const int32_t> tokens);

 private:
  struct Entry {
    bool cached = false;
    uint64_t hash = 0;
    int32_t parent = kNoBlock;
    uint64_t parent_generation = 0;
    std::vector<int32_t> tokens;
  };
  void Uncache(int32_t block);
  void PushFront(int32_t block);
  void PushBack(int32_t block);
  void Unlink(int32_t block);

  std::vector<int32_t> ref_counts_;
  std::vector<uint64_t> generations_;
  std::vector<Entry> entries_;
  absl::flat_hash_map<uint64_t, int32_t> cache_;  // hash → block
  // Free queue: a doubly linked list over block ids (kNoBlock ends it).
  std::vector<int32_t> prev_, next_;
  std::vector<bool> in_queue_;
  int32_t head_ = kNoBlock, tail_ = kNoBlock;
  int32_t num_free_ = 0;
};

}  // namespace orca::sched
