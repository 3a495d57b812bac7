#pragma once
/// The scheduler's KV accounting (vLLM's KVCacheManager): who holds how much KV, and —
/// when the scheduler owns the block tables — which blocks, shared through the prefix cache.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/sched/kv_block_pool.h"
#include "core/sched/kv_slot_budget.h"
#include "core/sched/request.h"

namespace orca::sched {

/// How a request's KV is accounted.
enum class KvMode : uint8_t {
  /// Paper §4.2: admission reserves kv_reservation_slots (prompt + max new tokens) at once, so
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
  /// Reserved mode: slots that groups hold beside their admitted members' reservations (their
  /// shared prompt blocks, counted once, and the members not admitted yet). Part of
  /// num_used_slots.
  int64_t num_group_reserved_slots = 0;
  /// The sliding-window layers' own pool (both 0 without one): slots reserved in it by
  /// admitted requests (reserved mode) or held after their last scheduled iteration (paged),
  /// and its size, in whole blocks.
  int64_t num_local_used_slots = 0;
  int64_t n_local_slots = 0;
};

/// What a reserved-mode admission takes when it is not the request's own footprint (the
/// FasterTransformer baseline's padded member, RequestLevelPolicy). Zeros: the request's own.
struct ReservedFootprint {
  /// Main-pool slots, in place of its kv_reservation_slots.
  int64_t slots = 0;
  /// Positions it computes at most, in place of prompt + max_new_tokens (a padded member
  /// decodes until its batch ends).
  int64_t max_positions = 0;
  /// Its throwaway padding sequence of this many positions, computed at its initiation and
  /// held until its release (ScheduledRequest::num_padding_tokens).
  int32_t num_padding_tokens = 0;
};

/// Owns n_slots of KV in blocks of `block_size` tokens and knows what each admitted
/// request holds. Block tables are the scheduler's (sent to every stage, so all pipeline
/// stages and tensor-parallel shards agree on which block holds what; core/sched/README.md)
/// in paged mode and whenever prefix caching is on; otherwise the workers allocate their own
/// blocks from NewRequestData::kv_reservation_slots, as in the paper, and only counts are kept here.
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
/// Groups (n sequences of one prompt, Scheduler::SubmitGroup) share their prompt's full KV
/// blocks when the options allow it (share_group_prompts with prefix caching; AddGroup says
/// whether a group does): the group's first request (its leader) is admitted and computes
/// the prompt; the others wait (WaitsForSharedPrompt) until the iteration that computed the
/// leader's first H = SharedPromptBlocks(prompt) blocks has returned and registered them,
/// then each is admitted with those H blocks as a prefix hit and computes only the rest of
/// its prompt — vLLM v1's fan-out of n > 1 through the prefix cache. Every block stays
/// read-only once shared. In reserved mode the leader's admission reserves the whole
/// group at once, H × block_size + each member's own (prompt + max new tokens, rounded,
/// minus the H shared blocks): the shared blocks' slots belong to the group until no member
/// holds them, each member's own part to it; and the group keeps a reference on the shared
/// blocks until every member has been admitted, so that nothing evicts them meanwhile. With
/// paged KV the group keeps no references (the members hit the cache like anyone; a lost
/// hit costs compute, never a reservation). A leader that leaves before its shared blocks
/// are computed, a pipeline restart (ClearPrefixCache) or blocks that another request
/// registered first end the sharing: the waiting members become ordinary requests.
///
/// KV by layer type. Models with sliding-window ("local") attention layers (Gemma 2/3,
/// Mistral, StarCoder2) may have the workers keep those layers' KV in a pool of its own
/// (Options::n_local_slots), where a request holds, after an iteration that computed its
/// positions [start, start + count), exactly SlidingWindowKvBlocks(start, count, window,
/// block_size) blocks (core/common/kv_footprint.h) until its next iteration or its release;
/// a worker whose local pool overflows fails the iteration. The full-attention layers use
/// the main pool exactly as above. So a second count is kept, in blocks:
///  - reserved mode: admission also reserves SlidingWindowKvBound(its positions, its longest
///    iteration, ...) local blocks — its longest iteration is its prompt, or the policy's
///    prefill chunk cap (Options::max_prefill_chunk) — plus its FasterTransformer padding
///    sequence's SlidingWindowKvBlocks(0, padding) (ReservedFootprint), so that nothing is
///    ever evicted there either; once its first decode is scheduled (OnIterationStarted) the
///    reservation shrinks to the decode bound (max_chunk 1) plus the padding's. A request
///    that does not fit waits as for n_slots.
///  - paged: admission and growth set what it holds to its scheduled iteration's
///    SlidingWindowKvBlocks (fewer or more than before: blocks that left its window are
///    freed); a plan over the pool is never made (FitsToGrow / FitsToAdmit: the policy
///    preempts or does not admit, as for main blocks).
/// The workers free before they allocate within an iteration, and every stage processes
/// plans in order, so the count after each plan bounds what they hold. Without a local pool
/// (n_local_slots 0) every local count is 0 and nothing changes. Prefix caching (and so
/// group sharing) is not combined with a local pool: a cached prefix's window is gone.
///
/// Not thread-safe; the Scheduler's thread only.
class KvManager {
 public:
  struct Options {
    int64_t n_slots = 0;     ///< >= 1, a multiple of block_size.
    int32_t block_size = 1;  ///< >= 1.
    KvMode mode = KvMode::kReserved;
    bool prefix_caching = false;
    /// Groups share their prompt's full blocks (with prefix_caching only; the request-level
    /// baseline's static batches cannot wait for a leader, so it leaves this off).
    bool share_group_prompts = false;
    /// Sliding-window layers' window (tokens, >= 0; 0 = the model has none) and the slots
    /// of the workers' pool for their KV (>= 0; 0 = none). A pool needs a window and
    /// counts whole blocks (n_local_slots / block_size).
    int32_t sliding_window = 0;
    int64_t n_local_slots = 0;
    /// The most prompt tokens the policy computes for one request in one iteration (its
    /// chunked-prefill cap; 0 = whole prompts): reserved mode's local bound needs it.
    int32_t max_prefill_chunk = 0;
  };
  /// INVALID_ARGUMENT names the bad value.
  static absl::StatusOr<std::unique_ptr<KvManager>> Create(const Options& options);

