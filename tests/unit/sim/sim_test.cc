// The simulation support the benchmark and the lead's real-engine sweep rely on: the GPU
// cost model, the simulated engine's protocol checks, the event loop's pipeline timing, and
// the sweep over arrival rates. (The trace generator's and the curve comparison's tests are
// in tests/unit/loadgen.)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "core/common/status_macros.h"
#include "core/sched/scheduler.h"
#include "sim/cost_model.h"
#include "sim/simulated_engine.h"
#include "sim/simulation.h"
#include "sim/sweep.h"

namespace orca::sim {
namespace {

using loadgen::FormatSweepTable;
using loadgen::SweepConfig;
using loadgen::SweepCurve;
using loadgen::SweepPoint;
using loadgen::TraceRequest;
using sched::IterationPlan;
using sched::NewRequestData;
using sched::Phase;
using sched::PolicyKind;
using sched::RequestId;
using sched::RequestState;
using sched::ScheduledRequest;
using sched::Scheduler;
using sched::SchedulerOptions;
using ::testing::HasSubstr;

IterationPlan Plan(std::vector<ScheduledRequest> requests) {
  IterationPlan plan;
  plan.iteration_id = 1;
  plan.requests = std::move(requests);
  return plan;
}

ScheduledRequest Initiation(RequestId id, int32_t prompt, int32_t kv_reservation_slots) {
  ScheduledRequest r;
  r.request_id = id;
  r.phase = Phase::kInitiation;
  r.input_token_ids.assign(prompt, 5);
  r.new_request = NewRequestData{kv_reservation_slots, {}, r.input_token_ids};
  return r;
}

ScheduledRequest Increment(RequestId id, int32_t token, int32_t position) {
  ScheduledRequest r;
  r.request_id = id;
  r.phase = Phase::kIncrement;
  r.input_token_ids = {token};
  r.start_position = position;
  return r;
}

TEST(CostModelTest, Gpt3On13BLooksLikeAnA100) {
  absl::StatusOr<CostModel> model = CostModel::Preset("gpt3-13b");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->num_stages, 1);
  // One decode step of one request: the weight-streaming floor, ~22 ms.
  const double lone = absl::ToDoubleMilliseconds(model->IterationTime(Plan({Increment(1, 5, 300)})));
  EXPECT_GT(lone, 18.0);
  EXPECT_LT(lone, 26.0);
  // A 272-token prompt is compute-bound: tens of ms more.
  const double prompt = absl::ToDoubleMilliseconds(model->IterationTime(Plan({Initiation(1, 272, 400)})));
  EXPECT_GT(prompt, 55.0);
  EXPECT_LT(prompt, 90.0);
  // 16 decodes cost far less than 16 lone steps: batching pays.
  std::vector<ScheduledRequest> decodes;
  for (RequestId id = 1; id <= 16; ++id) decodes.push_back(Increment(id, 5, 300));
  const double batch = absl::ToDoubleMilliseconds(model->IterationTime(Plan(decodes)));
  EXPECT_GT(batch, lone);
  EXPECT_LT(batch, 2 * lone);
}

TEST(CostModelTest, RooflineShapeLetsDecodesRideOnTheWeightStreaming) {
  absl::StatusOr<CostModel> model = CostModel::Preset("gpt3-13b");
  ASSERT_TRUE(model.ok());
  model->shape = CostShape::kRoofline;
  std::vector<ScheduledRequest> decodes;
  for (RequestId id = 1; id <= 64; ++id) decodes.push_back(Increment(id, 5, 0));
  const absl::Duration one = model->IterationTime(Plan({Increment(1, 5, 0)}));
  const absl::Duration many = model->IterationTime(Plan(decodes));
  // 64 tokens of GEMM (~10.7 ms) hide under the ~21 ms of weight streaming.
  EXPECT_LT(absl::ToDoubleMilliseconds(many - one), 0.1);
  model->shape = CostShape::kLinear;
  EXPECT_GT(absl::ToDoubleMilliseconds(model->IterationTime(Plan(decodes)) - one), 10.0);
  EXPECT_EQ(ParseCostShape("roofline"), CostShape::kRoofline);
  EXPECT_EQ(ParseCostShape("quadratic"), std::nullopt);
}

TEST(CostModelTest, PipelinePresetsSplitOverStages) {
  absl::StatusOr<CostModel> model = CostModel::Preset("gpt3-175b");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->num_stages, 2);
  EXPECT_THAT(model->description, HasSubstr("16x A100-40GB (TP 8, PP 2)"));
  EXPECT_FALSE(CostModel::Preset("gpt5").ok());
}

