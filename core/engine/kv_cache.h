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
///
/// Sliding-window layers (a query at p sees only (p - window, p]) may keep their KV in a
/// local pool of their own: a request's local table has an entry per block of its positions,
/// but holds blocks only from the one of its current iteration's first visible key on
/// (SlidingWindowKvBlocks in core/common/kv_footprint.h): before each iteration's writes,
/// PrepareLocal frees the blocks every later query has left behind and takes blocks for
/// the new positions. The entries before those are stale (their blocks may hold another
/// request's KV now): attention never reads a key outside its window, so it never uses
/// them. This pool is the workers' own in every mode; the scheduler counts its blocks the
/// same way, so that it never runs dry. A prefix-cache hit cannot be served from it (the
/// hit's window was never computed here): Assign refuses one.

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
    /// The shard's sliding-window layers (by local layer index; empty or all false: none)
    /// and their window in tokens.
    std::vector<bool> local_layers;
    int32_t window = 0;
    /// Slots of the local layers' own pool; 0: they share the main pool and keep every
    /// position (llama.cpp's --swa-full).
    int64_t n_local_slots = 0;
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

  /// Before an iteration writes positions [start, start + count) (after CheckWrite): frees
  /// the request's local blocks before the one of position start - window + 1 (no query at
  /// start or later sees them). No-op without a local pool. Call it for every request of
  /// the iteration before any AllocateLocal, so that the blocks freed serve the others.
  void FreeOutOfWindow(uint64_t request_id, int32_t start);
  /// Takes local blocks for positions up to start + count - 1. ResourceExhausted (with the
  /// numbers) when the local pool has too few free; FailedPrecondition when the window of
  /// `start` was freed already (a step back past the window). No-op without a local pool.
  absl::Status AllocateLocal(uint64_t request_id, int32_t start, int32_t count);

  /// Checks that tokens [start, start + count) may be written for the request
  /// (within its reservation and block table, no gap after what is already
  /// cached). Does not modify anything.
  absl::Status CheckWrite(uint64_t request_id, int32_t start, int32_t count) const;
  void CommitWrite(uint64_t request_id, int32_t start, int32_t count);
  /// Slot index (block * block_size + offset) of a token position.
  int32_t Slot(uint64_t request_id, int32_t position) const;
  /// Blocks of a request in position order (nullptr if unknown).
  const std::vector<int32_t>* BlockTable(uint64_t request_id) const;
  /// With a local pool: a position's slot in it, and the request's local table (an entry per
  /// block of its positions; those before its window's are stale).
  int32_t LocalSlot(uint64_t request_id, int32_t position) const;
  const std::vector<int32_t>* LocalBlockTable(uint64_t request_id) const;

  /// A layer's slice of the pool it lives in (the local one for a sliding-window layer when
  /// there is a local pool).
  kernels::KvLayerView Layer(int32_t local_layer) const;
  /// True when the shard's sliding-window layers keep their KV in a pool of their own.
  bool has_local_pool() const { return num_local_blocks_ > 0; }
  bool IsLocal(int32_t local_layer) const { return has_local_pool() && layer_local_[local_layer]; }
  int32_t window() const { return options_.window; }
  int64_t local_slots_total() const { return num_local_blocks_ * options_.block_size; }
  int64_t local_slots_used() const {
    return (num_local_blocks_ - static_cast<int64_t>(local_free_.size())) * options_.block_size;
  }
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
    bool assigned = false;       // the scheduler's table
    std::vector<int32_t> local;  // local pool: an entry per block of its positions
    int32_t local_first = 0;     // entries before this one are freed (stale)
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
  // Local pool (sliding-window layers): blocks, elements per layer, memory, free blocks, and
  // each layer's index in the pool it lives in.
  int64_t num_local_blocks_ = 0;
  size_t local_layer_elems_ = 0;
  void* local_pool_ = nullptr;
  std::vector<int32_t> local_free_;
  std::vector<bool> layer_local_;
  std::vector<int32_t> layer_index_;
  std::vector<int32_t> free_blocks_;
  absl::flat_hash_map<uint64_t, Entry> requests_;
  // Assigned tables: how many tables hold each block, the blocks held, the tables.
  std::vector<int32_t> block_refs_;
  int64_t num_assigned_blocks_ = 0;
  int64_t num_assigned_requests_ = 0;
};

}  // namespace orca::engine
