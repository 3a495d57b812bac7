// Thousands of randomized workloads against both policies. After every event (arrival,
// iteration return, iteration failure, cancel, deadline sweep, pipeline failure) the loop
// schedules as the service does and the harness checks every invariant:
//  - n_rsrv == Σ reservations of admitted requests, 0 <= n_rsrv <= n_slots, and the
//    (simulated) workers never hold more than n_slots;
//  - admission is FCFS: no admitted request arrived after a queued one (no starvation);
//  - ORCA: an earlier request has run at least as many iterations as a later one, and a
//    finished request is delivered at once;
//  - exactly min(n_workers, work available) batches in flight;
//  - every plan obeys the worker protocol (the simulated engine rejects anything else);
//  - each request gets exactly one finish and its streamed tokens match it.
// At the end every request has finished, every slot is back, and the workers hold nothing.
// Groups of sequences of one prompt (SubmitGroup) and max_request_kv_share run the same
// workloads too (GroupsOfOnePromptAndAKvShareKeepEveryInvariant), and so does a small
// separate pool for sliding-window layers' KV (SlidingWindowPoolInvariantsHoldInEveryPolicy):
// the workers' local blocks, by their own rule applied to the plans, never exceed it.
//
// The options beyond the paper run the same workloads (with shared prompt prefixes and
// random priorities) and the harness adds, after every Schedule call: plans within
// max_num_batched_tokens, decodes never left out for a prompt chunk, admission in
// RequestOrder, preemption latest-first (nothing served later keeps its KV unless in
// flight), no deadlock (with paged KV, never nothing in flight while work waits), the KV
// manager's block accounting (no block held twice unless a cached read-only one) and the
// simulated workers' slot contents (every position read holds the request's own prefix,
// no request writes a block another holds). Every request's streamed tokens are those it
// would generate without preemption.
//
// ORCA_PROPERTY_WORKLOADS_PERCENT (1..100, default 100) runs that share of each test's
// workloads (the first seeds of each range; every feature combination still runs):
// scripts/sanitize.sh sets it, where ASan makes each workload several times slower.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/common/kv_footprint.h"
#include "core/common/split_mix64.h"
#include "tests/unit/sched/request_builder.h"
#include "tests/unit/sched/scheduler_harness.h"

