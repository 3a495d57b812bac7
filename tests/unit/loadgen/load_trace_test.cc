// Traces of the load driver: the paper's §6.2 trace and the homogeneous one (determinism,
// distributions, rate independence of the lengths) and trace-file replay (JSONL and CSV,
// aliases, ordering, errors that name the line).

#include "core/loadgen/load_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "core/common/mapped_file.h"

namespace orca::loadgen {
namespace {

using ::testing::HasSubstr;

std::vector<TraceRequest> MustMake(const LoadTraceOptions& options) {
  absl::StatusOr<std::vector<TraceRequest>> trace = MakeLoadTrace(options);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return trace.ok() ? *trace : std::vector<TraceRequest>{};
}

TEST(LoadTraceTest, PaperTraceIsDeterministicAndFollowsThePapersDistributions) {
  LoadTraceOptions options;
  options.seed = 3;
  options.arrival_rate = 5.0;
  options.num_requests = 20000;
  const std::vector<TraceRequest> trace = MustMake(options);
  const std::vector<TraceRequest> again = MustMake(options);
  ASSERT_EQ(trace.size(), 20000u);
  double prompt_sum = 0, output_sum = 0;
  int prompt_min = 1 << 30, prompt_max = 0, output_min = 1 << 30, output_max = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(trace[i].arrival, again[i].arrival);
    EXPECT_EQ(trace[i].num_prompt_tokens, again[i].num_prompt_tokens);
    EXPECT_EQ(trace[i].max_new_tokens, again[i].max_new_tokens);
    if (i > 0) {
      ASSERT_GE(trace[i].arrival, trace[i - 1].arrival);
    }
    prompt_sum += trace[i].num_prompt_tokens;
    output_sum += trace[i].max_new_tokens;
    prompt_min = std::min(prompt_min, trace[i].num_prompt_tokens);
    prompt_max = std::max(prompt_max, trace[i].num_prompt_tokens);
    output_min = std::min(output_min, trace[i].max_new_tokens);
    output_max = std::max(output_max, trace[i].max_new_tokens);
  }
  // U(32, 512) and U(1, 128), both ends reached; Poisson gaps of mean 1/λ = 0.2 s.
  EXPECT_EQ(prompt_min, 32);
  EXPECT_EQ(prompt_max, 512);
  EXPECT_EQ(output_min, 1);
  EXPECT_EQ(output_max, 128);
  EXPECT_NEAR(prompt_sum / 20000, 272.0, 4.0);
  EXPECT_NEAR(output_sum / 20000, 64.5, 1.0);
  EXPECT_NEAR(absl::ToDoubleSeconds(trace.back().arrival) / 20000, 0.2, 0.01);
}

TEST(LoadTraceTest, RateScalesArrivalsAndKeepsTheRequests) {
  LoadTraceOptions slow;
  slow.num_requests = 200;
  slow.arrival_rate = 1;
  LoadTraceOptions fast = slow;
  fast.arrival_rate = 4;
  const std::vector<TraceRequest> a = MustMake(slow);
  const std::vector<TraceRequest> b = MustMake(fast);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].num_prompt_tokens, b[i].num_prompt_tokens);
    EXPECT_EQ(a[i].max_new_tokens, b[i].max_new_tokens);
    EXPECT_NEAR(absl::ToDoubleSeconds(a[i].arrival), 4 * absl::ToDoubleSeconds(b[i].arrival), 1e-6);
  }
  LoadTraceOptions other_seed = slow;
  other_seed.seed = 2;
  const std::vector<TraceRequest> c = MustMake(other_seed);
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i].num_prompt_tokens == c[i].num_prompt_tokens;
  EXPECT_LT(same, 20);
}

TEST(LoadTraceTest, HomogeneousTraceHasFixedLengthsAndPoissonArrivals) {
  LoadTraceOptions options;
  options.trace = "homogeneous";
  options.prompt_tokens = 100;
  options.output_tokens = 7;
  options.arrival_rate = 2;
  options.num_requests = 5000;
  const std::vector<TraceRequest> trace = MustMake(options);
  ASSERT_EQ(trace.size(), 5000u);
  for (const TraceRequest& r : trace) {
    EXPECT_EQ(r.num_prompt_tokens, 100);
    EXPECT_EQ(r.max_new_tokens, 7);
  }
  EXPECT_NEAR(absl::ToDoubleSeconds(trace.back().arrival) / 5000, 0.5, 0.03);
}