  KvMode mode() const { return options_.mode; }
  bool paged() const { return options_.mode == KvMode::kPaged; }
  bool prefix_caching() const { return options_.prefix_caching; }
  /// True when requests carry block ids to the workers.
  bool owns_block_tables() const { return pool_ != nullptr; }
  int32_t block_size() const { return options_.block_size; }
  /// The kv_reservation_slots of a request of `num_tokens` tokens: rounded up to a block.
  int64_t ReservationFor(int64_t num_tokens) const { return budget_.ReservationFor(num_tokens); }
  /// Algorithm 1's n_rsrv / n_slots (reserved mode; unused when paged).
  const KvSlotBudget& slot_budget() const { return budget_; }
  bool holds(RequestId id) const { return records_.contains(id); }
  /// True when the sliding-window layers have a pool of their own to count.
  bool has_local_pool() const { return num_local_blocks_ > 0; }
  int32_t sliding_window() const { return options_.sliding_window; }
  /// Blocks of the local pool, and those not reserved (reserved mode) or held (paged).
  int64_t num_local_blocks() const { return num_local_blocks_; }
  int64_t num_free_local_blocks() const { return num_local_blocks_ - num_local_used_; }
  /// The most local blocks a request of `num_positions` positions ever needs at once when
  /// its longest iteration computes `longest_iteration` tokens (capped by
  /// max_prefill_chunk); 0 without a local pool. Submit refuses a request over the pool.
  [[nodiscard]] int64_t LocalBlocksBound(int64_t num_positions, int64_t longest_iteration) const;
  /// True when groups of sequences of one prompt may share its full blocks here.
  bool shares_group_prompts() const { return options_.share_group_prompts && options_.prefix_caching; }

  /// Slots a group of `num_sequences` sequences of a `num_prompt_tokens`-token prompt saves
  /// per sequence after the first by sharing the prompt's full blocks: H × block_size, or 0
  /// when such a group would not share (one sequence, prompt logprobs asked — they need the
  /// whole prompt computed —, no full block before the last prompt token, or sharing off).
  [[nodiscard]] int64_t SharedPromptSlots(int64_t num_prompt_tokens, int64_t num_sequences,
                                          bool wants_prompt_logprobs) const;
  /// Declares QUEUED `members` (one prompt, in submission order; the first computes the
  /// prompt) a group that shares the prompt's full blocks. False, changing nothing, when
  /// they would not share (SharedPromptSlots is 0, or in reserved mode the whole group would
  /// not fit n_slots at once): they are then ordinary requests.
  bool AddGroup(const std::vector<const Request*>& members);
  /// True for a QUEUED member of a sharing group that may not be admitted yet: its leader
  /// has not computed (and registered) the shared prompt blocks. Its KV is reserved with
  /// the leader's (reserved mode), so skipping it lets no later request take its slots.
  [[nodiscard]] bool WaitsForSharedPrompt(const Request& request) const;
  /// True for a QUEUED member of a sharing group whose leader's admission reserved its KV
  /// (reserved mode): admitted for KV purposes, it starts when it fits in a batch.
  [[nodiscard]] bool ReservedWithGroup(const Request& request) const;
  /// Slots admitting QUEUED `request` adds to n_rsrv (reserved mode; 0 when paged): its
  /// kv_reservation_slots; for a sharing group's leader, the whole group's; for a member whose
  /// leader was admitted, nothing (its part is reserved already).
  [[nodiscard]] int64_t SlotsToAdmit(const Request& request) const;
  /// A QUEUED request finished (cancelled, expired) without being admitted: its place in
  /// its group (and what the group reserved for it) goes.
  void ForgetQueued(const Request& request);