namespace orca::sched {
namespace {

using ::orca::SplitMix64;
using ::orca::sched::testing::RequestBuilder;
using ::orca::sched::testing::SchedulerHarness;

constexpr int32_t kEos = 0;

struct WorkloadSummary {
  int64_t num_requests = 0;
  int64_t num_iterations = 0;
  int64_t num_cancelled = 0;
  int64_t num_failed = 0;
  uint64_t num_preemptions = 0;
  int64_t num_prefix_hits = 0;
  int64_t num_decode_filled_hits = 0;  // follow-ups that reused a block their source decoded into
  int64_t num_chunks = 0;              // prompt chunks that did not sample
  int64_t num_groups = 0;              // groups of sequences of one prompt submitted
  int64_t num_shared_starts = 0;       // group members that started on their leader's prompt blocks
  int64_t num_refused_by_share = 0;    // submissions over max_request_kv_share
  int64_t num_refused_by_local = 0;    // submissions whose window never fits the local pool
  int64_t num_local_pressure = 0;      // checks with requests queued and the local pool 3/4 taken
};

/// What a workload exercises beyond Algorithm 1.
struct Features {
  PolicyKind policy = PolicyKind::kOrca;
  bool chunked = false;
  bool prefix_caching = false;
  bool priority = false;
  bool faults = true;
  /// Priority order, but every request at priority 0 and no aging: arrival order again.
  bool priority_order_only = false;
  /// kRequestLevel as FasterTransformer runs it, with a random microbatch count.
  bool faster_transformer = false;
  /// Some submissions are groups of 2-4 sequences of one prompt (SubmitGroup), and
  /// max_request_kv_share is drawn below 1 half the time.
  bool groups = false;
  /// The workers keep sliding-window layers' KV in a small pool of its own (KvManager).
  bool local_pool = false;
};

// Runs one randomized workload; returns "" or the first problem found. `plans_out`
// receives the plans issued.
std::string RunWorkload(uint64_t seed, const Features& features, WorkloadSummary& summary,
                        std::vector<IterationPlan>* plans_out = nullptr) {
  const PolicyKind policy = features.policy;
  SplitMix64 rng(seed);
  SchedulerOptions options;
  options.policy = policy;
  options.max_bs = static_cast<int32_t>(rng.NextInt(1, 6));
  options.n_workers = static_cast<int32_t>(rng.NextInt(1, 3));
  options.kv_block_size = rng.NextInt(0, 3) == 0 ? 4 : 1;
  if (policy == PolicyKind::kPaged || features.prefix_caching) options.kv_block_size = rng.NextInt(0, 1) == 0 ? 4 : 2;
  options.n_slots = options.kv_block_size * rng.NextInt(48 / options.kv_block_size, 64 / options.kv_block_size);
  options.max_context = rng.NextInt(0, 2) == 0 ? static_cast<int32_t>(rng.NextInt(20, 60)) : 0;
  if (features.chunked) {
    options.max_num_batched_tokens = static_cast<int32_t>(rng.NextInt(options.max_bs, 24));
    // Half the chunked workloads also cap one request's prompt chunk, from a generator of its own so that
    // the other draws (and so the workloads) stay what they were.
    SplitMix64 cap_rng(seed ^ 0x5bd1e995ULL);
    if (cap_rng.NextInt(0, 1) == 1)
      options.long_prefill_token_threshold = static_cast<int32_t>(cap_rng.NextInt(1, options.max_num_batched_tokens));
  }
  options.enable_prefix_caching = features.prefix_caching;
  // The local pool draws from a generator of its own too.
  SplitMix64 local_rng(seed ^ 0x2545f4914f6cdd1dULL);
  if (features.local_pool) {
    options.sliding_window = static_cast<int32_t>(local_rng.NextInt(1, 12));
    options.kv_local_slots =
        options.kv_block_size * local_rng.NextInt(std::max(3, 16 / options.kv_block_size), 40 / options.kv_block_size);
  }
  // Groups draw from a generator of their own: the other workloads stay what they were.
  SplitMix64 group_rng(seed ^ 0x9e3779b97f4a7c15ULL);
  if (features.groups && group_rng.NextInt(0, 1) == 1) {
    options.max_request_kv_share = group_rng.NextInt(0, 1) == 0 ? 0.5 : 0.75;
  }
  const absl::Duration aging = absl::Milliseconds(rng.NextInt(0, 3));  // drawn always: same workload either way
  if (features.priority || features.priority_order_only) {
    options.scheduling_order = SchedulingOrder::kPriority;
    options.priority_aging = features.priority ? aging : absl::ZeroDuration();
  }
  if (features.faster_transformer) {
    options.faster_transformer = true;
    options.num_microbatches = static_cast<int32_t>(rng.NextInt(0, 4));
  }
  const int64_t eos_per_mille = rng.NextInt(0, 150);
  const bool faults_drawn = rng.NextInt(0, 4) == 0;
  const bool faults = features.faults && faults_drawn;
  // A few shared prompt heads (system prompts) from a small vocabulary, for prefix hits.
  std::vector<std::vector<int32_t>> heads(3);
  for (auto& head : heads) {
    head.resize(static_cast<size_t>(rng.NextInt(4, 16)));
    for (int32_t& t : head) t = static_cast<int32_t>(rng.NextInt(1, 6));
  }

  const std::string context = absl::StrCat(
      "seed ", seed, " policy ", PolicyKindName(policy), " max_bs ", options.max_bs, " n_workers ", options.n_workers,
      " n_slots ", options.n_slots, " block ", options.kv_block_size, " budget ", options.max_num_batched_tokens,
      " cap ", options.long_prefill_token_threshold, " prefix ", options.enable_prefix_caching, " order ",
      SchedulingOrderName(options.scheduling_order), " ft ", options.faster_transformer, " mbs ",
      options.num_microbatches, " share ", options.max_request_kv_share, " window ", options.sliding_window,
      " local ", options.kv_local_slots, ": ");
  auto token_fn = [seed, eos_per_mille](RequestId id, int32_t index) {
    SplitMix64 token_rng(seed ^ (id * 1000003ULL + static_cast<uint64_t>(index)));
    return token_rng.NextInt(0, 999) < eos_per_mille ? kEos : static_cast<int32_t>(token_rng.NextInt(1, 999));
  };
  // EOS with a per-workload probability, deterministic per (request, index).
  SchedulerHarness h(options, token_fn);
  const int64_t num_requests = rng.NextInt(4, 30);
  int64_t submitted = 0;
  std::vector<RequestId> ids;
  // Prompts by request, and for a follow-up (a chat turn: an earlier request's prompt, the
  // tokens it generated, then new ones) the full blocks its source's prompt filled: a hit
  // past them reuses blocks the source filled while decoding.
  std::map<RequestId, std::vector<int32_t>> prompts;
  std::map<RequestId, int32_t> follow_up_prompt_blocks;
  // Group members that waited for their leader's prompt blocks: they start after it.
  std::set<RequestId> shared_members;

  auto check = [&](const char* after) -> std::string {
    h.ScheduleAll();
    std::string problem = h.CheckInvariants(/*scheduled_all=*/true);
    const SchedulerStats s = h.scheduler().stats();
    if (s.n_local_slots > 0 && s.num_queued > 0 && 4 * s.n_local_rsrv >= 3 * s.n_local_slots) {
      ++summary.num_local_pressure;
    }
    return problem.empty() ? "" : absl::StrCat(context, problem, " (after ", after, ")");
  };

  for (int64_t step = 0; step < 100000; ++step) {
    if (::testing::Test::HasFailure()) return absl::StrCat(context, "engine or API failure");
    const bool more_to_submit = submitted < num_requests;
    if (!more_to_submit && h.num_in_flight() == 0) break;
    const int64_t action = rng.NextInt(0, 99);
    std::string problem;
    if (more_to_submit && (action < 35 || h.num_in_flight() == 0)) {
      RequestBuilder builder;
      const auto prompt_len = static_cast<int32_t>(rng.NextInt(1, 30));
      builder.Prompt(prompt_len);
      int32_t source_prompt_blocks = -1;
      if (features.prefix_caching && rng.NextInt(0, 3) > 0) {
        std::vector<int32_t> ids = heads[rng.NextInt(0, 2)];
        while (static_cast<int32_t>(ids.size()) < prompt_len) ids.push_back(static_cast<int32_t>(rng.NextInt(1, 6)));
        ids.resize(prompt_len);
        // Half the time, the next turn of a delivered conversation instead.
        if (!prompts.empty() && rng.NextInt(0, 1) == 0) {
          auto source = prompts.begin();
          std::advance(source, rng.NextInt(0, static_cast<int64_t>(prompts.size()) - 1));
          if (h.delivered(source->first) && !h.log(source->first).tokens.empty()) {
            std::vector<int32_t> turn = source->second;
            const std::vector<int32_t>& reply = h.log(source->first).tokens;
            turn.insert(turn.end(), reply.begin(), reply.end());
            const auto extra = rng.NextInt(1, 4);
            for (int64_t i = 0; i < extra; ++i) turn.push_back(static_cast<int32_t>(rng.NextInt(1, 6)));
            if (turn.size() <= 40) {
              source_prompt_blocks = static_cast<int32_t>(source->second.size()) / options.kv_block_size;
              ids = std::move(turn);
              // One next turn per conversation: a hit past the source's prompt blocks then
              // comes from its decodes, not from a sibling turn's prompt.
              prompts.erase(source);
            }
          }
        }
        builder.PromptIds(ids);
      }
      builder.MaxNewTokens(static_cast<int32_t>(rng.NextInt(1, 16)))
          .MinNewTokens(static_cast<int32_t>(rng.NextInt(0, 1)))
          .Eos({kEos})
          .IgnoreEos(rng.NextInt(0, 3) == 0);
      if (rng.NextInt(0, 9) == 0) builder.Deadline(h.now() + absl::Milliseconds(rng.NextInt(1, 20)));
      RequestSpec spec = builder.Build();
      const auto priority = static_cast<int32_t>(rng.NextInt(-3, 3));
      if (features.priority) spec.priority = priority;
      // A group: the same prompt n times, each with its own seed and its own max_new_tokens.
      std::vector<RequestSpec> specs = {spec};
      if (features.groups && group_rng.NextInt(0, 2) == 0) {
        const int64_t n = group_rng.NextInt(2, 4);
        for (int64_t i = 1; i < n; ++i) {
          RequestSpec member = spec;
          member.sampling.seed = static_cast<uint64_t>(i);
          member.max_new_tokens = static_cast<int32_t>(group_rng.NextInt(1, 16));
          member.min_new_tokens = std::min(member.min_new_tokens, member.max_new_tokens);
          specs.push_back(member);
        }
        ++summary.num_groups;
      }
      absl::StatusOr<std::vector<RequestId>> group = h.TrySubmitGroup(specs);
      ++submitted;
      const int64_t prompt = static_cast<int64_t>(spec.prompt_token_ids.size());
      const auto n = static_cast<int64_t>(specs.size());
      bool fits = true;
      int64_t footprint = 0;
      for (const RequestSpec& member : specs) {
        int64_t max_new = member.max_new_tokens;
        if (options.max_context > 0) {
          fits = fits && prompt < options.max_context;
          max_new = std::min<int64_t>(max_new, options.max_context - prompt);
        }
        const int64_t slots = KvReservationSlots(prompt + max_new, options.kv_block_size);
        fits = fits && slots <= options.n_slots;
        footprint += slots;
      }
      const bool shares = n > 1 && options.enable_prefix_caching && policy != PolicyKind::kRequestLevel;
      if (shares) footprint -= (n - 1) * SharedPromptBlocks(prompt, options.kv_block_size) * options.kv_block_size;
      const bool over_share =
          footprint > MaxRequestKvSlots(options.n_slots, options.max_request_kv_share, options.kv_block_size);
      if (fits && over_share) ++summary.num_refused_by_share;
      fits = fits && !over_share;
      if (features.local_pool) {
        // Its window over its longest iteration: the prompt (paged: a readmission's prompt +
        // generated tokens), cut by the chunk caps; then one token per decode.
        for (const RequestSpec& member : specs) {
          int64_t max_new = member.max_new_tokens;
          if (options.max_context > 0) max_new = std::min<int64_t>(max_new, options.max_context - prompt);
          int64_t longest = policy == PolicyKind::kPaged ? prompt + max_new : prompt;
          for (int64_t cap : {options.max_num_batched_tokens, options.long_prefill_token_threshold}) {
            if (cap > 0) longest = std::min(longest, cap);
          }
          const bool local_fits = SlidingWindowKvBound(prompt + max_new, longest, options.sliding_window,
                                                       options.kv_block_size) <=
                                  options.kv_local_slots / options.kv_block_size;
          if (fits && !local_fits) ++summary.num_refused_by_local;
          fits = fits && local_fits;
        }
      }
      if (group.ok() != fits) {
        return absl::StrCat(context, "SubmitGroup returned ", group.status().ToString(), " for ", n, " x prompt ",
                            prompt, " max_new ", spec.max_new_tokens, " footprint ", footprint);
      }
      for (size_t i = 0; group.ok() && i < group->size(); ++i) {
        const RequestId id = (*group)[i];
        ids.push_back(id);
        prompts[id] = spec.prompt_token_ids;
        if (source_prompt_blocks >= 0) follow_up_prompt_blocks[id] = source_prompt_blocks;
        if (h.scheduler().GetRequest(id)->waits_for_shared_prompt) shared_members.insert(id);
      }
      problem = check("submit");
    } else if (action < 85 || ids.empty()) {
      h.Step();
      problem = check("iteration");
    } else if (action < 92) {
      const RequestId id = ids[rng.NextInt(0, static_cast<int64_t>(ids.size()) - 1)];
      h.Cancel(id);
      problem = check("cancel");
    } else if (action < 96) {
      h.Advance(absl::Milliseconds(rng.NextInt(0, 5)));
      h.ExpireDeadlines();
      problem = check("deadline sweep");
    } else if (faults && action < 99) {
      h.FailOldest(absl::UnavailableError("injected stage failure"));
      problem = check("iteration failure");
    } else if (faults) {
      h.FailAll(absl::UnavailableError("injected pipeline failure"));
      problem = check("pipeline failure");
    }
    if (!problem.empty()) return problem;
  }

  // Everything finished, delivered once, and released everywhere; the tokens are the ones
  // the engine generates for that request and index, preempted or not.
  for (RequestId id : ids) {
    if (!h.delivered(id)) return absl::StrCat(context, "request ", id, " never finished");
    const std::vector<int32_t>& tokens = h.log(id).tokens;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] != token_fn(id, static_cast<int32_t>(i))) {
        return absl::StrCat(context, "request ", id, " token ", i, " is ", tokens[i], ", expected ",
                            token_fn(id, static_cast<int32_t>(i)));
      }
    }
    const FinishInfo& finish = h.log(id).finishes[0];
    if (finish.state == RequestState::kFinishedCancelled) ++summary.num_cancelled;
    if (finish.state == RequestState::kFinishedError) ++summary.num_failed;
  }
  const SchedulerStats stats = h.scheduler().stats();
  if (stats.n_rsrv != 0 || stats.num_queued != 0 || stats.num_running != 0 || h.scheduler().HasRequests()) {
    return absl::StrCat(context, "leftovers: n_rsrv ", stats.n_rsrv, " queued ", stats.num_queued, " running ",
                        stats.num_running);
  }
  h.FlushReleases();
  if (h.engine().num_allocated_slots() != 0 || h.engine().num_live_requests() != 0) {
    return absl::StrCat(context, "workers still hold ", h.engine().num_allocated_slots(), " slots of ",
                        h.engine().num_live_requests(), " requests");
  }
  // Admission order is arrival order (Algorithm 1): the first iteration of each request
  // never precedes the first iteration of an earlier one.
  std::vector<int64_t> first_plan(ids.size(), -1);
  const std::set<RequestId> waited = shared_members;
  for (size_t k = 0; k < h.plans().size(); ++k) {
    for (const ScheduledRequest& r : h.plans()[k].requests) {
      if (!r.sample) ++summary.num_chunks;
      if (r.new_request.has_value() && r.start_position > 0) ++summary.num_prefix_hits;
      if (r.new_request.has_value() && r.start_position > 0 && shared_members.erase(r.request_id) > 0) {
        ++summary.num_shared_starts;
      }
      // First admissions only: a recompute after preemption may hit its own prompt blocks.
      if (auto f = follow_up_prompt_blocks.find(r.request_id);
          f != follow_up_prompt_blocks.end() && r.new_request.has_value()) {
        if (r.start_position > f->second * options.kv_block_size) ++summary.num_decode_filled_hits;
        follow_up_prompt_blocks.erase(f);
      }
      // A group member that waited for its leader's prompt starts after it: its admission
      // was its leader's (checked by the harness as it happened).
      if (r.new_request.has_value() && !waited.contains(r.request_id)) {
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] == r.request_id && first_plan[i] < 0) first_plan[i] = static_cast<int64_t>(k);
        }
      }
    }
  }
  if (!features.priority) {
    int64_t last = -1;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (first_plan[i] < 0) continue;  // cancelled or failed before its first iteration
      if (first_plan[i] < last) {
        return absl::StrCat(context, "request ", ids[i], " started before an earlier request");
      }
      last = first_plan[i];
    }
  }
  summary.num_preemptions += stats.num_preemptions;
  if (plans_out != nullptr) *plans_out = h.plans();
  summary.num_requests += static_cast<int64_t>(ids.size());
  summary.num_iterations += static_cast<int64_t>(h.plans().size());
  return "";
}

