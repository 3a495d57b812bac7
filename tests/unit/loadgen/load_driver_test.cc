// The load driver against an in-test OpenAI-compatible server on loopback: request bodies,
// chunked SSE streams, per-request failures (HTTP error, error event, refused connection),
// the run's time limit, prompt sources and the written CSV/JSON. Outcomes and counts only:
// no assertion depends on timing.

#include "core/loadgen/load_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/common/mapped_file.h"
#include "core/loadgen/bench_run.h"
#include "core/loadgen/prompt_builder.h"
#include "nlohmann/json.hpp"
#include "tests/unit/loadgen/fake_openai_server.h"

namespace orca::loadgen {
namespace {

using testing::FakeOpenAiServer;
using ::testing::HasSubstr;
using json = nlohmann::json;

TraceRequest At(double seconds, int32_t prompt, int32_t max_new_tokens) {
  TraceRequest r;
  r.arrival = absl::Seconds(seconds);
  r.num_prompt_tokens = prompt;
  r.max_new_tokens = max_new_tokens;
  return r;
}

PromptBuilder Prompts(const std::string& url) {
  PromptSourceOptions o;
  o.base_url = url;
  o.model = "fake-model";
  absl::StatusOr<PromptBuilder> p = ResolvePromptBuilder(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

LoadDriverOptions Options(const std::string& url) {
  LoadDriverOptions o;
  o.base_url = url;
  o.model = "fake-model";
  o.show_progress = false;
  o.max_duration = absl::Seconds(30);
  return o;
}

TEST(LoadDriverTest, StreamsEveryRequestAndRecordsItsTokens) {
  FakeOpenAiServer server;
  absl::StatusOr<std::unique_ptr<LoadDriver>> driver = LoadDriver::Create(Options(server.url()), Prompts(server.url()));
  ASSERT_TRUE(driver.ok()) << driver.status();
  const std::vector<TraceRequest> trace = {At(0, 12, 5), At(0, 3, 1), At(0.01, 40, 17), At(0.02, 1, 8)};
  absl::StatusOr<LoadRunResult> run = (*driver)->Run(trace);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->records.size(), trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    const RequestRecord& r = run->records[i];
    EXPECT_EQ(r.outcome, RequestOutcome::kOk) << i << ": " << r.error;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.output_tokens, trace[i].max_new_tokens);
    EXPECT_EQ(r.counted_tokens, trace[i].max_new_tokens);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.itl_s.size(), static_cast<size_t>(trace[i].max_new_tokens - 1));
    EXPECT_GE(r.e2e_s, r.ttft_s);
  }
  const std::vector<json> bodies = server.completion_bodies();
  ASSERT_EQ(bodies.size(), trace.size());
  std::set<size_t> prompt_lengths;
  for (const json& body : bodies) {
    EXPECT_EQ(body["model"], "fake-model");
    EXPECT_EQ(body["stream"], true);
    EXPECT_EQ(body["ignore_eos"], true);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
    EXPECT_FALSE(body.contains("logprobs"));
    prompt_lengths.insert(body["prompt"].size());
    for (const json& id : body["prompt"]) EXPECT_TRUE(id == 5 || id == 6 || id == 7) << id;
  }
  EXPECT_EQ(prompt_lengths, (std::set<size_t>{12, 3, 40, 1}));
}

// Closed-loop chat: each turn is sent after the previous one completed (plus the think time), its prompt the
// previous prompt + the token ids the server returned + the new user message; a failed turn ends its conversation.
TEST(LoadDriverTest, ClosedLoopChatSendsTheServersReplyBackInTheNextTurn) {
  FakeOpenAiServer server;
  const PromptBuilder prompts = Prompts(server.url());
  absl::StatusOr<std::unique_ptr<LoadDriver>> driver = LoadDriver::Create(Options(server.url()), prompts);
  ASSERT_TRUE(driver.ok()) << driver.status();
  const PromptSegment system{1, 10};
  ChatConversation a{absl::ZeroDuration(), system, {{{10, 4}, 3}, {{11, 5}, 2}, {{12, 3}, 4}}};
  ChatConversation b{absl::Milliseconds(10), system, {{{20, 4}, FakeOpenAiServer::kHttpError}, {{21, 2}, 2}}};
  const absl::Duration think = absl::Milliseconds(20);
  absl::StatusOr<LoadRunResult> run = (*driver)->RunClosedLoop({a, b}, think);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->records.size(), 5u);  // a's three turns, then b's two
  const std::vector<RequestRecord>& r = run->records;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r[i].outcome, RequestOutcome::kOk) << i << ": " << r[i].error;
    EXPECT_TRUE(r[i].token_ids_reported);
    std::vector<int32_t> want;
    for (int k = 0; k < a.turns[i].max_new_tokens; ++k) want.push_back(FakeOpenAiServer::kFirstTokenId + k);
    EXPECT_EQ(r[i].output_token_ids, want) << i;
  }
  for (int i = 1; i < 3; ++i) {
    // Sent no earlier than the previous turn's end plus the think time.
    EXPECT_GE(r[i].scheduled_s, r[i - 1].sent_s + r[i - 1].e2e_s + absl::ToDoubleSeconds(think) - 1e-9) << i;
    EXPECT_GE(r[i].sent_s, r[i].scheduled_s) << i;
  }
  EXPECT_EQ(r[3].outcome, RequestOutcome::kFailed);
  EXPECT_EQ(r[4].outcome, RequestOutcome::kNotSent);
  EXPECT_THAT(r[4].error, HasSubstr("failed"));

  // The prompts on the wire: [system][user 1], then each previous prompt + its reply's ids + the next user message.
  std::vector<json> bodies = server.completion_bodies();
  ASSERT_EQ(bodies.size(), 4u);
  std::sort(bodies.begin(), bodies.end(),
            [](const json& x, const json& y) { return x["prompt"].size() < y["prompt"].size(); });
  std::vector<int32_t> prompt = prompts.Build({system, a.turns[0].user});
  std::vector<std::vector<int32_t>> want = {prompt};
  for (int i = 1; i < 3; ++i) {
    for (int k = 0; k < a.turns[i - 1].max_new_tokens; ++k) prompt.push_back(FakeOpenAiServer::kFirstTokenId + k);
    const std::vector<int32_t> user = prompts.Build({a.turns[i].user});
    prompt.insert(prompt.end(), user.begin(), user.end());
    want.push_back(prompt);
    EXPECT_EQ(r[i].prompt_tokens, static_cast<int32_t>(prompt.size()));
  }
  std::vector<std::vector<int32_t>> sent_a;
  for (const json& body : bodies) {
    EXPECT_EQ(body["return_token_ids"], true);
    if (body["max_tokens"] != FakeOpenAiServer::kHttpError)
      sent_a.push_back(body["prompt"].get<std::vector<int32_t>>());
  }
  EXPECT_EQ(sent_a, want);
}

