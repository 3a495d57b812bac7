// The plan → engine conversions carry the FasterTransformer baseline's prompt padding: in
// process (PlanToStepInput) and over the wire (PlanToControlMessage →
// ControlMessageToStepInput) alike.

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
  a.new_request->max_tokens = 12;
  a.num_padding_tokens = 5;
  sched::ScheduledRequest b;
  b.request_id = 12;
  b.input_token_ids = {4, 5, 6, 7, 8, 9, 10, 11};
  b.new_request = sched::NewRequestData{};
  b.new_request->max_tokens = 16;
  plan.requests = {a, b};
  plan.released_request_ids = {4};
  return plan;
}

void ExpectPadded(const engine::StepInput& in) {
  ASSERT_EQ(in.seqs.size(), 3u);
  EXPECT_EQ(in.seqs[0].request_id, 11u);
  const engine::StepSequence& pad = in.seqs[1];
  EXPECT_EQ(pad.request_id, engine::PaddingSequenceId(11));
  EXPECT_EQ(pad.token_ids, std::vector<int32_t>(5, 0));
  EXPECT_EQ(pad.start_position, 0);
  EXPECT_FALSE(pad.sample);
  ASSERT_TRUE(pad.new_request.has_value());
  EXPECT_EQ(pad.new_request->max_tokens, 5);
  EXPECT_EQ(pad.new_request->kv_block_size, 0);
  EXPECT_EQ(in.seqs[2].request_id, 12u);  // no padding: nothing added
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

}  // namespace
}  // namespace orca::services