// The share of workloads to run (ORCA_PROPERTY_WORKLOADS_PERCENT, see the top of the file).
int WorkloadsPercent() {
  const char* env = std::getenv("ORCA_PROPERTY_WORKLOADS_PERCENT");
  if (env == nullptr || *env == '\0') return 100;
  int percent = 0;
  if (!absl::SimpleAtoi(env, &percent) || percent < 1 || percent > 100) {
    ADD_FAILURE() << "ORCA_PROPERTY_WORKLOADS_PERCENT must be an integer in [1, 100], got \"" << env << "\"";
    return 100;
  }
  return percent;
}

WorkloadSummary RunMany(const Features& features, uint64_t first_seed, int num_workloads) {
  num_workloads = std::max(1, num_workloads * WorkloadsPercent() / 100);
  WorkloadSummary summary;
  for (int i = 0; i < num_workloads; ++i) {
    const std::string problem = RunWorkload(first_seed + static_cast<uint64_t>(i), features, summary);
    EXPECT_EQ(problem, "");
    if (!problem.empty()) break;
  }
  // The workloads exercise what they claim to.
  EXPECT_GT(summary.num_requests, num_workloads * 10);
  EXPECT_GT(summary.num_iterations, summary.num_requests);
  EXPECT_GT(summary.num_cancelled, 0);
  if (features.faults) {
    EXPECT_GT(summary.num_failed, 0);
  }
  if (features.chunked) {
    EXPECT_GT(summary.num_chunks, 0);
  }
  if (features.prefix_caching) {
    EXPECT_GT(summary.num_prefix_hits, 0);
  }
  if (features.prefix_caching) {
    EXPECT_GT(summary.num_decode_filled_hits, 0);
  }
  if (features.policy == PolicyKind::kPaged) {
    EXPECT_GT(summary.num_preemptions, 0u);
  }
  if (features.groups) {
    EXPECT_GT(summary.num_groups, 0);
    EXPECT_GT(summary.num_refused_by_share, 0);
  }
  if (features.local_pool) {
    EXPECT_GT(summary.num_refused_by_local, 0);
    EXPECT_GT(summary.num_local_pressure, 0);
  }
  if (features.groups && features.prefix_caching && features.policy != PolicyKind::kRequestLevel) {
    EXPECT_GT(summary.num_shared_starts, 0);
  }
  return summary;
}

