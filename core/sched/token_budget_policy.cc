#include "core/sched/token_budget_policy.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "core/common/logging.h"

namespace orca::sched {

/// The state of one Select call.
class TokenBudgetPolicy::Round {
 public:
  Round(const RequestPool& pool, KvManager& kv, int32_t max_bs, int32_t max_num_batched_tokens,
        int32_t long_prefill_token_threshold, const RequestOrder& order)
      : kv_(kv),
        max_bs_(max_bs),
        chunk_cap_(long_prefill_token_threshold > 0 ? long_prefill_token_threshold
                                                    : std::numeric_limits<int64_t>::max()),
        order_(order) {
    budget_left_ = max_num_batched_tokens > 0 ? max_num_batched_tokens : std::numeric_limits<int64_t>::max() / 2;
    for (const auto& [id, request] : pool) {
      const Request* r = request.get();
      if (r->finished()) continue;
      if (r->in_flight()) {
        in_flight_.push_back(r);
        if (r->num_generated_tokens() > 0) ++num_decoding_in_flight_;
      } else if (r->admitted()) {
        running_.push_back(r);
      } else {
        waiting_.push_back(r);
      }
    }
    // The pool is in arrival order, which is FCFS already.
    if (order_.order() != SchedulingOrder::kFcfs) {
      auto before = [this](const Request* a, const Request* b) { return order_.Before(*a, *b); };
      std::sort(running_.begin(), running_.end(), before);
      std::sort(waiting_.begin(), waiting_.end(), before);
    }
  }

  /// Step 1 (decodes = true) or 2 (prompt chunks of admitted requests).
  void ScheduleAdmitted(bool decodes) {
    for (const Request* r : running_) {
      if (Full()) return;
      if (preempted_.contains(r->id()) || (r->next_phase() == Phase::kIncrement) != decodes) continue;
      const int64_t cap = decodes ? budget_left_ : std::min(budget_left_, chunk_cap_);
      const auto n = static_cast<int32_t>(std::min<int64_t>(r->num_uncomputed_tokens(), cap));
      if (!MakeRoomToGrow(*r, n)) continue;
      ORCA_CHECK(kv_.TryGrow(*r, n)) << "request " << r->id() << " could not grow";
      Add(*r, n);
    }
  }

  /// Step 3: QUEUED requests in order, stopping at the first that does not fit. First,
  /// whatever the order, the group members whose KV their leader's admission reserved
  /// (reserved mode): admitted for KV already, they must not wait behind a request that
  /// does not fit — their finishing is what makes room for it.
  void AdmitQueued() {
    if (!selection_.preempted.empty()) return;  // no admissions in an iteration that preempted
    for (const Request* q : waiting_) {
      if (Full()) return;
      if (!kv_.ReservedWithGroup(*q) || kv_.WaitsForSharedPrompt(*q)) continue;
      const int32_t hit = kv_.MatchPrefix(*q);
      const auto n = static_cast<int32_t>(std::min<int64_t>({q->num_tokens() - hit, budget_left_, chunk_cap_}));
      ORCA_CHECK(kv_.TryAdmit(*q, n)) << "request " << q->id() << " reserved with its group does not fit";
      Add(*q, n);
    }
    for (const Request* q : waiting_) {
      if (Full()) return;
      // A group member waits for its leader's prompt blocks; it holds no place others could
      // take (reserved mode: its KV is reserved with the leader's).
      if (kv_.WaitsForSharedPrompt(*q) || kv_.holds(q->id())) continue;
      const int32_t hit = kv_.MatchPrefix(*q);
      const auto n = static_cast<int32_t>(std::min<int64_t>({q->num_tokens() - hit, budget_left_, chunk_cap_}));
      if (kv_.paged() && !MakeRoomToAdmit(*q, n)) return;
      if (!kv_.TryAdmit(*q, n)) return;
      Add(*q, n);
      if (!selection_.preempted.empty()) return;
    }
  }

  /// After step 1: caps what prompt chunks may add to the batch's decodes.
  void LimitChunks(const TokenBudgetPolicy& policy) {
    const auto num_decodes = static_cast<int64_t>(selection_.batch.size());
    if (num_decodes == 0 && num_decoding_in_flight_ == 0) return;
    if (std::optional<int64_t> limit = policy.ChunkTokenLimit(num_decodes)) {
      budget_left_ = std::min(budget_left_, *limit);
    }
  }

  Selection Take() && { return std::move(selection_); }

 private:
  bool Full() const { return static_cast<int32_t>(selection_.batch.size()) >= max_bs_ || budget_left_ <= 0; }

  void Add(const Request& r, int32_t n) {
    selection_.batch.push_back(BatchEntry{r.id(), n});
    budget_left_ -= n;
  }