  /// Tokens of `request`'s prefix found in the prefix cache: whole blocks, leaving at least
  /// one token to compute; 0 without prefix caching. Changes nothing.
  [[nodiscard]] int32_t MatchPrefix(const Request& request) const;
  /// Free blocks admitting `request` with a first chunk of `num_new_tokens` (after its
  /// prefix hit) would take; 0 in reserved mode.
  [[nodiscard]] int32_t BlocksToAdmit(const Request& request, int32_t num_new_tokens) const;
  /// Local blocks admitting QUEUED `request` takes: reserved mode, its reservation there
  /// for `footprint` (`num_new_tokens` unused); paged, its first chunk's
  /// SlidingWindowKvBlocks. 0 without a local pool.
  [[nodiscard]] int64_t LocalBlocksToAdmit(const Request& request, int32_t num_new_tokens,
                                           const ReservedFootprint& footprint = {}) const;
  /// Paged: BlocksToAdmit and LocalBlocksToAdmit are free.
  [[nodiscard]] bool FitsToAdmit(const Request& request, int32_t num_new_tokens) const;
  /// Admits a QUEUED request. Reserved: reserves SlotsToAdmit(request) slots if they fit
  /// (and with block tables, the prefix hit plus fresh blocks for the rest). Paged: the
  /// prefix hit plus blocks for `num_new_tokens` more tokens. Either way its
  /// LocalBlocksToAdmit too. False, changing nothing, when it does not fit. A non-zero
  /// `footprint` (reserved mode only) replaces its own (the FasterTransformer baseline's
  /// padded member). Never called for a request that WaitsForSharedPrompt.
  [[nodiscard]] bool TryAdmit(const Request& request, int32_t num_new_tokens, const ReservedFootprint& footprint = {});
  /// Free blocks an admitted request needs to compute `num_new_tokens` more tokens
  /// (0 in reserved mode: its reservation covers everything).
  [[nodiscard]] int32_t BlocksToGrow(const Request& request, int32_t num_new_tokens) const;
  /// Paged: local blocks it holds more (negative: fewer) after computing `num_new_tokens`
  /// more tokens than after its last iteration; 0 in reserved mode or without a local pool.
  [[nodiscard]] int64_t LocalBlocksToGrow(const Request& request, int32_t num_new_tokens) const;
  /// Paged: BlocksToGrow and LocalBlocksToGrow are free (always true in reserved mode).
  [[nodiscard]] bool FitsToGrow(const Request& request, int32_t num_new_tokens) const;
  /// Allocates them (both pools); false, changing nothing, when they do not fit.
  [[nodiscard]] bool TryGrow(const Request& request, int32_t num_new_tokens);
  /// `request`'s iteration computing its positions [start, start + count) was put in a plan.
  /// Reserved mode with a local pool: at its first decode its local reservation shrinks to
  /// the decode bound (the blocks it gives back are free for the next plan's admissions,
  /// after the workers freed them in this one). Records the iteration for CheckInvariants.
  void OnIterationStarted(const Request& request, int32_t start, int32_t count);
  /// Blocks that would become free if `id` released its KV (those only it references).
  [[nodiscard]] int32_t NumBlocksFreedBy(RequestId id) const;
  /// Local blocks that would become free if `id` released its KV.
  [[nodiscard]] int64_t NumLocalBlocksFreedBy(RequestId id) const;
  /// Releases everything `id` holds (finish or preemption); its registered blocks stay
  /// cached. Unknown ids are a bug (checked).
  void Free(RequestId id);