TEST(LoadTraceTest, RejectsBadSyntheticOptionsNamingTheField) {
  LoadTraceOptions options;
  options.arrival_rate = 0;
  EXPECT_THAT(std::string(MakeLoadTrace(options).status().message()), HasSubstr("arrival_rate"));
  options = LoadTraceOptions();
  options.num_requests = 0;
  EXPECT_THAT(std::string(MakeLoadTrace(options).status().message()), HasSubstr("num_requests"));
  options = LoadTraceOptions();
  options.min_prompt_tokens = 600;
  EXPECT_THAT(std::string(MakeLoadTrace(options).status().message()), HasSubstr("prompt"));
  options = LoadTraceOptions();
  options.trace = "homogeneous";
  options.output_tokens = 0;
  EXPECT_THAT(std::string(MakeLoadTrace(options).status().message()), HasSubstr("output_tokens"));
}

TEST(LoadTraceTest, ParsesJsonlWithAliasesSortsAndShiftsToZero) {
  const std::string text =
      "{\"timestamp\": 1000.5, \"input_tokens\": 10, \"output_tokens\": 3}\r\n"
      "\n"
      "{\"arrival_s\": 1000.0, \"prompt_tokens\": 20, \"max_tokens\": 4, \"extra\": \"x\"}\n";
  absl::StatusOr<std::vector<TraceRequest>> trace = ParseTraceText(text, "t.jsonl");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->size(), 2u);
  EXPECT_EQ((*trace)[0].arrival, absl::ZeroDuration());
  EXPECT_EQ((*trace)[0].num_prompt_tokens, 20);
  EXPECT_EQ((*trace)[0].max_new_tokens, 4);
  EXPECT_EQ((*trace)[1].arrival, absl::Milliseconds(500));
  EXPECT_EQ((*trace)[1].num_prompt_tokens, 10);
}

TEST(LoadTraceTest, ParsesCsvByHeaderNames) {
  const std::string text =
      "max_tokens, note, arrival_time, prompt_tokens\n"
      "5, a, 0.0, 100\n"
      "6, b, 0.25, 200\n";
  absl::StatusOr<std::vector<TraceRequest>> trace = ParseTraceText(text, "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->size(), 2u);
  EXPECT_EQ((*trace)[1].arrival, absl::Milliseconds(250));
  EXPECT_EQ((*trace)[1].num_prompt_tokens, 200);
  EXPECT_EQ((*trace)[1].max_new_tokens, 6);
}

TEST(LoadTraceTest, FileErrorsNameTheSourceAndLine) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"{\"arrival_s\": 0, \"prompt_tokens\": 5}\n", "t:1: missing 'max_tokens'"},
      {"{\"arrival_s\": 0, \"prompt_tokens\": 5, \"max_tokens\": 1}\n{oops\n", "t:2: not a JSON object"},
      {"{\"arrival_s\": -1, \"prompt_tokens\": 5, \"max_tokens\": 1}\n", "t:1: arrival"},
      {"{\"arrival_s\": 0, \"prompt_tokens\": 2.5, \"max_tokens\": 1}\n", "t:1: prompt tokens must be a whole number"},
      {"{\"arrival_s\": 0, \"prompt_tokens\": \"7\", \"max_tokens\": 1}\n", "t:1: 'prompt_tokens' must be a number"},
      {"{\"arrival_s\": 0, \"prompt_tokens\": 0, \"max_tokens\": 1}\n", "t:1: prompt tokens must be in"},
      {"arrival_s,prompt_tokens\n0,1\n", "t:1: the CSV header must name"},
      {"arrival_s,prompt_tokens,max_tokens\n0,1\n", "t:2: expected 3 columns, got 2"},
      {"arrival_s,prompt_tokens,max_tokens\n0,x,1\n", "t:2: prompt tokens 'x' is not an integer"},
      {"arrival_s,prompt_tokens,max_tokens\n", "t: no requests"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<TraceRequest>> trace = ParseTraceText(c.text, "t");
    ASSERT_FALSE(trace.ok()) << c.text;
    EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(trace.status().message()), HasSubstr(c.expected)) << c.text;
  }
}

