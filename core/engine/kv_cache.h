#pragma once
/// The KV manager of one shard (paper §4.2, "KV slots"): a pool pre-allocated
/// from the slot budget (n_slots tokens, rounded up to whole blocks) for the
/// shard's layers and KV heads, handed out per request through a block table.
/// A request reserves its maximum length (prompt + max new tokens) on first
/// schedule, as ORCA's scheduler does, and frees everything on release.
/// Alternatively the scheduler owns the block tables (paged KV, prefix
/// caching; core/sched/README.md) and hands each request its block ids, which
/// may be shared with other requests (cached prefix blocks, read-only): then
/// this pool keeps no free list of its own, and a release only drops the
/// table — the blocks' contents stay for the prefix cache to reuse. The two
/// kinds of table never mix in one pool.
/// Misuse (unknown id, double reservation, writing past the reservation or
/// the block table, skipping positions) is an error, never silent corruption.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/include/backend.h"

namespace orca::engine {

class KvCache {
 public:
  struct Options {
    int32_t num_layers = 0;    ///< layers of this shard
    int32_t num_kv_heads = 0;  ///< KV heads of this shard
    int32_t head_dim = 0;
    int64_t n_slots = 0;  ///< token budget (paper: n_slots)
    int32_t block_size = 16;
    DType dtype = DType::kF32;
  };
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const Options& options, kernels::Backend* backend);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  /// Reserves blocks for `kv_reservation_slots` token positions. AlreadyExists if the id
  /// holds a reservation; ResourceExhausted (with the numbers) if the pool cannot fit it.
  absl::Status Reserve(uint64_t request_id, int32_t kv_reservation_slots);
  /// Takes a scheduler-chosen block table: `block_ids` hold positions 0, 1, …
  /// in order, the first `num_cached` positions already written (a prefix-cache
  /// hit); positions stay below `kv_reservation_slots`. InvalidArgument for a block id
  /// outside the pool or listed twice, or num_cached beyond the table;
  /// AlreadyExists if the id holds KV; FailedPrecondition while requests with
  /// self-reserved blocks exist. Changes nothing on error.
  absl::Status Assign(uint64_t request_id, int32_t kv_reservation_slots, absl::Span<const int32_t> block_ids,
                      int32_t num_cached);
  /// Appends scheduler-chosen blocks to an assigned table (same checks).
  absl::Status AppendBlocks(uint64_t request_id, absl::Span<const int32_t> block_ids);
  /// Removes the last `count` blocks of an assigned table (undoes AppendBlocks).
  void DropLastBlocks(uint64_t request_id, size_t count);
  /// Frees a reservation (or drops an assigned table). NotFound for an unknown id.
  absl::Status Release(uint64_t request_id);
  bool Contains(uint64_t request_id) const { return requests_.contains(request_id); }
  /// Frees every reservation (a new engine-master session starts from scratch).
  void ReleaseAll();

  /// Checks that tokens [start, start + count) may be written for the request
  /// (within its reservation and block table, no gap after what is already
  /// cached). Does not modify anything.
  absl::Status CheckWrite(uint64_t request_id, int32_t start, int32_t count) const;
  void CommitWrite(uint64_t request_id, int32_t start, int32_t count);
  /// Slot index (block * block_size + offset) of a token position.
  int32_t Slot(uint64_t request_id, int32_t position) const;
  /// Blocks of a request in position order (nullptr if unknown).
  const std::vector<int32_t>* BlockTable(uint64_t request_id) const;

  kernels::KvLayerView Layer(int32_t local_layer) const;
  int32_t block_size() const { return options_.block_size; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_blocks_.size()); }
  int64_t slots_total() const { return num_blocks_ * options_.block_size; }
  /// Slots of the blocks some request holds (self-reserved or assigned).
  int64_t slots_used() const { return (num_blocks_ - num_free_blocks() + num_assigned_blocks_) * options_.block_size; }
  int64_t num_requests() const { return static_cast<int64_t>(requests_.size()); }
  size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    std::vector<int32_t> blocks;
    int32_t kv_reservation_slots = 0;
    int32_t num_cached = 0;
    bool assigned = false;  // the scheduler's table
  };
  absl::Status CheckBlockIds(uint64_t request_id, absl::Span<const int32_t> block_ids,
                             const std::vector<int32_t>& existing) const;
  KvCache(const Options& options, kernels::Backend* backend) : options_(options), backend_(backend) {}

  Options options_;
  kernels::Backend* backend_;
  int64_t num_blocks_ = 0;
  size_t layer_elems_ = 0;  // elements of K (or V) per layer
  size_t bytes_ = 0;
  void* pool_ = nullptr;
  std::vector<int32_t> free_blocks_;
  absl::flat_hash_map<uint64_t, Entry> requests_;
  // Assigned tables: how many tables hold each block, the blocks held, the tables.
  std::vector<int32_t> block_refs_;
  int64_t num_assigned_blocks_ = 0;
  int64_t num_assigned_requests_ = 0;
};

}  // namespace orca::engine