std::unique_ptr<SimulatedEngine> Engine(int64_t n_slots, double seconds_per_iteration = 0.01, int32_t stages = 1) {
  SimulatedEngineOptions options;
  options.cost.fixed_seconds = seconds_per_iteration;
  options.cost.num_stages = stages;
  options.n_slots = n_slots;
  options.token_fn = [](RequestId, int32_t index) { return 100 + index; };
  absl::StatusOr<std::unique_ptr<SimulatedEngine>> engine = SimulatedEngine::Create(options);
  EXPECT_TRUE(engine.ok());
  return std::move(*engine);
}

TEST(SimulatedEngineTest, FollowsTheWorkerProtocol) {
  auto engine = Engine(100);
  absl::StatusOr<StepOutcome> first = engine->Run(Plan({Initiation(1, 4, 10)}));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->results.size(), 1u);
  EXPECT_EQ(first->results[0].token.token_id, 100);
  EXPECT_EQ(first->elapsed, absl::Milliseconds(10));
  EXPECT_EQ(engine->num_allocated_slots(), 10);
  ASSERT_TRUE(engine->Run(Plan({Increment(1, 100, 4)})).ok());
  EXPECT_TRUE(engine->Release({1}).ok());
  EXPECT_EQ(engine->num_allocated_slots(), 0);
}

TEST(SimulatedEngineTest, RejectsPlansThatBreakTheProtocol) {
  auto engine = Engine(20);
  ASSERT_TRUE(engine->Run(Plan({Initiation(1, 4, 10)})).ok());
  auto error = [&](const IterationPlan& plan) {
    absl::StatusOr<StepOutcome> outcome = engine->Run(plan);
    EXPECT_FALSE(outcome.ok());
    return std::string(outcome.status().message());
  };
  EXPECT_THAT(error(Plan({Increment(2, 100, 4)})), HasSubstr("unknown to workers"));
  EXPECT_THAT(error(Plan({Increment(1, 100, 5)})), HasSubstr("but its KV ends at 4"));
  EXPECT_THAT(error(Plan({Increment(1, 7, 4)})), HasSubstr("fed token 7 at position 4 which holds 100"));
  EXPECT_THAT(error(Plan({Initiation(1, 4, 10)})), HasSubstr("still hold it"));
  EXPECT_THAT(error(Plan({Initiation(3, 4, 11)})), HasSubstr("KV slots"));
  EXPECT_THAT(error(Plan({Increment(1, 100, 4), Increment(1, 100, 4)})), HasSubstr("twice"));
  // A released request is unknown again.
  IterationPlan release = Plan({Initiation(4, 2, 4)});
  release.released_request_ids = {1};
  ASSERT_TRUE(engine->Run(release).ok());
  EXPECT_THAT(error(Plan({Increment(1, 100, 4)})), HasSubstr("unknown to workers"));
}

std::unique_ptr<Scheduler> MakeScheduler(PolicyKind policy, int32_t max_bs, int32_t n_workers) {
  SchedulerOptions options;
  options.policy = policy;
  options.max_bs = max_bs;
  options.n_workers = n_workers;
  options.n_slots = 1 << 16;
  return std::move(*Scheduler::Create(options));
}

TEST(SimulationTest, ReplaysATraceOnTheVirtualClock) {
  // 10 ms per iteration. r0 arrives at 0 (3 tokens), r1 at 15 ms (1 token).
  std::vector<TraceRequest> trace = {{absl::ZeroDuration(), 8, 3}, {absl::Milliseconds(15), 8, 1}};
  auto scheduler = MakeScheduler(PolicyKind::kOrca, 4, 1);
  auto engine = Engine(1 << 16);
  absl::StatusOr<SimulationResult> result = RunSimulation(trace, *scheduler, *engine);
  ASSERT_TRUE(result.ok()) << result.status();
  // r0 runs at [0,10) [10,20) [20,30); r1 arrives during the 2nd and joins the 3rd.
  EXPECT_EQ(result->requests[0].first_token, absl::Milliseconds(10));
  EXPECT_EQ(result->requests[0].finish, absl::Milliseconds(30));
  EXPECT_EQ(result->requests[1].finish, absl::Milliseconds(30));
  EXPECT_EQ(result->requests[0].num_generated_tokens, 3);
  EXPECT_EQ(result->requests[1].final_state, RequestState::kFinishedLength);
  EXPECT_EQ(result->num_iterations, 3);
  EXPECT_EQ(result->makespan, absl::Milliseconds(30));
  EXPECT_NEAR(result->ThroughputRps(), 2 / 0.030, 1e-9);
  EXPECT_NEAR(result->requests[0].NormalizedLatencySeconds(), 0.010, 1e-12);
  EXPECT_NEAR(result->requests[1].NormalizedLatencySeconds(), 0.015, 1e-12);
  EXPECT_DOUBLE_EQ(result->NormalizedLatencyQuantile(0.5), 0.010);
  EXPECT_DOUBLE_EQ(result->NormalizedLatencyQuantile(1.0), 0.015);
  EXPECT_EQ(engine->num_live_requests(), 0);  // released at the end
}