TEST(LoadTraceTest, FileTraceRoundTripsAndHonoursNumRequestsAndTimeScale) {
  LoadTraceOptions synthetic;
  synthetic.num_requests = 20;
  synthetic.arrival_rate = 3;
  const std::vector<TraceRequest> original = MustMake(synthetic);
  const std::string path = ::testing::TempDir() + "/load_trace_test.jsonl";
  ASSERT_TRUE(WriteStringToFile(path, TraceToJsonl(original)).ok());

  LoadTraceOptions file;
  file.trace = path;
  file.num_requests = 0;
  const std::vector<TraceRequest> replay = MustMake(file);
  ASSERT_EQ(replay.size(), original.size());
  const absl::Duration origin = original.front().arrival;
  for (size_t i = 0; i < replay.size(); ++i) {
    EXPECT_LT(absl::AbsDuration(replay[i].arrival - (original[i].arrival - origin)), absl::Microseconds(1));
    EXPECT_EQ(replay[i].num_prompt_tokens, original[i].num_prompt_tokens);
    EXPECT_EQ(replay[i].max_new_tokens, original[i].max_new_tokens);
  }
  file.num_requests = 5;
  file.time_scale = 0.5;
  const std::vector<TraceRequest> half = MustMake(file);
  ASSERT_EQ(half.size(), 5u);
  EXPECT_LT(absl::AbsDuration(half[4].arrival - replay[4].arrival / 2), absl::Microseconds(1));

  file.trace = ::testing::TempDir() + "/does-not-exist.jsonl";
  EXPECT_FALSE(MakeLoadTrace(file).ok());
  std::filesystem::remove(path);
}

TEST(LoadTraceTest, ChatTraceSharesTheSystemPromptAndEachConversationsHistory) {
  LoadTraceOptions options;
  options.trace = "chat";
  options.seed = 4;
  options.arrival_rate = 3;
  options.num_requests = 200;
  options.min_new_tokens = 8;
  options.max_new_tokens = 32;
  const std::vector<TraceRequest> trace = MustMake(options);
  ASSERT_EQ(trace.size(), 200u);
  const uint64_t system_key = trace[0].segments.at(0).key;
  const int32_t system_tokens = trace[0].segments.at(0).num_tokens;
  EXPECT_GE(system_tokens, 200);
  EXPECT_LE(system_tokens, 500);
  int64_t later_turns = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceRequest& r = trace[i];
    ASSERT_FALSE(r.segments.empty());
    EXPECT_EQ(r.segments[0].key, system_key);  // every prompt opens with the same system prompt
    EXPECT_EQ(r.segments[0].num_tokens, system_tokens);
    int32_t total = 0;
    for (const auto& s : r.segments) total += s.num_tokens;
    EXPECT_EQ(total, r.num_prompt_tokens);
    EXPECT_GE(r.max_new_tokens, 8);
    EXPECT_LE(r.max_new_tokens, 32);
    // Turn k (k > 1) repeats its conversation's previous prompt, then that turn's reply, then
    // a new user message: the previous prompt is a prefix of this one.
    if (r.segments.size() > 2) {
      ++later_turns;
      bool found = false;
      for (size_t j = 0; j < i && !found; ++j) {
        const auto& p = trace[j].segments;
        found = p.size() + 2 == r.segments.size() &&
                std::equal(p.begin(), p.end(), r.segments.begin(),
                           [](const auto& a, const auto& b) { return a.key == b.key && a.num_tokens == b.num_tokens; });
        if (found) {  // its reply
          EXPECT_EQ(r.segments[p.size()].num_tokens, trace[j].max_new_tokens);
        }
      }
      EXPECT_TRUE(found) << "request " << i << " continues no earlier turn";
    }
  }
  EXPECT_GT(later_turns, 50);
  // The structure does not depend on the rate; a saved trace replays it.
  options.arrival_rate = 9;
  const std::vector<TraceRequest> faster = MustMake(options);
  EXPECT_EQ(faster[17].num_prompt_tokens, trace[17].num_prompt_tokens);
  absl::StatusOr<std::vector<TraceRequest>> replay = ParseTraceText(TraceToJsonl(trace), "chat.jsonl");
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ(replay->at(42).segments.size(), trace[42].segments.size());
  EXPECT_EQ(replay->at(42).segments.back().key, trace[42].segments.back().key);
  EXPECT_THAT(std::string(ParseTraceText("{\"arrival_s\": 0, \"prompt_tokens\": 5, \"max_tokens\": 1, "
                                         "\"segments\": [[1, 3]]}",
                                         "bad.jsonl")
                              .status()
                              .message()),
              HasSubstr("segments sum to 3 tokens"));
  options.chat_turns_min = 0;
  EXPECT_THAT(std::string(MakeLoadTrace(options).status().message()), HasSubstr("chat_turns"));
}