  // Preemptable for `requester`: admitted, between iterations, after it in order.
  bool IsVictimFor(const Request& requester, const Request& v) const {
    return &v != &requester && !preempted_.contains(v.id()) && order_.Before(requester, v);
  }

  // The admitted request after `requester` that is served last, or nullptr.
  const Request* WorstVictimFor(const Request& requester) const {
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (IsVictimFor(requester, **it)) return *it;
    }
    return nullptr;
  }

  void Preempt(const Request& victim) {
    kv_.Free(victim.id());
    auto& batch = selection_.batch;
    auto it =
        std::find_if(batch.begin(), batch.end(), [&](const BatchEntry& e) { return e.request_id == victim.id(); });
    if (it != batch.end()) {
      budget_left_ += it->num_tokens;
      batch.erase(it);
    }
    selection_.preempted.push_back(victim.id());
    preempted_.insert(victim.id());
  }

  // Frees blocks for admitted `r` to compute `n` more tokens, preempting the requests after it
  // (worst first). False when it must skip this iteration (or preempted itself).
  bool MakeRoomToGrow(const Request& r, int32_t n) {
    while (!kv_.FitsToGrow(r, n)) {
      if (const Request* victim = WorstVictimFor(r)) {
        Preempt(*victim);
        continue;
      }
      // Nothing after it is preemptable. Blocks come back when a later request's iteration
      // returns; if none is in flight, it is itself the request to give way.
      const bool later_in_flight =
          std::any_of(in_flight_.begin(), in_flight_.end(), [&](const Request* f) { return order_.Before(r, *f); });
      if (!later_in_flight) Preempt(r);
      return false;
    }
    return true;
  }

  // Frees blocks (main and local) to admit `q` with a first chunk of `n` tokens, but only
  // when preempting the requests after it is sure to free enough. False: `q` does not fit.
  bool MakeRoomToAdmit(const Request& q, int32_t n) {
    int64_t freeable = kv_.num_free_blocks();
    int64_t freeable_local = kv_.num_free_local_blocks();
    for (const Request* v : running_) {
      if (!IsVictimFor(q, *v)) continue;
      freeable += kv_.NumBlocksFreedBy(v->id());
      freeable_local += kv_.NumLocalBlocksFreedBy(v->id());
    }
    if (kv_.BlocksToAdmit(q, n) > freeable || kv_.LocalBlocksToAdmit(q, n) > freeable_local) return false;
    while (!kv_.FitsToAdmit(q, n)) {
      const Request* victim = WorstVictimFor(q);
      if (victim == nullptr) return false;
      Preempt(*victim);
    }
    return true;
  }

  KvManager& kv_;
  int32_t max_bs_;
  int64_t chunk_cap_;  // prompt tokens of one request per iteration
  const RequestOrder& order_;
  int64_t budget_left_ = 0;
  int64_t num_decoding_in_flight_ = 0;     // in the pipeline, having generated a token
  std::vector<const Request*> running_;    // admitted, between iterations, in order
  std::vector<const Request*> waiting_;    // QUEUED, in order
  std::vector<const Request*> in_flight_;  // admitted, in the pipeline
  absl::flat_hash_set<RequestId> preempted_;
  Selection selection_;
};

Selection TokenBudgetPolicy::Select(const RequestPool& pool, KvManager& kv, int32_t max_bs) {
  ORCA_CHECK(kv.paged() == (kind_ == PolicyKind::kPaged)) << "policy and KV mode disagree";
  if (max_bs <= 0) return {};
  Round round(pool, kv, max_bs, max_num_batched_tokens_, long_prefill_token_threshold_, order_);
  round.ScheduleAdmitted(/*decodes=*/true);
  round.LimitChunks(*this);
  round.ScheduleAdmitted(/*decodes=*/false);
  round.AdmitQueued();
  return std::move(round).Take();
}

void TokenBudgetPolicy::OnIterationMeasured(int64_t num_tokens, absl::Duration duration) {
  if (max_prefill_slowdown_ > 0) cost_model_.Observe(num_tokens, duration);
}

std::optional<int64_t> TokenBudgetPolicy::ChunkTokenLimit(int64_t num_decodes) const {
  if (max_prefill_slowdown_ <= 0) return std::nullopt;
  std::optional<IterationCostModel::Fit> fit = cost_model_.fit();
  if (!fit.has_value()) return std::nullopt;
  const double tokens = (max_prefill_slowdown_ - 1) * fit->Seconds(num_decodes) / fit->per_token_seconds;
  // At least one token, so that prompts always progress.
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(tokens, 1e9)));
}

}  // namespace orca::sched
