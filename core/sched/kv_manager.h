#pragma once
/// The scheduler's KV accounting (vLLM's KVCacheManager): who holds how much KV, and —
/// when the scheduler owns the block tables — which blocks, shared through the prefix cache.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/sched/kv_block_pool.h"
#include "core/sched/kv_slot_budget.h"
#include "core/sched/request.h"

namespace orca::sched {

/// How a request's KV is accounted.
enum class KvMode : uint8_t {
  /// Paper §4.2: admission reserves max_tokens (prompt + max new tokens) slots at once, so
  /// nothing is ever evicted (Algorithm 1's n_rsrv <= n_slots).
  kReserved,
  /// Paged: admission allocates the blocks of the first chunk only, a request grows block by
  /// block, and when blocks run out the policy preempts someone (KV recomputed later).
  kPaged,
};

/// Prefix-cache and block counters for stats and metrics.
struct KvStats {
  int64_t num_used_slots = 0;  ///< Reserved: n_rsrv. Paged: blocks in use × block size.
  int64_t n_slots = 0;
  int32_t num_blocks = 0;            ///< Physical blocks (0 when the workers own the tables).
  int32_t num_blocks_in_use = 0;     ///< Referenced by some request.
  int32_t num_cached_blocks = 0;     ///< Registered in the prefix cache (in use or free).
  int64_t prefix_cache_queries = 0;  ///< Tokens looked up at admission (vLLM's name).
  int64_t prefix_cache_hits = 0;     ///< Of those, tokens found cached.
};

/// Owns n_slots of KV in blocks of `block_size` tokens and knows what each admitted
/// request holds. Block tables are the scheduler's (sent to every stage, so all pipeline
/// stages and tensor-parallel shards agree on which block holds what; core/sched/README.md)
/// in paged mode and whenever prefix caching is on; otherwise the workers allocate their own
/// blocks from NewRequestData::max_tokens, as in the paper, and only counts are kept here.
///
/// Prefix caching: a request's full blocks are registered (content-addressed, see
/// KvBlockPool) once the iteration that filled them has returned — never earlier, so a hit
/// never reads KV that a failed or still-running iteration was writing. That holds for
/// blocks its decodes filled too (an increment writes the K/V of the token it takes as
/// input, so a block is full once the iteration whose input was its last token returned):
/// they continue the prompt's key chain, so the next chat turn (prompt + the model's reply +
/// a new user turn) reuses them. The last, partial block is never registered. Admission reuses the
/// longest cached run of full blocks that leaves at least one token to compute (the last
/// token's logits are needed); those blocks are shared, never written again.
///
/// Not thread-safe; the Scheduler's thread only.
class KvManager {
 public:
  struct Options {
    int64_t n_slots = 0;     ///< >= 1, a multiple of block_size.
    int32_t block_size = 1;  ///< >= 1.
    KvMode mode = KvMode::kReserved;
    bool prefix_caching = false;
  };
  /// INVALID_ARGUMENT names the bad value.
  static absl::StatusOr<std::unique_ptr<KvManager>> Create(const Options& options);

  KvMode mode() const { return options_.mode; }
  bool paged() const { return options_.mode == KvMode::kPaged; }
  bool prefix_caching() const { return options_.prefix_caching; }
  /// True when requests carry block ids to the workers.
  bool owns_block_tables() const { return pool_ != nullptr; }
  int32_t block_size() const { return options_.block_size; }
  /// Slots a request of `max_tokens` tokens may use: rounded up to a block.
  int64_t ReservationFor(int64_t max_tokens) const { return budget_.ReservationFor(max_tokens); }
  /// Algorithm 1's n_rsrv / n_slots (reserved mode; unused when paged).
  const KvSlotBudget& slot_budget() const { return budget_; }
  bool holds(RequestId id) const { return records_.contains(id); }