TEST(LoadTraceTest, ClosedLoopChatConversationsArePoissonStartsWithTurnsFromTheSeed) {
  LoadTraceOptions options;
  options.trace = "chat";
  options.chat_closed_loop = true;
  options.seed = 9;
  options.arrival_rate = 2;
  options.num_requests = 100;
  options.min_new_tokens = 4;
  options.max_new_tokens = 12;
  absl::StatusOr<std::vector<ChatConversation>> made = MakeChatConversations(options);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::vector<ChatConversation>& conversations = *made;
  int64_t turns = 0;
  std::set<uint64_t> user_keys;
  for (size_t c = 0; c < conversations.size(); ++c) {
    const ChatConversation& conv = conversations[c];
    if (c > 0) {
      EXPECT_GE(conv.arrival, conversations[c - 1].arrival);
    }
    EXPECT_EQ(conv.system.key, conversations[0].system.key);  // one shared system prompt
    EXPECT_GE(conv.system.num_tokens, 200);
    EXPECT_LE(conv.system.num_tokens, 500);
    ASSERT_FALSE(conv.turns.empty());
    if (c + 1 < conversations.size()) {  // only the last may be cut short
      EXPECT_GE(conv.turns.size(), 2u);
    }
    EXPECT_LE(conv.turns.size(), 6u);
    for (const ChatTurn& t : conv.turns) {
      EXPECT_TRUE(user_keys.insert(t.user.key).second) << "user messages are never shared";
      EXPECT_NE(t.user.key, conv.system.key);
      EXPECT_GE(t.user.num_tokens, 16);
      EXPECT_LE(t.user.num_tokens, 64);
      EXPECT_GE(t.max_new_tokens, 4);
      EXPECT_LE(t.max_new_tokens, 12);
      ++turns;
    }
  }
  EXPECT_EQ(turns, 100);
  // Conversation starts are the paper trace's Poisson arrivals at the rate (conversations/s).
  LoadTraceOptions paper = options;
  paper.trace = "paper";
  paper.chat_closed_loop = false;
  const std::vector<TraceRequest> arrivals = MustMake(paper);
  for (size_t c = 0; c < conversations.size(); ++c) EXPECT_EQ(conversations[c].arrival, arrivals[c].arrival);
  // The structure depends on the seed only: a faster rate starts the same conversations sooner.
  options.arrival_rate = 8;
  absl::StatusOr<std::vector<ChatConversation>> faster = MakeChatConversations(options);
  ASSERT_TRUE(faster.ok());
  ASSERT_EQ(faster->size(), conversations.size());
  EXPECT_EQ(faster->back().turns.back().user.num_tokens, conversations.back().turns.back().user.num_tokens);
  EXPECT_LT(faster->back().arrival, conversations.back().arrival);
  options.chat_think_time_s = -1;
  EXPECT_THAT(std::string(MakeChatConversations(options).status().message()), HasSubstr("chat_think_time_s"));
  options.chat_think_time_s = 0;
  options.chat_user_tokens_min = 0;
  EXPECT_THAT(std::string(MakeChatConversations(options).status().message()), HasSubstr("chat_user_tokens"));
}

}  // namespace
}  // namespace orca::loadgen
