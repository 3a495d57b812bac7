// One validation layer for every entry point: the same out-of-range value is
// refused identically — the same code, the same message naming the field and
// its limit (core/common/sampling_limits.h) — by the gateway's HTTP API
// (400), its gRPC Generation API and the scheduler's gRPC Generate
// (INVALID_ARGUMENT), and nothing of it reaches the scheduler behind the
// gateway or the engine behind the scheduler. All in-process on 127.0.0.1:0.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orca/v1/generation.grpc.pb.h"
#include "tests/unit/common/nested_text.h"
#include "tests/unit/gateway/gateway_test_util.h"
#include "tests/unit/services/in_process_scheduler.h"

namespace orca {
namespace {

using nlohmann::json;
using orca::testing::Nested;
using ::testing::HasSubstr;
using Kind = v1::StructuredOutput;

// What each surface is sent: a valid base request changed by one of these. A surface
// without the field has no function and is skipped.
struct Case {
  const char* name;
  std::function<void(json&)> http;
  std::function<void(v1::TextGenerateRequest&)> gateway_grpc;
  std::function<void(v1::GenerateRequest&)> scheduler;
  const char* param;    // the HTTP error's `param`
  std::string message;  // in the error of every surface
  bool chat = false;    // HTTP: /v1/chat/completions instead of /v1/completions
  // The message goes on with the compiler's own words (core/structured): what follows
  // `message` must then be the same at every surface too.
  bool same_tail = false;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Setters applied to the sampling message of both gRPC requests.
template <typename Set>
Case Sampling(const char* name, std::function<void(json&)> http, Set set, const char* param, std::string message) {
  return Case{name,
              std::move(http),
              [set](v1::TextGenerateRequest& r) { set(r.mutable_sampling()); },
              [set](v1::GenerateRequest& r) { set(r.mutable_sampling()); },
              param,
              std::move(message)};
}

template <typename Set>
Case Structured(const char* name, std::function<void(json&)> http, Set set, const char* param, std::string message) {
  return Sampling(
      name, std::move(http), [set](v1::SamplingParams* s) { set(s->mutable_structured()); }, param, std::move(message));
}

const std::string kDeepSchema = Nested(R"({"type":"array","items":)", R"({"type":"integer"})", "}", 200);
const std::string kDeepRegex = Nested("(", "a", ")", 200);
const std::string kLongRegex(70000, 'a');
const std::string kLongStop(5000, 's');

std::vector<Case> Cases() {
  std::vector<Case> c;
  c.push_back(Sampling(
      "TemperatureAboveTwo", [](json& b) { b["temperature"] = 3; },
      [](v1::SamplingParams* s) { s->set_temperature(3); }, "temperature", "'temperature' must be in [0, 2], got 3"));
  c.push_back(Sampling(
      "TemperatureNegative", [](json& b) { b["temperature"] = -0.5; },
      [](v1::SamplingParams* s) { s->set_temperature(-0.5f); }, "temperature",
      "'temperature' must be in [0, 2], got -0.5"));
  c.push_back(Sampling(
      "TopPAboveOne", [](json& b) { b["top_p"] = 1.5; }, [](v1::SamplingParams* s) { s->set_top_p(1.5f); }, "top_p",
      "'top_p' must be in (0, 1], got 1.5"));
  c.push_back(Sampling(
      "TopPNegative", [](json& b) { b["top_p"] = -0.5; }, [](v1::SamplingParams* s) { s->set_top_p(-0.5f); }, "top_p",
      "'top_p' must be in (0, 1], got -0.5"));
  c.push_back(Sampling(
      "TopKBelowMinusOne", [](json& b) { b["top_k"] = -2; }, [](v1::SamplingParams* s) { s->set_top_k(-2); }, "top_k",
      "'top_k' must be at least -1, got -2"));
  c.push_back(Sampling(
      "MinPAboveOne", [](json& b) { b["min_p"] = 1.5; }, [](v1::SamplingParams* s) { s->set_min_p(1.5f); }, "min_p",
      "'min_p' must be in [0, 1], got 1.5"));
  c.push_back(Sampling(
      "PresencePenaltyBelowMinusTwo", [](json& b) { b["presence_penalty"] = -3; },
      [](v1::SamplingParams* s) { s->set_presence_penalty(-3); }, "presence_penalty",
      "'presence_penalty' must be in [-2, 2], got -3"));
  c.push_back(Sampling(
      "FrequencyPenaltyAboveTwo", [](json& b) { b["frequency_penalty"] = 2.5; },
      [](v1::SamplingParams* s) { s->set_frequency_penalty(2.5f); }, "frequency_penalty",
      "'frequency_penalty' must be in [-2, 2], got 2.5"));
  c.push_back(Sampling(
      "RepetitionPenaltyAboveTen", [](json& b) { b["repetition_penalty"] = 11; },
      [](v1::SamplingParams* s) { s->set_repetition_penalty(11); }, "repetition_penalty",
      "'repetition_penalty' must be in (0, 10], got 11"));
  c.push_back(Sampling(
      "RepetitionPenaltyNegative", [](json& b) { b["repetition_penalty"] = -1; },
      [](v1::SamplingParams* s) { s->set_repetition_penalty(-1); }, "repetition_penalty",
      "'repetition_penalty' must be in (0, 10], got -1"));
  Case top_logprobs = Sampling(
      "TopLogprobsAboveTwenty",
      [](json& b) {
        b["logprobs"] = true;
        b["top_logprobs"] = 21;
      },
      [](v1::SamplingParams* s) { s->set_top_logprobs(21); }, "top_logprobs",
      "'top_logprobs' must be at most 20, got 21");
  top_logprobs.chat = true;
  c.push_back(top_logprobs);
  c.push_back(Sampling(
      "LogitBiasAboveHundred",
      [](json& b) {
        b["logit_bias"] = {{"65", 101}};
      },
      [](v1::SamplingParams* s) { (*s->mutable_logit_bias())[65] = 101; }, "logit_bias",
      "'logit_bias[\"65\"]' must be in [-100, 100], got 101"));
  c.push_back(Sampling(
      "LogitBiasTooManyEntries",
      [](json& b) {
        for (int i = 0; i < 301; ++i) b["logit_bias"][std::to_string(i)] = 1;
      },
      [](v1::SamplingParams* s) {
        for (int i = 0; i < 301; ++i) (*s->mutable_logit_bias())[i] = 1;
      },
      "logit_bias", "'logit_bias' may hold at most 300 entries, got 301"));
  c.push_back(Sampling(
      "LogitBiasTokenOutsideTheVocabulary",
      [](json& b) {
        b["logit_bias"] = {{"300", 1}};
      },
      [](v1::SamplingParams* s) { (*s->mutable_logit_bias())[300] = 1; }, "logit_bias",
      "'logit_bias' key '300' is not a token id of this model: the vocabulary is [0, 257)"));
  c.push_back(Case{"StopTokenIdsTooMany",
                   [](json& b) {
                     for (int i = 0; i < 65; ++i) b["stop_token_ids"].push_back(i);
                   },
                   [](v1::TextGenerateRequest& r) {
                     for (int i = 0; i < 65; ++i) r.add_stop_token_ids(i);
                   },
                   [](v1::GenerateRequest& r) {
                     for (int i = 0; i < 65; ++i) r.add_stop_token_ids(i);
                   },
                   "stop_token_ids", "'stop_token_ids' may hold at most 64 entries, got 65"});
  c.push_back(Case{"StopTokenIdOutsideTheVocabulary",
                   [](json& b) {
                     b["stop_token_ids"] = {7, 300};
                   },
                   [](v1::TextGenerateRequest& r) {
                     r.add_stop_token_ids(7);
                     r.add_stop_token_ids(300);
                   },
                   [](v1::GenerateRequest& r) {
                     r.add_stop_token_ids(7);
                     r.add_stop_token_ids(300);
                   },
                   "stop_token_ids", "Token id 300 at 'stop_token_ids[1]' is outside the vocabulary [0, 257)"});
  c.push_back(Case{"MaxTokensNegative", [](json& b) { b["max_tokens"] = -5; },
                   [](v1::TextGenerateRequest& r) { r.set_max_new_tokens(-5); },
                   [](v1::GenerateRequest& r) { r.set_max_new_tokens(-5); }, "max_tokens",
                   "'max_tokens' must be at least 1, got -5"});
  c.push_back(Case{"MinTokensAboveMaxTokens",
                   [](json& b) {
                     b["max_tokens"] = 2;
                     b["min_tokens"] = 3;
                   },
                   nullptr,
                   [](v1::GenerateRequest& r) {
                     r.set_max_new_tokens(2);
                     r.set_min_new_tokens(3);
                   },
                   "min_tokens", "'min_tokens' (3) must not exceed 'max_tokens' (2)"});
  c.push_back(Case{"PriorityAboveAMillion", [](json& b) { b["priority"] = 1000001; },
                   [](v1::TextGenerateRequest& r) { r.set_priority(1000001); },
                   [](v1::GenerateRequest& r) { r.set_priority(1000001); }, "priority",
                   "'priority' must be at most 1000000, got 1000001"});
  c.push_back(Case{"NAbove128", [](json& b) { b["n"] = 129; }, [](v1::TextGenerateRequest& r) { r.set_n(129); },
                   nullptr, "n", "'n' must be at most 128, got 129"});
  c.push_back(Case{"StopStringTooLong", [](json& b) { b["stop"] = {kLongStop}; },
                   [](v1::TextGenerateRequest& r) { r.add_stop(kLongStop); }, nullptr, "stop",
                   "'stop[0]' must be at most 4096 bytes long, got 5000"});
  // Structured-output constraints: the table's count, then the compiler's limits
  // (core/structured/limits.h), which every surface runs before admitting a request.
  c.push_back(Structured(
      "TooManyChoices",
      [](json& b) {
        for (int i = 0; i < 1025; ++i) b["guided_choice"].push_back(std::to_string(i));
      },
      [](v1::StructuredOutput* s) {
        s->set_kind(Kind::KIND_CHOICE);
        for (int i = 0; i < 1025; ++i) s->add_choices(std::to_string(i));
      },
      "guided_choice", "'guided_choice' may hold at most 1024 choices, got 1025"));
  c.push_back(Structured(
      "SchemaThatDoesNotCompile", [](json& b) { b["guided_json"] = R"({"type":"number","multipleOf":3})"; },
      [](v1::StructuredOutput* s) {
        s->set_kind(Kind::KIND_JSON_SCHEMA);
        s->set_schema(R"({"type":"number","multipleOf":3})");
      },
      "guided_json", "cannot be enforced: unsupported JSON Schema keyword 'multipleOf'"));
  c.push_back(Structured(
      "SchemaNestedTooDeep", [](json& b) { b["guided_json"] = kDeepSchema; },
      [](v1::StructuredOutput* s) {
        s->set_kind(Kind::KIND_JSON_SCHEMA);
        s->set_schema(kDeepSchema);
      },
      "guided_json", "nesting deeper than 128 levels"));
  c.back().same_tail = true;
  c.push_back(Structured(
      "RegexTooLong", [](json& b) { b["guided_regex"] = kLongRegex; },
      [](v1::StructuredOutput* s) {
        s->set_kind(Kind::KIND_REGEX);
        s->set_regex(kLongRegex);
      },
      "guided_regex", "cannot be enforced: "));
  c.back().same_tail = true;
  c.push_back(Structured(
      "RegexNestedTooDeep", [](json& b) { b["guided_regex"] = kDeepRegex; },
      [](v1::StructuredOutput* s) {
        s->set_kind(Kind::KIND_REGEX);
        s->set_regex(kDeepRegex);
      },
      "guided_regex", "cannot be enforced: "));
  c.back().same_tail = true;
  return c;
}

class ValidationSurfacesTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    gateway_ = new gateway::testing::GatewayFixture();
    // The byte-level model's vocabulary, so that vocabulary errors read the same.
    scheduler_ = new scheduler::testing::InProcessScheduler({.vocab_size = gateway::testing::kByteLevelVocabSize});
  }
  static void TearDownTestSuite() {
    delete scheduler_;
    delete gateway_;
  }
  static gateway::testing::GatewayFixture* gateway_;
  static scheduler::testing::InProcessScheduler* scheduler_;
};
gateway::testing::GatewayFixture* ValidationSurfacesTest::gateway_ = nullptr;
scheduler::testing::InProcessScheduler* ValidationSurfacesTest::scheduler_ = nullptr;

TEST_P(ValidationSurfacesTest, EverySurfaceRefusesTheValueWithTheSameMessage) {
  const Case& c = GetParam();
  std::vector<std::string> messages;  // of the surfaces that carry the field
  const int64_t scheduled_by_gateway = gateway_->scheduler().num_generate_calls();
  const size_t set_up_by_engine = scheduler_->engine().set_up().size();
  if (c.http) {
    json body = c.chat ? json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}}
                       : json{{"prompt", "hi"}, {"max_tokens", 4}};
    c.http(body);
    gateway::testing::HttpResult r =
        gateway_->Client().Request("POST", c.chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    const json error = r.Json()["error"];
    EXPECT_EQ(error.value("param", ""), c.param) << r.body;
    messages.push_back(error.value("message", ""));
    EXPECT_THAT(messages.back(), HasSubstr(c.message)) << "HTTP";
  }
  if (c.gateway_grpc) {
    v1::TextGenerateRequest request;
    request.set_prompt("hi");
    request.set_max_new_tokens(4);
    c.gateway_grpc(request);
    auto stub = v1::Generation::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(gateway_->gateway().grpc_port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = stub->Generate(&context, request);
    v1::TextGenerateResponse response;
    while (reader->Read(&response)) {
    }
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    messages.push_back(status.error_message());
    EXPECT_THAT(messages.back(), HasSubstr(c.message)) << "gateway gRPC";
  }
  if (c.scheduler) {
    v1::GenerateRequest request = scheduler::testing::InProcessScheduler::Request({1, 2, 3}, 4);
    c.scheduler(request);
    const auto result = scheduler_->Generate(request);
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << result.status.error_message();
    messages.push_back(result.status.error_message());
    EXPECT_THAT(messages.back(), HasSubstr(c.message)) << "scheduler gRPC";
  }
  if (c.same_tail) {
    std::vector<std::string> tails;
    for (const std::string& m : messages)
      tails.push_back(m.find(c.message) == std::string::npos ? "" : m.substr(m.find(c.message)));
    for (const std::string& tail : tails) EXPECT_EQ(tail, tails[0]);
    EXPECT_GT(tails[0].size(), std::string(c.message).size()) << tails[0];
  }
  // Refused at the door: nothing reached the scheduler behind the gateway, or the engine.
  EXPECT_EQ(gateway_->scheduler().num_generate_calls(), scheduled_by_gateway);
  EXPECT_EQ(scheduler_->engine().set_up().size(), set_up_by_engine);
}

INSTANTIATE_TEST_SUITE_P(Table, ValidationSurfacesTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The limits are inclusive where the table says so: the edge values are served everywhere.
TEST(ValidationLimitsTest, ValuesAtTheLimitsAreServedEverywhere) {
  gateway::testing::GatewayFixture gateway;
  scheduler::testing::InProcessScheduler scheduler;
  json body = {{"prompt", "hi"},
               {"max_tokens", 2},
               {"temperature", 2},
               {"top_p", 1},
               {"top_k", -1},
               {"min_p", 1},
               {"presence_penalty", -2},
               {"frequency_penalty", 2},
               {"repetition_penalty", 10},
               {"priority", -1000000}};
  gateway::testing::HttpResult r = gateway.Client().Request("POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;

  v1::GenerateRequest request = scheduler::testing::InProcessScheduler::Request({1, 2, 3}, 2);
  v1::SamplingParams* s = request.mutable_sampling();
  s->set_temperature(2);
  s->set_top_p(1);
  s->set_top_k(-1);
  s->set_min_p(1);
  s->set_presence_penalty(-2);
  s->set_frequency_penalty(2);
  s->set_repetition_penalty(10);
  s->set_top_logprobs(20);
  request.set_priority(-1000000);
  const auto result = scheduler.Generate(request);
  EXPECT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.tokens.size(), 2u);
}

}  // namespace
}  // namespace orca
