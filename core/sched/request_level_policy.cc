#include "core/sched/request_level_policy.h"

#include <algorithm>

#include "core/common/logging.h"

namespace orca::sched {

Selection RequestLevelPolicy::Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) {
  ORCA_CHECK(!kv.paged()) << "RequestLevelPolicy needs reserved KV";
  Selection selection;
  for (RequestId id : SelectIds(pool, kv.slot_budget(), &kv, max_bs)) {
    const Request* request = pool.Find(id);
    BatchEntry entry{id, 0};
    if (request->state() == RequestState::kQueued) {
      ReservedFootprint footprint;  // its own
      if (options_.faster_transformer) {
        const PaddedShape& shape = batch_->padded.at(id);
        footprint = shape.Footprint();
        entry.num_padding_tokens = shape.num_padding_tokens;
        entry.kv_reservation_slots = shape.kv_reservation_slots;
      }
      ORCA_CHECK(kv.TryAdmit(*request, 0, footprint)) << "request " << id << " selected beyond its KV pools";
    }
    selection.batch.push_back(entry);
  }
  return selection;
}

RequestLevelPolicy::RequestLevelPolicy(Options options) : options_(options) {
  options_.num_microbatches = std::max(1, options_.num_microbatches);
}

std::vector<RequestId> RequestLevelPolicy::RunnableMembers(const RequestPool& pool,
                                                           const std::vector<RequestId>& microbatch) const {
  std::vector<RequestId> runnable;
  for (RequestId id : microbatch) {
    const Request* request = pool.Find(id);
    if (request == nullptr || request->finished()) continue;
    if (request->in_flight()) return {};
    // Ahead of the batch's longest member (another microbatch): no KV position left.
    if (request->padding_out() && request->num_computed_tokens() >= batch_->padded.at(id).kv_reservation_slots)
      continue;
    runnable.push_back(id);
  }
  return runnable;
}

std::vector<RequestId> RequestLevelPolicy::FormBatch(const RequestPool& pool, const KvSlotBudget& budget,
                                                     const KvManager* kv, int32_t max_bs) {
  std::vector<RequestId> members;
  int64_t new_reservations = 0;
  int64_t new_local_blocks = 0;
  for (const auto& [id, request] : pool) {
    if (request->state() != RequestState::kQueued) continue;
    if (!budget.Fits(new_reservations + request->kv_reservation_slots())) break;
    const int64_t local = kv != nullptr ? kv->LocalBlocksToAdmit(*request, 0) : 0;
    if (local > 0 && new_local_blocks + local > kv->num_free_local_blocks()) break;
    new_reservations += request->kv_reservation_slots();
    new_local_blocks += local;
    members.push_back(id);
    if (static_cast<int32_t>(members.size()) == max_bs) break;
  }
  return members;
}

std::vector<RequestId> RequestLevelPolicy::FormPaddedBatch(const RequestPool& pool, const KvSlotBudget& budget,
                                                           const KvManager* kv, int32_t max_bs,
                                                           absl::flat_hash_map<RequestId, PaddedShape>& padded) const {
  struct Member {
    RequestId id;
    int32_t prompt;
    const Request* request;
  };
  std::vector<Member> members;
  int32_t longest_prompt = 0;
  int32_t largest_output = 0;
  // FasterTransformer's [batch, max_seq_len] KV: per member, its prompt plus the batch's
  // largest output, and its padding up to the longest prompt.
  const auto slots = [&budget](int32_t prompt, int32_t longest, int32_t output) {
    return budget.ReservationFor(static_cast<int64_t>(prompt) + output) + budget.ReservationFor(longest - prompt);
  };
  // The sliding-window layers' pool (KvManager): each member's window over its padded
  // positions, and its padding sequence's blocks.
  const auto local = [&budget, kv](const Request& r, int32_t longest, int32_t output) {
    if (kv == nullptr || !kv->has_local_pool()) return int64_t{0};
    ReservedFootprint f;
    f.max_positions = budget.ReservationFor(static_cast<int64_t>(r.num_prompt_tokens()) + output);
    f.num_padding_tokens = longest - r.num_prompt_tokens();
    return kv->LocalBlocksToAdmit(r, 0, f);
  };
  for (const auto& [id, request] : pool) {
    if (request->state() != RequestState::kQueued) continue;
    const int32_t prompt = request->num_prompt_tokens();
    const int32_t longest = std::max(longest_prompt, prompt);
    const int32_t output = std::max(largest_output, request->max_new_tokens());
    if (options_.max_context > 0 && static_cast<int64_t>(longest) + output > options_.max_context) break;
    int64_t footprint = slots(prompt, longest, output);
    int64_t local_blocks = local(*request, longest, output);
    for (const Member& m : members) {
      footprint += slots(m.prompt, longest, output);
      local_blocks += local(*m.request, longest, output);
    }
    if (!budget.Fits(footprint)) break;
    if (kv != nullptr && local_blocks > kv->num_free_local_blocks()) break;
    members.push_back({id, prompt, request.get()});
    longest_prompt = longest;
    largest_output = output;
    if (static_cast<int32_t>(members.size()) == max_bs) break;
  }
  std::vector<RequestId> ids;
  for (const Member& m : members) {
    PaddedShape& shape = padded[m.id];
    shape.num_padding_tokens = longest_prompt - m.prompt;
    shape.kv_reservation_slots =
        static_cast<int32_t>(budget.ReservationFor(static_cast<int64_t>(m.prompt) + largest_output));
    shape.reserved_slots = slots(m.prompt, longest_prompt, largest_output);
    ids.push_back(m.id);
  }
  return ids;
}

