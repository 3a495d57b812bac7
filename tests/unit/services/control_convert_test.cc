// The plan -> engine conversions and the engine -> scheduler results: the FasterTransformer
// baseline's prompt padding (PlanToStepInput, PlanToControlMessage -> ControlMessageToStepInput)
// and prompt logprobs (merged with the request's sampled token when it has one, a record of
// their own when not), in process and over the wire alike.

#include "services/common/control_convert.h"

#include <gtest/gtest.h>

namespace orca::services {
namespace {

sched::IterationPlan PaddedPlan() {
  sched::IterationPlan plan;
  plan.iteration_id = 3;
  sched::ScheduledRequest a;
  a.request_id = 11;
  a.input_token_ids = {1, 2, 3};
  a.new_request = sched::NewRequestData{};
  a.new_request->kv_reservation_slots = 12;
  a.num_padding_tokens = 5;
  sched::ScheduledRequest b;
  b.request_id = 12;
  b.input_token_ids = {4, 5, 6, 7, 8, 9, 10, 11};
  b.new_request = sched::NewRequestData{};
  b.new_request->kv_reservation_slots = 16;
  plan.requests = {a, b};
  plan.released_request_ids = {4};
  return plan;
}

void ExpectPadded(const engine::StepInput& in) {
  ASSERT_EQ(in.seqs.size(), 3u);
  EXPECT_EQ(in.seqs[0].request_id, 11u);
  ASSERT_TRUE(in.seqs[0].new_request.has_value());
  EXPECT_EQ(in.seqs[0].new_request->kv_reservation_slots, 12);  // the request's own KV reservation
  const engine::StepSequence& pad = in.seqs[1];
  EXPECT_EQ(pad.request_id, engine::PaddingSequenceId(11));
  EXPECT_EQ(pad.token_ids, std::vector<int32_t>(5, 0));
  EXPECT_EQ(pad.start_position, 0);
  EXPECT_FALSE(pad.sample);
  ASSERT_TRUE(pad.new_request.has_value());
  EXPECT_EQ(pad.new_request->kv_reservation_slots, 5);
  EXPECT_EQ(pad.new_request->kv_block_size, 0);
  EXPECT_EQ(in.seqs[2].request_id, 12u);  // no padding: nothing added
  ASSERT_TRUE(in.seqs[2].new_request.has_value());
  EXPECT_EQ(in.seqs[2].new_request->kv_reservation_slots, 16);
  EXPECT_EQ(in.released_ids, std::vector<uint64_t>({4}));
}

TEST(ControlConvertTest, PaddingBecomesAThrowawaySequenceInProcess) { ExpectPadded(PlanToStepInput(PaddedPlan())); }

TEST(ControlConvertTest, PaddingTravelsInTheControlMessage) {
  v1::ControlMessage msg;
  PlanToControlMessage(PaddedPlan(), &msg);
  ASSERT_EQ(msg.requests_size(), 2);
  EXPECT_EQ(msg.requests(0).num_padding_tokens(), 5);
  EXPECT_EQ(msg.requests(1).num_padding_tokens(), 0);
  ExpectPadded(ControlMessageToStepInput(msg));
}

TEST(ControlConvertTest, UnpaddedPlansAreUnchanged) {
  sched::IterationPlan plan = PaddedPlan();
  plan.requests[0].num_padding_tokens = 0;
  EXPECT_EQ(PlanToStepInput(plan).seqs.size(), 2u);
  v1::ControlMessage msg;
  PlanToControlMessage(plan, &msg);
  EXPECT_EQ(ControlMessageToStepInput(msg).seqs.size(), 2u);
}

engine::PromptLogprobs Record(uint64_t id, int32_t first, int32_t n) {
  engine::PromptLogprobs p;
  p.request_id = id;
  p.first_position = first;
  for (int32_t i = 0; i < n; ++i) {
    engine::SampleResult r;
    r.token_id = 100 + i;
    r.logprob = -0.25f * static_cast<float>(i + 1);
    r.rank = i + 2;
    r.top_logprobs = {{7, -0.1f}};
    p.tokens.push_back(r);
  }
  return p;
}

void ExpectResults(const std::vector<sched::RequestResult>& results, const std::string& what) {
  ASSERT_EQ(results.size(), 2u) << what;
  const sched::RequestResult& sampled = results[0];  // request 1: a token and prompt logprobs
  EXPECT_EQ(sampled.request_id, 1u);
  EXPECT_TRUE(sampled.has_token);
  EXPECT_EQ(sampled.token.token_id, 42);
  EXPECT_EQ(sampled.prompt_first_position, 9);
  ASSERT_EQ(sampled.prompt_logprobs.size(), 2u);
  EXPECT_EQ(sampled.prompt_logprobs[1].token_id, 101);
  EXPECT_FLOAT_EQ(sampled.prompt_logprobs[1].logprob, -0.5f);
  EXPECT_EQ(sampled.prompt_logprobs[1].rank, 3);
  ASSERT_EQ(sampled.prompt_logprobs[1].top_logprobs.size(), 1u);
  EXPECT_EQ(sampled.prompt_logprobs[1].top_logprobs[0].token_id, 7);
  const sched::RequestResult& chunk = results[1];  // request 2: a chunk that does not sample
  EXPECT_EQ(chunk.request_id, 2u);
  EXPECT_FALSE(chunk.has_token) << what;
  EXPECT_EQ(chunk.prompt_first_position, 1);
  EXPECT_EQ(chunk.prompt_logprobs.size(), 3u);
}

TEST(ControlConvertTest, PromptLogprobsReachTheSchedulerInProcessAndOverTheWire) {
  std::vector<engine::SequenceSample> samples = {{1, {42, -1.0f, {}}}};
  const std::vector<engine::PromptLogprobs> records = {Record(1, 9, 2), Record(2, 1, 3)};

  std::vector<sched::RequestResult> in_process = SamplesToResults(samples);
  AddPromptLogprobs(records, &in_process);
  ExpectResults(in_process, "in process");

  v1::IterationResult wire;
  SamplesToProto(samples, &wire);
  PromptLogprobsToProto(records, &wire);
  v1::IterationResult parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  ExpectResults(ProtoToResults(parsed), "over the wire");
}

TEST(ControlConvertTest, ResultsWithoutPromptLogprobsAreUnchanged) {
  v1::IterationResult wire;
  SamplesToProto({{5, {3, -0.5f, {}}}}, &wire);
  const std::vector<sched::RequestResult> results = ProtoToResults(wire);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].has_token);
  EXPECT_EQ(results[0].token.token_id, 3);
  EXPECT_TRUE(results[0].prompt_logprobs.empty());
}

TEST(ControlConvertTest, PerRequestFailuresReachTheSchedulerInProcessAndOverTheWire) {
  const std::vector<engine::SequenceSample> samples = {{1, {42, -1.0f, {}}}};
  const std::vector<engine::RequestFailure> failures = {
      {2, absl::FailedPreconditionError("structured outputs are unavailable on this worker")}};
  auto expect = [&failures](const std::vector<sched::RequestResult>& results, const std::string& what) {
    ASSERT_EQ(results.size(), 2u) << what;
    EXPECT_TRUE(results[0].has_token) << what;
    EXPECT_TRUE(results[0].error.ok()) << what;
    EXPECT_EQ(results[1].request_id, 2u) << what;
    EXPECT_FALSE(results[1].has_token) << what;
    EXPECT_EQ(results[1].error, failures[0].status) << what;
  };
  std::vector<sched::RequestResult> in_process = SamplesToResults(samples);
  AddFailures(failures, &in_process);
  expect(in_process, "in process");

  v1::IterationResult wire;
  SamplesToProto(samples, &wire);
  FailuresToProto(failures, &wire);
  v1::IterationResult parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  expect(ProtoToResults(parsed), "over the wire");
}

}  // namespace
}  // namespace orca::services