TEST(LoadDriverTest, RecordsFailuresCutsOffAtTheTimeLimitAndSkipsLateArrivals) {
  FakeOpenAiServer server;
  LoadDriverOptions options = Options(server.url());
  options.max_duration = absl::Milliseconds(1500);
  absl::StatusOr<std::unique_ptr<LoadDriver>> driver = LoadDriver::Create(options, Prompts(server.url()));
  ASSERT_TRUE(driver.ok());
  const std::vector<TraceRequest> trace = {At(0, 4, 3), At(0, 4, FakeOpenAiServer::kHttpError),
                                           At(0, 4, FakeOpenAiServer::kErrorEvent), At(0, 4, FakeOpenAiServer::kHang),
                                           At(3600, 4, 3)};
  absl::StatusOr<LoadRunResult> run = (*driver)->Run(trace);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<RequestRecord>& r = run->records;
  EXPECT_EQ(r[0].outcome, RequestOutcome::kOk);
  EXPECT_EQ(r[1].outcome, RequestOutcome::kFailed);
  EXPECT_EQ(r[1].http_status, 500);
  EXPECT_THAT(r[1].error, HasSubstr("engine exploded"));
  EXPECT_EQ(r[2].outcome, RequestOutcome::kFailed);
  EXPECT_THAT(r[2].error, HasSubstr("scheduler gone"));
  EXPECT_EQ(r[3].outcome, RequestOutcome::kUnfinished);
  EXPECT_EQ(r[3].counted_tokens, 1);  // what arrived before the cut is kept
  EXPECT_EQ(r[4].outcome, RequestOutcome::kNotSent);

  const BenchSummary s = SummarizeRun(r, run->run_duration_s);
  EXPECT_EQ(s.num_completed, 1);
  EXPECT_EQ(s.num_failed, 2);
  EXPECT_EQ(s.num_unfinished, 1);
  EXPECT_EQ(s.num_not_sent, 1);
}