bool RequestLevelPolicy::AllMembersEnded(const RequestPool& pool) const {
  for (const std::vector<RequestId>& microbatch : batch_->microbatches) {
    for (RequestId id : microbatch) {
      const Request* request = pool.Find(id);
      if (request != nullptr && !request->finished() && !request->padding_out()) return false;
    }
  }
  return true;
}

std::vector<RequestId> RequestLevelPolicy::FinishedMembers(const RequestPool& pool) const {
  if (!batch_.has_value() || !options_.faster_transformer || !AllMembersEnded(pool)) return {};
  std::vector<RequestId> ended;
  for (const std::vector<RequestId>& microbatch : batch_->microbatches) {
    for (RequestId id : microbatch) {
      const Request* request = pool.Find(id);
      if (request != nullptr && request->padding_out() && !request->finished() && !request->in_flight()) {
        ended.push_back(id);
      }
    }
  }
  return ended;
}

std::vector<RequestId> RequestLevelPolicy::SelectIds(const RequestPool& pool, const KvSlotBudget& budget,
                                                     const KvManager* kv, int32_t max_bs) {
  if (max_bs <= 0) return {};
  if (batch_.has_value()) {
    // Every member ended: the batch is over, whatever is still in flight only pads out.
    if (options_.faster_transformer && AllMembersEnded(pool)) return {};
    // The running batch owns the engine: its next microbatch (in turn) whose iteration
    // returned goes. With as many microbatches as pipeline slots that is the one that just
    // returned; with more, none runs ahead while another waits.
    const size_t n = batch_->microbatches.size();
    for (size_t i = 0; i < n; ++i) {
      const size_t k = (batch_->next_microbatch + i) % n;
      std::vector<RequestId> runnable = RunnableMembers(pool, batch_->microbatches[k]);
      if (runnable.empty()) continue;
      batch_->next_microbatch = (k + 1) % n;
      return runnable;
    }
    return {};
  }
  StaticBatch batch;
  const std::vector<RequestId> members = options_.faster_transformer
                                             ? FormPaddedBatch(pool, budget, kv, max_bs, batch.padded)
                                             : FormBatch(pool, budget, kv, max_bs);
  if (members.empty()) return {};
  // Contiguous microbatches of near-equal size, as FasterTransformer splits a batch.
  const size_t parts = std::min<size_t>(options_.num_microbatches, members.size());
  for (size_t i = 0; i < parts; ++i) {
    const size_t begin = members.size() * i / parts;
    const size_t end = members.size() * (i + 1) / parts;
    batch.microbatches.emplace_back(members.begin() + begin, members.begin() + end);
  }
  batch.num_unfinished = static_cast<int32_t>(members.size());
  batch.next_microbatch = batch.microbatches.size() > 1 ? 1 : 0;
  batch_ = std::move(batch);
  return batch_->microbatches.front();
}

bool RequestLevelPolicy::Contains(RequestId id) const {
  if (!batch_.has_value()) return false;
  for (const std::vector<RequestId>& microbatch : batch_->microbatches) {
    if (std::find(microbatch.begin(), microbatch.end(), id) != microbatch.end()) return true;
  }
  return false;
}

std::vector<RequestId> RequestLevelPolicy::OnRequestFinished(const Request& request) {
  const RequestId id = request.id();
  // Not part of the batch (cancelled while queued): visible at once.
  if (!Contains(id)) return {id};

  std::vector<RequestId> visible;
  const RequestState state = request.state();
  if (state == RequestState::kFinishedStop || state == RequestState::kFinishedLength) {
    batch_->held.push_back(id);
  } else {
    visible.push_back(id);
  }
  if (--batch_->num_unfinished == 0) {
    visible.insert(visible.end(), batch_->held.begin(), batch_->held.end());
    batch_.reset();
  }
  return visible;
}

}  // namespace orca::sched