TEST(SchedulerPropertyTest, OrcaInvariantsHoldOnRandomizedWorkloads) { RunMany({PolicyKind::kOrca}, 1, 2000); }

TEST(SchedulerPropertyTest, RequestLevelInvariantsHoldOnRandomizedWorkloads) {
  RunMany({PolicyKind::kRequestLevel}, 100000, 1000);
}

TEST(SchedulerPropertyTest, FasterTransformerBaselineInvariantsHold) {
  // Padded footprints, members padding out until their batch ends, microbatch counts from
  // n_workers (0) to more or fewer than the pipeline depth: every request finishes with
  // exactly its own tokens, no slot leaks, the workers' positions stay within bounds.
  Features ft{PolicyKind::kRequestLevel};
  ft.faster_transformer = true;
  RunMany(ft, 150000, 1000);
}

TEST(SchedulerPropertyTest, ChunkedPrefillInvariantsHold) {
  RunMany({PolicyKind::kOrca, /*chunked=*/true}, 200000, 1000);
}

TEST(SchedulerPropertyTest, PrefixCachingInvariantsHoldWithEitherBaselinePolicy) {
  RunMany({PolicyKind::kOrca, false, /*prefix_caching=*/true}, 300000, 600);
  RunMany({PolicyKind::kRequestLevel, false, /*prefix_caching=*/true}, 310000, 300);
  RunMany({PolicyKind::kOrca, /*chunked=*/true, /*prefix_caching=*/true}, 320000, 600);
}