TEST(SimulationTest, PipelineStagesOverlapBatches) {
  // Two stages, 10 ms per iteration in total (5 ms per stage). Two one-token requests with
  // max_bs 1: alone they would take 10 + 10 ms; two batches in flight overlap: 10 and 15.
  std::vector<TraceRequest> trace = {{absl::ZeroDuration(), 4, 1}, {absl::ZeroDuration(), 4, 1}};
  auto scheduler = MakeScheduler(PolicyKind::kOrca, 1, 2);
  auto engine = Engine(1 << 16, 0.010, 2);
  absl::StatusOr<SimulationResult> result = RunSimulation(trace, *scheduler, *engine);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->requests[0].finish, absl::Milliseconds(10));
  EXPECT_EQ(result->requests[1].finish, absl::Milliseconds(15));

  auto serial = MakeScheduler(PolicyKind::kOrca, 1, 1);
  auto serial_engine = Engine(1 << 16, 0.010, 2);
  result = RunSimulation(trace, *serial, *serial_engine);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->requests[1].finish, absl::Milliseconds(20));
}

TEST(SimulationTest, ReportsTheTraceRequestTheSchedulerRejects) {
  std::vector<TraceRequest> trace = {{absl::ZeroDuration(), 4, 1}, {absl::ZeroDuration(), 90, 20}};
  SchedulerOptions options;
  options.n_slots = 100;
  auto scheduler = std::move(*Scheduler::Create(options));
  auto engine = Engine(100);
  absl::Status status = RunSimulation(trace, *scheduler, *engine).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("trace request 1: prompt (90 tokens)"));
}

TEST(SweepTest, OrcaOutperformsTheBaselineOnThePapersTrace) {
  // Small and deterministic (virtual time): 150 requests per point on the 13B cost model.
  SweepOptions options;
  options.trace.num_requests = 150;
  options.trace.seed = 3;
  options.arrival_rates = {0.5, 1, 2, 4, 8};
  std::vector<SweepConfig> configs;
  SchedulerOptions scheduler;
  scheduler.n_slots = 1 << 16;
  scheduler.max_bs = 16;
  configs.push_back({"orca(max_bs=16)", scheduler});
  scheduler.policy = PolicyKind::kRequestLevel;
  scheduler.max_bs = 4;
  configs.push_back({"request-level(max_bs=4)", scheduler});
  absl::StatusOr<CostModel> cost = CostModel::Preset("gpt3-13b");
  ASSERT_TRUE(cost.ok());
  RunnerFactory factory = [&](const SchedulerOptions&) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
    SimulatedEngineOptions engine;
    engine.cost = *cost;
    ORCA_ASSIGN_OR_RETURN(std::unique_ptr<SimulatedEngine> e, SimulatedEngine::Create(engine));
    return std::unique_ptr<StepRunner>(std::move(e));
  };
  absl::StatusOr<std::vector<SweepCurve>> curves = RunSweep(options, configs, factory);
  ASSERT_TRUE(curves.ok()) << curves.status();
  ASSERT_EQ(curves->size(), 2u);
  const SweepPoint& orca = (*curves)[0].points[2];
  const SweepPoint& baseline = (*curves)[1].points[2];
  EXPECT_LT(orca.median_normalized_latency, baseline.median_normalized_latency);
  EXPECT_GT(orca.mean_batch_size, 1.0);
  EXPECT_THAT(FormatSweepTable(*curves), HasSubstr("request-level(max_bs=4)"));
}

}  // namespace
}  // namespace orca::sim