  /// Tokens of `request`'s prefix found in the prefix cache: whole blocks, leaving at least
  /// one token to compute; 0 without prefix caching. Changes nothing.
  [[nodiscard]] int32_t MatchPrefix(const Request& request) const;
  /// Free blocks admitting `request` with a first chunk of `num_new_tokens` (after its
  /// prefix hit) would take; 0 in reserved mode.
  [[nodiscard]] int32_t BlocksToAdmit(const Request& request, int32_t num_new_tokens) const;
  /// Admits a QUEUED request. Reserved: reserves request.reservation() slots if they fit
  /// (and with block tables, the prefix hit plus fresh blocks for the rest). Paged: the
  /// prefix hit plus blocks for `num_new_tokens` more tokens. False, changing nothing, when
  /// it does not fit. `reservation` > 0 (reserved mode only) reserves that many slots in
  /// place of request.reservation() (the FasterTransformer baseline's padded footprint).
  [[nodiscard]] bool TryAdmit(const Request& request, int32_t num_new_tokens, int64_t reservation = 0);
  /// Free blocks an admitted request needs to compute `num_new_tokens` more tokens
  /// (0 in reserved mode: its reservation covers everything).
  [[nodiscard]] int32_t BlocksToGrow(const Request& request, int32_t num_new_tokens) const;
  /// Allocates them; false, changing nothing, when too few blocks are free.
  [[nodiscard]] bool TryGrow(const Request& request, int32_t num_new_tokens);
  /// Blocks that would become free if `id` released its KV (those only it references).
  [[nodiscard]] int32_t NumBlocksFreedBy(RequestId id) const;
  /// Releases everything `id` holds (finish or preemption); its registered blocks stay
  /// cached. Unknown ids are a bug (checked).
  void Free(RequestId id);

  /// Prompt tokens its admission found cached.
  [[nodiscard]] int32_t num_cached_tokens(RequestId id) const;
  /// Slots `id` reserves in reserved mode (0 when it holds none, and with paged KV).
  [[nodiscard]] int64_t reserved_slots(RequestId id) const;
  /// Blocks added to `id`'s table since the last call (empty without block tables).
  [[nodiscard]] std::vector<int32_t> TakeNewBlockIds(RequestId id);
  /// `request`'s iteration returned: registers its newly filled full blocks (prefix caching).
  void OnTokensComputed(const Request& request);
  /// The workers lost their KV (pipeline restart): nothing cached may be reused.
  void ClearPrefixCache();

  int32_t num_free_blocks() const { return pool_ ? pool_->num_free() : 0; }
  [[nodiscard]] KvStats stats() const;
  /// Block table of an admitted request (nullptr without block tables or when unknown).
  [[nodiscard]] const std::vector<int32_t>* block_table(RequestId id) const;
  /// "" when the counts, reference counts and tables agree, else the first problem: every
  /// block's reference count is the number of tables holding it, a block in two tables is
  /// a cached (full, read-only) one, and the slot budget matches the reservations.
  [[nodiscard]] std::string CheckInvariants() const;

 private:
  struct Record {
    int64_t reserved = 0;                           // slots counted in budget_ (reserved mode)
    std::vector<int32_t> blocks;                    // block table (owned tables only)
    int32_t num_blocks_sent = 0;                    // blocks already carried by a plan
    int32_t num_cached_tokens = 0;                  // prefix hit at admission
    int32_t num_registered = 0;                     // leading blocks registered (or hit)
    int32_t cached_parent = KvBlockPool::kNoBlock;  // cached block of the last registered level
    uint64_t parent_hash = 0;                       // key of the last registered level
    bool chain_broken = false;                      // no further block of it can be registered
  };
  struct Match {
    std::vector<int32_t> blocks;
    uint64_t last_hash = 0;
  };

  KvManager(const Options& options, KvSlotBudget budget);
  Match FindPrefix(const Request& request) const;
  int32_t NumFreeAmong(const std::vector<int32_t>& blocks) const;
  int32_t BlocksFor(int64_t tokens) const {
    return static_cast<int32_t>((tokens + options_.block_size - 1) / options_.block_size);
  }

  Options options_;
  KvSlotBudget budget_;
  std::unique_ptr<KvBlockPool> pool_;  // null: the workers own the block tables
  absl::flat_hash_map<RequestId, Record> records_;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
};

}  // namespace orca::sched