TEST(SchedulerPropertyTest, PagedEveryRequestFinishesAndPreemptionIsLatestFirst) {
  RunMany({PolicyKind::kPaged}, 400000, 1000);
  RunMany({PolicyKind::kPaged, /*chunked=*/true}, 410000, 1000);
  RunMany({PolicyKind::kPaged, /*chunked=*/true, /*prefix_caching=*/true}, 420000, 1000);
}

TEST(SchedulerPropertyTest, PriorityOrderInvariantsHold) {
  RunMany({PolicyKind::kOrca, false, false, /*priority=*/true}, 500000, 600);
  RunMany({PolicyKind::kPaged, /*chunked=*/true, /*prefix_caching=*/true, /*priority=*/true}, 510000, 1000);
}

TEST(SchedulerPropertyTest, GroupsOfOnePromptAndAKvShareKeepEveryInvariant) {
  // n > 1 as SubmitGroup, some workloads under max_request_kv_share 0.5 or 0.75: all or
  // none admitted, the share refused exactly when the group's footprint exceeds it, every
  // member finishes with its own tokens, and with prefix caching the members that waited
  // for their leader start on its prompt blocks (shared, reserved once) — through
  // cancellations, deadlines and failures of the leader and of the pipeline.
  Features orca{PolicyKind::kOrca};
  orca.groups = true;
  RunMany(orca, 700000, 600);
  Features cached = orca;
  cached.prefix_caching = true;
  RunMany(cached, 710000, 600);
  cached.chunked = true;
  RunMany(cached, 720000, 400);
  Features paged{PolicyKind::kPaged, /*chunked=*/true, /*prefix_caching=*/true};
  paged.groups = true;
  RunMany(paged, 730000, 600);
  paged.priority = true;
  RunMany(paged, 740000, 300);
  cached.priority = true;  // reserved KV admitted out of arrival order: members must still find their prompt
  RunMany(cached, 760000, 400);
  Features request_level{PolicyKind::kRequestLevel, false, /*prefix_caching=*/true};
  request_level.groups = true;
  RunMany(request_level, 750000, 300);
}