  /// Prompt tokens its admission found cached.
  [[nodiscard]] int32_t num_cached_tokens(RequestId id) const;
  /// Slots `id` reserves in reserved mode (0 when it holds none, and with paged KV); for a
  /// member of a sharing group, its own part (the group holds the shared blocks' slots).
  [[nodiscard]] int64_t reserved_slots(RequestId id) const;
  /// Local blocks `id` reserves (reserved mode) or holds (paged); 0 when none.
  [[nodiscard]] int64_t local_blocks(RequestId id) const;
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
  /// block's reference count is the number of tables (and groups) holding it, a block in
  /// two tables is a cached (full, read-only) one, and the slot budget matches the
  /// reservations of the requests and the groups. Local pool: the requests' local blocks
  /// add up to its count, within the pool, and each covers what the workers hold after its
  /// last scheduled iteration (paged: equals it).
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
    RequestId group = 0;                            // the sharing group it was admitted in (0: none)
    int32_t num_group_blocks = 0;                   // reserved mode: leading blocks whose slots the group holds
    int64_t local = 0;                              // local blocks: reserved, or held after its last iteration (paged)
    int64_t local_padding = 0;                      // reserved mode: of `local`, its padding sequence's
    int64_t max_positions = 0;                      // reserved mode: positions it computes at most
    bool local_shrunk = false;                      // reserved mode: `local` is the decode bound now
    int32_t last_start = 0, last_count = 0;         // its last scheduled iteration (count 0: none yet)
  };
  struct Match {
    std::vector<int32_t> blocks;
    uint64_t last_hash = 0;
  };
  // A group sharing one prompt's full blocks, keyed by its leader's id (Request::group_id).
  struct Group {
    RequestId leader = 0;
    int32_t num_shared_blocks = 0;  // H
    // Members not admitted yet (the leader until its admission), each with its own part of
    // the group's reservation: its reservation minus the shared blocks (reserved by the
    // group once `reserved`).
    absl::btree_map<RequestId, int64_t> waiting;
    bool reserved = false;        // reserved mode: the leader's admission reserved the group
    int64_t shared_reserved = 0;  // reserved mode: the shared blocks' slots, until no member holds them
    int32_t num_holding = 0;      // reserved mode: admitted members whose tables start with them
    bool ready = false;           // the leader's shared blocks are computed and registered
    std::vector<int32_t> held;    // reserved mode: the group's references on them while members wait
  };

  KvManager(const Options& options, KvSlotBudget budget);
  Match FindPrefix(const Request& request) const;
  // The cached run of full blocks holding `tokens`, at most `max_blocks` of them.
  Match FindPrefixOf(absl::Span<const int32_t> tokens, int32_t max_blocks) const;
  Group* GroupOf(const Request& request);
  const Group* GroupOf(const Request& request) const;
  // `id`, just admitted (its record made), leaves `group`'s waiting members.
  void JoinGroup(Group& group, const Request& request, int32_t num_hit_blocks);
  // The leader has computed the shared blocks: the waiting members may be admitted.
  void MakeReady(Group& group, const Request& leader);
  // Sharing ends for the members still waiting (they become ordinary requests). The
  // caller then calls MaybeErase.
  void Dissolve(Group& group);
  void ReleaseHeld(Group& group);
  // Erases `group` once nothing of it is left (may invalidate the reference).
  void MaybeErase(Group& group);
  std::string CheckGroupInvariants() const;
  int32_t NumFreeAmong(const std::vector<int32_t>& blocks) const;
  // SlidingWindowKvBlocks with this pool's window and block size (0 without a pool).
  int64_t LocalBlocksOf(int64_t start, int64_t count) const;
  // Reserved mode: the local reservation of a request of `max_positions` positions whose
  // longest iteration computes `longest_iteration` tokens, plus its padding sequence's.
  int64_t LocalReservation(int64_t max_positions, int64_t longest_iteration, int32_t num_padding_tokens) const;
  std::string CheckLocalInvariants() const;
  int32_t BlocksFor(int64_t tokens) const {
    return static_cast<int32_t>((tokens + options_.block_size - 1) / options_.block_size);
  }

  Options options_;
  KvSlotBudget budget_;
  std::unique_ptr<KvBlockPool> pool_;  // null: the workers own the block tables
  absl::flat_hash_map<RequestId, Record> records_;
  absl::flat_hash_map<RequestId, Group> groups_;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
  int64_t num_local_blocks_ = 0;  // 0: no local pool
  int64_t num_local_used_ = 0;
};

}  // namespace orca::sched