TEST(LoadDriverTest, RefusedConnectionsAreFailedRequests) {
  std::string url;
  {
    FakeOpenAiServer gone;
    url = gone.url();
  }  // nothing listens there any more
  absl::StatusOr<PromptBuilder> prompts = PromptBuilder::FromCandidates({1, 2, 3}, "test ids", /*seed=*/1);
  ASSERT_TRUE(prompts.ok());
  absl::StatusOr<std::unique_ptr<LoadDriver>> driver = LoadDriver::Create(Options(url), *std::move(prompts));
  ASSERT_TRUE(driver.ok());
  absl::StatusOr<LoadRunResult> run = (*driver)->Run({At(0, 2, 2), At(0, 2, 2)});
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.outcome, RequestOutcome::kFailed);
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(LoadDriverTest, RequestBodyCarriesTheOptions) {
  absl::StatusOr<PromptBuilder> prompts = PromptBuilder::FromCandidates({9}, "nines", 1);
  ASSERT_TRUE(prompts.ok());
  LoadDriverOptions options = Options("http://127.0.0.1:1");
  options.logprobs = true;
  options.include_usage = false;
  options.ignore_eos = false;
  options.temperature = 0.0;
  options.top_p = 0.9;
  absl::StatusOr<std::unique_ptr<LoadDriver>> driver = LoadDriver::Create(options, *std::move(prompts));
  ASSERT_TRUE(driver.ok());
  const json body = json::parse((*driver)->RequestBody(0, At(0, 3, 7)));
  EXPECT_EQ(body["prompt"], json::array({9, 9, 9}));
  EXPECT_EQ(body["max_tokens"], 7);
  EXPECT_EQ(body["logprobs"], 0);
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_EQ(body["top_p"], 0.9);
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_FALSE(body.contains("ignore_eos"));
}

TEST(LoadDriverTest, RejectsBadOptions) {
  auto create = [](LoadDriverOptions o) {
    return LoadDriver::Create(std::move(o), *PromptBuilder::FromCandidates({1}, "", 1)).status();
  };
  LoadDriverOptions o = Options("ftp://x");
  EXPECT_THAT(std::string(create(o).message()), HasSubstr("http://"));
  o = Options("http://x");
  o.model = "";
  EXPECT_THAT(std::string(create(o).message()), HasSubstr("model"));
  o = Options("http://x");
  o.max_duration = absl::ZeroDuration();
  EXPECT_THAT(std::string(create(o).message()), HasSubstr("max_duration"));
  o = Options("http://x");
  o.max_concurrency = -1;
  EXPECT_THAT(std::string(create(o).message()), HasSubstr("max_concurrency"));
  o = Options("http://x");
  o.top_p = 0.0;
  EXPECT_THAT(std::string(create(o).message()), HasSubstr("top_p must be in (0, 1] (got 0)"));
}