TEST(SchedulerPropertyTest, SlidingWindowPoolInvariantsHoldInEveryPolicy) {
  // A small separate pool for the sliding-window layers' KV: Algorithm 1, chunked prefill,
  // both baselines, paged KV with preemption and priorities. Submit refuses exactly the
  // requests whose window can never fit it; everything else finishes with its own tokens,
  // the KV manager's local count matches its requests' (reserved: covers what the workers
  // hold, paged: equals it), and the workers' own count never exceeds the pool.
  Features orca{PolicyKind::kOrca};
  orca.local_pool = true;
  RunMany(orca, 800000, 400);
  Features chunked = orca;
  chunked.chunked = true;
  RunMany(chunked, 810000, 400);
  Features request_level{PolicyKind::kRequestLevel};
  request_level.local_pool = true;
  RunMany(request_level, 820000, 300);
  Features ft = request_level;
  ft.faster_transformer = true;
  RunMany(ft, 830000, 300);
  Features paged{PolicyKind::kPaged};
  paged.local_pool = true;
  RunMany(paged, 840000, 400);
  paged.chunked = true;
  RunMany(paged, 850000, 400);
  paged.priority = true;
  RunMany(paged, 860000, 300);
}

TEST(SchedulerPropertyTest, TheTokenBudgetPolicyWithoutABudgetIsAlgorithmOne) {
  // Strict priority with every priority equal orders by arrival: TokenBudgetPolicy then
  // must issue exactly the plans OrcaPolicy (Algorithm 1) issues.
  for (uint64_t seed = 600000; seed < 600300; ++seed) {
    WorkloadSummary summary;
    std::vector<IterationPlan> paper, general;
    ASSERT_EQ(RunWorkload(seed, {PolicyKind::kOrca}, summary, &paper), "");
    Features same_priorities{PolicyKind::kOrca};
    same_priorities.priority_order_only = true;
    ASSERT_EQ(RunWorkload(seed, same_priorities, summary, &general), "");
    ASSERT_EQ(paper.size(), general.size()) << "seed " << seed;
    for (size_t k = 0; k < paper.size(); ++k) {
      ASSERT_EQ(paper[k].released_request_ids, general[k].released_request_ids) << "seed " << seed;
      ASSERT_EQ(paper[k].requests.size(), general[k].requests.size()) << "seed " << seed << " plan " << k;
      for (size_t i = 0; i < paper[k].requests.size(); ++i) {
        const ScheduledRequest& p = paper[k].requests[i];
        const ScheduledRequest& g = general[k].requests[i];
        ASSERT_EQ(p.request_id, g.request_id) << "seed " << seed << " plan " << k;
        ASSERT_EQ(p.input_token_ids, g.input_token_ids) << "seed " << seed << " plan " << k;
        ASSERT_EQ(p.start_position, g.start_position) << "seed " << seed << " plan " << k;
      }
    }
  }
}

}  // namespace
}  // namespace orca::sched
