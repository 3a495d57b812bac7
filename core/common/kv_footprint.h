#pragma once
/// How many KV slots a request, or a group of n sequences of one prompt, takes: the one
/// formula the scheduler's admission checks (core/sched) and the gateway's limits (its
/// default max_new_tokens, the "can never fit" 400) both use. In core/common, header-only,
/// so that the gateway depends on no part of core/sched.

#include <cstdint>

namespace orca {

/// `tokens` slots rounded up to whole blocks of `block_size` (>= 1): what one request of
/// prompt + max new tokens reserves (KvSlotBudget::ReservationFor).
inline int64_t KvReservationSlots(int64_t tokens, int32_t block_size) {
  const int64_t bs = block_size < 1 ? 1 : block_size;
  return (tokens + bs - 1) / bs * bs;
}

/// Full KV blocks of a `num_prompt_tokens`-token prompt that the sequences of one group can
/// share: every block before the one holding the last prompt token. That token is always
/// computed by each sequence (its logits give the sequence's first token), and the block
/// holding it is written by each sequence's own tokens, so it cannot be shared.
inline int64_t SharedPromptBlocks(int64_t num_prompt_tokens, int32_t block_size) {
  if (num_prompt_tokens < 1 || block_size < 1) return 0;
  return (num_prompt_tokens - 1) / block_size;
}

/// KV slots of a group of `num_sequences` (>= 1) sequences of one prompt, each generating up
/// to `max_new_tokens`. Without sharing each sequence reserves its own prompt + max new
/// tokens; with `shares_prompt` (the scheduler shares a group's prompt blocks: see
/// KvManager) the shared prompt blocks are counted once:
///
///   n × R − (n − 1) × H × block_size,  R = KvReservationSlots(prompt + max_new), H = SharedPromptBlocks(prompt)
///
/// which is prompt + n × max_new_tokens up to block rounding.
inline int64_t GroupKvFootprint(int64_t num_prompt_tokens, int64_t num_sequences, int64_t max_new_tokens,
                                int32_t block_size, bool shares_prompt) {
  const int64_t per_sequence = KvReservationSlots(num_prompt_tokens + max_new_tokens, block_size);
  const int64_t shared =
      shares_prompt && num_sequences > 1 ? SharedPromptBlocks(num_prompt_tokens, block_size) * block_size : 0;
  return num_sequences * per_sequence - (num_sequences - 1) * shared;
}

/// The most KV slots one request or group may reserve with `share` (in (0, 1]) of
/// `n_slots`: share × n_slots rounded down to whole blocks, at least one block, at most
/// n_slots.
inline int64_t MaxRequestKvSlots(int64_t n_slots, double share, int32_t block_size) {
  const int64_t bs = block_size < 1 ? 1 : block_size;
  if (!(share < 1.0)) return n_slots;
  const auto slots = static_cast<int64_t>(static_cast<double>(n_slots) * share);
  const int64_t blocks = slots / bs;
  return blocks < 1 ? (bs <= n_slots ? bs : n_slots) : blocks * bs;
}

/// KV blocks a sliding-window layer keeps for one request while an iteration computes its
/// positions [start, start + count) (count >= 1) with a window of `window` (>= 1) tokens, a
/// query at position p seeing the keys at (p - window, p]: the blocks from the one holding
/// the first key its first query sees, max(0, start - window + 1), through the one holding
/// start + count - 1. Every earlier block is out of every later query's sight and is freed.
/// The workers' KvCache holds exactly these in its local pool after the iteration's writes,
/// until the request's next iteration or its release; the scheduler counts the same.
inline int64_t SlidingWindowKvBlocks(int64_t start, int64_t count, int32_t window, int32_t block_size) {
  const int64_t bs = block_size < 1 ? 1 : block_size;
  const int64_t first_key = start - window + 1 > 0 ? start - window + 1 : 0;
  return (start + count - 1) / bs - first_key / bs + 1;
}

/// The most SlidingWindowKvBlocks a request of `total_tokens` positions ever holds when none
/// of its iterations computes more than `max_chunk` (>= 1) tokens: its whole length's blocks,
/// or (window + max_chunk - 2) / block_size + 2 (the window plus one iteration's tokens,
/// spread over one block more than they fill), whichever is fewer.
inline int64_t SlidingWindowKvBound(int64_t total_tokens, int64_t max_chunk, int32_t window, int32_t block_size) {
  const int64_t bs = block_size < 1 ? 1 : block_size;
  const int64_t whole = (total_tokens + bs - 1) / bs;
  const int64_t span = (window + max_chunk - 2) / bs + 2;
  return whole < span ? whole : span;
}

}  // namespace orca