TEST(PromptBuilderTest, TokenizesOnTheServerOrFallsBackToRandomIds) {
  FakeOpenAiServer with;
  PromptBuilder tokenized = Prompts(with.url());
  EXPECT_EQ(tokenized.num_candidates(), 3u);  // distinct ids of [5, 6, 7, 5]
  EXPECT_THAT(tokenized.description(), HasSubstr("POST /tokenize"));

  FakeOpenAiServer without(FakeOpenAiServer::Tokenize::kNone);
  PromptSourceOptions o;
  o.base_url = without.url();
  o.token_id_min = 10;
  o.token_id_max = 19;
  o.token_id_range_given = true;
  absl::StatusOr<PromptBuilder> random = ResolvePromptBuilder(o);
  ASSERT_TRUE(random.ok()) << random.status();
  EXPECT_EQ(random->num_candidates(), 10u);
  EXPECT_THAT(random->description(), HasSubstr("random ids in [10, 19]"));
  o.mode = "tokenize";
  EXPECT_FALSE(ResolvePromptBuilder(o).ok());
  o.mode = "bogus";
  EXPECT_EQ(ResolvePromptBuilder(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.mode = "random";
  o.token_id_min = 5;
  o.token_id_max = 4;
  EXPECT_EQ(ResolvePromptBuilder(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PromptBuilderTest, SendsLlamaCppsBodyWhenTheFirstGetsAnEmptyList) {
  FakeOpenAiServer llama(FakeOpenAiServer::Tokenize::kLlamaCpp);
  PromptSourceOptions o;
  o.base_url = llama.url();
  o.model = "m";
  absl::StatusOr<PromptBuilder> p = ResolvePromptBuilder(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_candidates(), 3u);  // the server's ids, not a random range
  EXPECT_THAT(p->description(), HasSubstr("POST /tokenize"));
  const std::vector<json> bodies = llama.tokenize_bodies();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_TRUE(bodies[0].contains("prompt"));
  ASSERT_TRUE(bodies[1].contains("content"));
  EXPECT_TRUE(bodies[1]["content"].is_string());
  EXPECT_FALSE(bodies[1]["content"].get<std::string>().empty());
  EXPECT_EQ(bodies[1]["add_special"], false);  // no BOS among the ids
  o.mode = "tokenize";
  EXPECT_TRUE(ResolvePromptBuilder(o).ok());
}

TEST(PromptBuilderTest, AutoNeverFallsBackToTheDefaultRangeOfSpecialIds) {
  FakeOpenAiServer without(FakeOpenAiServer::Tokenize::kNone);
  PromptSourceOptions o;
  o.base_url = without.url();
  // Defaults [1, 255]: BOS, EOS and the byte tokens of a Llama vocabulary.
  absl::StatusOr<PromptBuilder> p = ResolvePromptBuilder(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("HTTP 404"));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("--token-id-min"));
  // Asked for explicitly, random ids are the user's choice.
  o.mode = "random";
  absl::StatusOr<PromptBuilder> random = ResolvePromptBuilder(o);
  ASSERT_TRUE(random.ok()) << random.status();
  EXPECT_EQ(random->num_candidates(), 255u);
}

TEST(PromptBuilderTest, PromptsAreDeterministicPerRequestAndExactlyLong) {
  absl::StatusOr<PromptBuilder> a = PromptBuilder::FromCandidates({1, 2, 3, 4, 5, 6, 7, 8}, "", 42);
  absl::StatusOr<PromptBuilder> b = PromptBuilder::FromCandidates({1, 2, 3, 4, 5, 6, 7, 8}, "", 42);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Build(3, 100), b->Build(3, 100));
  EXPECT_EQ(a->Build(3, 100).size(), 100u);
  EXPECT_NE(a->Build(3, 100), a->Build(4, 100));
  EXPECT_TRUE(a->Build(0, 0).empty());
  EXPECT_FALSE(PromptBuilder::FromCandidates({}, "", 1).ok());
  EXPECT_FALSE(PromptBuilder::FromCandidates({-1}, "", 1).ok());
}

TEST(PromptBuilderTest, ParsesTokenizeResponsesOfDifferentServers) {
  EXPECT_EQ(*ParseTokenizeResponse(R"({"tokens":[1,2,3],"count":3})"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*ParseTokenizeResponse(R"({"tokens":[[4,"a"],[5,"b"]]})"), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(*ParseTokenizeResponse(R"({"tokens":[{"id":6,"piece":"c"}]})"), (std::vector<int32_t>{6}));
  for (const char* bad :
       {"", "[]", R"({"tokens":[]})", R"({"tokens":["x"]})", R"({"tokens":[-3]})", R"({"ids":[1]})"}) {
    EXPECT_FALSE(ParseTokenizeResponse(bad).ok()) << bad;
  }
}

TEST(BenchRunTest, RunsTheClosedLoopChatTrace) {
  FakeOpenAiServer server;
  BenchRunOptions options;
  options.trace.trace = "chat";
  options.trace.chat_closed_loop = true;
  options.trace.arrival_rate = 50;
  options.trace.num_requests = 7;
  options.trace.chat_system_tokens_min = options.trace.chat_system_tokens_max = 12;
  options.trace.chat_user_tokens_min = options.trace.chat_user_tokens_max = 3;
  options.trace.min_new_tokens = options.trace.max_new_tokens = 2;
  options.driver.base_url = server.url();
  options.driver.show_progress = false;
  options.driver.max_duration = absl::Seconds(30);
  absl::StatusOr<BenchRunReport> report = RunBenchmark(options, "closed");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->summary.num_completed, 7);
  const std::vector<std::pair<std::string, std::string>>& config = report->config;
  EXPECT_NE(
      std::find(config.begin(), config.end(), std::make_pair(std::string("chat_closed_loop"), std::string("true"))),
      config.end());
  // Every later turn is longer than the one before it by the reply (2) and a user message (3).
  std::set<size_t> lengths;
  for (const json& body : server.completion_bodies()) lengths.insert(body["prompt"].size());
  EXPECT_TRUE(lengths.contains(15u));  // [system 12][user 3]
  EXPECT_TRUE(lengths.contains(20u));  // + reply 2 + user 3
  options.trace.trace = "paper";
  EXPECT_THAT(std::string(RunBenchmark(options, "bad").status().message()), HasSubstr("chat trace"));
}

TEST(BenchRunTest, RunsAFullBenchmarkAndWritesCsvAndJson) {
  FakeOpenAiServer server;
  BenchRunOptions options;
  options.trace.trace = "homogeneous";
  options.trace.arrival_rate = 200;
  options.trace.num_requests = 6;
  options.trace.prompt_tokens = 8;
  options.trace.output_tokens = 4;
  options.driver.base_url = server.url();
  options.driver.show_progress = false;
  options.driver.max_duration = absl::Seconds(30);
  absl::StatusOr<BenchRunReport> report = RunBenchmark(options, "unit");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->summary.num_completed, 6);
  EXPECT_EQ(report->summary.total_output_tokens, 24);
  EXPECT_THAT(FormatReport(*report), HasSubstr("model            fake-model"));  // discovered

  const std::string dir = ::testing::TempDir() + "/bench_run_test";
  ASSERT_TRUE(WriteReport(*report, dir).ok());
  absl::StatusOr<std::string> csv = ReadFileToString(dir + "/requests.csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(std::count(csv->begin(), csv->end(), '\n'), 7);
  EXPECT_THAT(*csv, HasSubstr(",ok,200,length,4,1,4,"));
  absl::StatusOr<std::string> text = ReadFileToString(dir + "/summary.json");
  ASSERT_TRUE(text.ok());
  const json summary = json::parse(*text);
  EXPECT_EQ(summary["label"], "unit");
  EXPECT_EQ(summary["summary"]["num_completed"], 6);
  EXPECT_EQ(summary["requests"].size(), 6u);
  EXPECT_EQ(summary["config"]["trace"], "homogeneous");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace orca::loadgen
