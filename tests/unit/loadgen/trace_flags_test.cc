// The trace flag table every load tool shares: which flags each scope registers, what the
// parsed values become, and the range errors that name the flag.

#include "core/loadgen/trace_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace orca::loadgen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::Status Parse(FlagSet& flags, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return flags.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(TraceFlagsTest, PaperScopeOffersThePaperTraceOnly) {
  TraceFlags values;
  values.options.num_requests = 1000;  // a program's own default shows in --help
  FlagSet flags("prog", "");
  AddTraceFlags(TraceFlagScope::kPaper, &values, &flags);
  const std::string usage = flags.Usage();
  EXPECT_THAT(usage, HasSubstr("--num-requests <int>\n      Requests of the trace (per run) (default: 1000)"));
  for (const char* name :
       {"--seed", "--min-prompt-tokens", "--max-prompt-tokens", "--min-new-tokens", "--max-new-tokens"}) {
    EXPECT_THAT(usage, HasSubstr(name));
  }
  for (const char* name : {"--trace", "--prompt-tokens", "--time-scale", "--chat-turns-min", "--rate"}) {
    EXPECT_THAT(usage, Not(HasSubstr(std::string(name) + " ")));
  }
  ASSERT_TRUE(Parse(flags, {"--seed=-1", "--min-prompt-tokens=8", "--max-new-tokens", "4"}).ok());
  absl::StatusOr<LoadTraceOptions> options = TraceOptionsFromFlags(values);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->seed, ~uint64_t{0});  // a signed flag, as the seed always was
  EXPECT_EQ(options->num_requests, 1000);
  EXPECT_EQ(options->min_prompt_tokens, 8);
  EXPECT_EQ(options->max_prompt_tokens, 512);
  EXPECT_EQ(options->max_new_tokens, 4);
  EXPECT_EQ(options->trace, "paper");
}

TEST(TraceFlagsTest, AllScopeSetsEveryTraceKind) {
  TraceFlags values;
  FlagSet flags("prog", "");
  AddTraceFlags(TraceFlagScope::kAll, &values, &flags);
  ASSERT_TRUE(
      Parse(flags, {"--trace=chat", "--prompt-tokens=7", "--output-tokens=3", "--time-scale=0.5", "--chat-turns-min=1",
                    "--chat-turns-max=2", "--chat-conversations=4", "--chat-closed-loop", "--chat-think-time=0.25"})
          .ok());
  absl::StatusOr<LoadTraceOptions> options = TraceOptionsFromFlags(values);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->trace, "chat");
  EXPECT_EQ(options->prompt_tokens, 7);
  EXPECT_EQ(options->output_tokens, 3);
  EXPECT_EQ(options->time_scale, 0.5);
  EXPECT_EQ(options->chat_turns_min, 1);
  EXPECT_EQ(options->chat_turns_max, 2);
  EXPECT_EQ(options->chat_conversations, 4);
  EXPECT_TRUE(options->chat_closed_loop);
  EXPECT_EQ(options->chat_think_time_s, 0.25);
}

TEST(TraceFlagsTest, CountsOutsideTheirRangeNameTheFlag) {
  TraceFlags values;
  FlagSet flags("prog", "");
  AddTraceFlags(TraceFlagScope::kAll, &values, &flags);
  ASSERT_TRUE(Parse(flags, {"--chat-user-tokens-max=-3"}).ok());
  EXPECT_EQ(TraceOptionsFromFlags(values).status().message(),
            "--chat-user-tokens-max must be in [0, 1073741824] (got -3)");
  values.options.chat_user_tokens_max = 64;
  values.options.num_requests = (1 << 30) + 1;
  EXPECT_THAT(TraceOptionsFromFlags(values).status().message(), HasSubstr("--num-requests"));
}

TEST(TraceFlagsTest, PoissonOptionsOfAHomogeneousTraceFixEveryLength) {
  LoadTraceOptions options;
  options.trace = "homogeneous";
  options.seed = 9;
  options.arrival_rate = 3;
  options.num_requests = 5;
  options.prompt_tokens = 40;
  options.output_tokens = 6;
  const TraceOptions homogeneous = PoissonTraceOptions(options);
  EXPECT_EQ(homogeneous.seed, 9u);
  EXPECT_EQ(homogeneous.arrival_rate, 3);
  EXPECT_EQ(homogeneous.num_requests, 5);
  EXPECT_EQ(homogeneous.min_prompt_tokens, 40);
  EXPECT_EQ(homogeneous.max_prompt_tokens, 40);
  EXPECT_EQ(homogeneous.min_new_tokens, 6);
  EXPECT_EQ(homogeneous.max_new_tokens, 6);
  options.trace = "paper";
  const TraceOptions paper = PoissonTraceOptions(options);
  EXPECT_EQ(paper.min_prompt_tokens, 32);
  EXPECT_EQ(paper.max_prompt_tokens, 512);
  EXPECT_EQ(paper.min_new_tokens, 1);
  EXPECT_EQ(paper.max_new_tokens, 128);
}

}  // namespace
}  // namespace orca::loadgen
