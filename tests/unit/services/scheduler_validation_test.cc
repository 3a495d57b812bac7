// The scheduler re-validates whatever its gRPC Generate receives — it may come
// from any client that can reach the port, not only a gateway — and compiles
// structured-output constraints before it admits a request: a constraint that
// is too large, too deep or does not compile is the caller's INVALID_ARGUMENT
// and never reaches the engine (a FakeEngineClient records every request it
// is asked to set up), while valid requests around it are served.

#include <future>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/nested_text.h"
#include "tests/unit/services/in_process_scheduler.h"

namespace orca::scheduler {
namespace {

using orca::testing::Nested;
using ::testing::HasSubstr;
using testing::InProcessScheduler;
using Kind = v1::StructuredOutput;

struct BadConstraint {
  const char* name;
  Kind::Kind kind;
  std::string text;  // the schema or the regex
  std::vector<std::string> choices;
  const char* message;
};
void PrintTo(const BadConstraint& c, std::ostream* os) { *os << c.name; }

class SchedulerConstraintTest : public ::testing::TestWithParam<BadConstraint> {};

TEST_P(SchedulerConstraintTest, IsInvalidArgumentAndNeverReachesTheEngine) {
  const BadConstraint& c = GetParam();
  InProcessScheduler scheduler;
  v1::GenerateRequest request = InProcessScheduler::Request({1, 2, 3}, 8);
  v1::StructuredOutput* s = request.mutable_sampling()->mutable_structured();
  s->set_kind(c.kind);
  if (c.kind == Kind::KIND_REGEX) {
    s->set_regex(c.text);
  } else {
    s->set_schema(c.text);
  }
  for (const std::string& choice : c.choices) s->add_choices(choice);
  // A normal request sent at the same time is served.
  auto normal = std::async(std::launch::async, [&scheduler] {
    return scheduler.Generate(InProcessScheduler::Request({4, 5}, 6));
  });
  const InProcessScheduler::Result bad = scheduler.Generate(request);
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.status.error_message();
  EXPECT_THAT(bad.status.error_message(), HasSubstr(c.message));
  EXPECT_TRUE(bad.tokens.empty());
  const InProcessScheduler::Result ok = normal.get();
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens.size(), 6u);
  const std::vector<SamplingParams> set_up = scheduler.engine().set_up();
  ASSERT_EQ(set_up.size(), 1u);  // the normal request alone
  EXPECT_FALSE(set_up[0].structured.enabled());
}

INSTANTIATE_TEST_SUITE_P(
    Table, SchedulerConstraintTest,
    ::testing::Values(
        BadConstraint{"Schema6000Deep",
                      Kind::KIND_JSON_SCHEMA,
                      Nested(R"({"type":"array","items":)", R"({"type":"integer"})", "}", 6000),
                      {},
                      "nesting deeper than 128 levels at items.items"},
        BadConstraint{
            "SchemaWithAnUnsupportedKeyword",
            Kind::KIND_JSON_SCHEMA,
            R"({"type":"object","properties":{"a":{"type":"number","multipleOf":3}}})",
            {},
            "'json_schema' cannot be enforced: unsupported JSON Schema keyword 'multipleOf' at /properties/a"},
        BadConstraint{"SchemaThatIsNotJson", Kind::KIND_JSON_SCHEMA, "{oops", {}, "'json_schema' cannot be enforced"},
        BadConstraint{"SchemaTooLarge",
                      Kind::KIND_JSON_SCHEMA,
                      R"({"type":"string","description":")" + std::string(1 << 20, 'd') + R"("})",
                      {},
                      "'json_schema' cannot be enforced"},
        BadConstraint{"RegexThatDoesNotParse", Kind::KIND_REGEX, "(unclosed", {}, "'guided_regex' cannot be enforced"},
        BadConstraint{"RegexNested1000Deep",
                      Kind::KIND_REGEX,
                      Nested("(", "a", ")", 1000),
                      {},
                      "'guided_regex' cannot be enforced"},
        BadConstraint{"EmptyRegex", Kind::KIND_REGEX, "", {}, "'guided_regex' cannot be enforced"},
        BadConstraint{"NoChoices", Kind::KIND_CHOICE, "", {}, "'guided_choice' cannot be enforced"},
        BadConstraint{"AnEmptyChoice", Kind::KIND_CHOICE, "", {"yes", ""}, "'guided_choice' cannot be enforced"},
        BadConstraint{"TooManyChoices", Kind::KIND_CHOICE, "", std::vector<std::string>(1025, "c"),
                      "'guided_choice' may hold at most 1024 choices, got 1025"},
        BadConstraint{"ToolCallsWithABadSchema",
                      Kind::KIND_TOOL_CALLS,
                      R"({"type":"number","multipleOf":3})",
                      {},
                      "'tools' cannot be enforced: unsupported JSON Schema keyword 'multipleOf'"}),
    [](const ::testing::TestParamInfo<BadConstraint>& info) { return std::string(info.param.name); });

TEST(SchedulerValidationTest, ValidConstraintsAreCompiledAndRun) {
  InProcessScheduler scheduler;
  for (int i = 0; i < 3; ++i) {  // the same spec again and again: compiled once, then a cache hit
    v1::GenerateRequest request = InProcessScheduler::Request({1, 2, 3}, 4);
    v1::StructuredOutput* s = request.mutable_sampling()->mutable_structured();
    s->set_kind(Kind::KIND_JSON_SCHEMA);
    s->set_schema(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
    const InProcessScheduler::Result r = scheduler.Generate(request);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens.size(), 4u);
  }
  const std::vector<SamplingParams> set_up = scheduler.engine().set_up();
  ASSERT_EQ(set_up.size(), 3u);
  for (const SamplingParams& p : set_up) EXPECT_EQ(p.structured.kind, StructuredOutputSpec::Kind::kJsonSchema);
}

// Token ids the engine cannot have (the scheduler knows the vocabulary from the engine) are refused
// at the door, naming the field, instead of failing on a worker.
TEST(SchedulerValidationTest, TokenIdsOutsideTheVocabularyAreInvalidArgument) {
  InProcessScheduler scheduler;  // vocabulary [0, 100)
  struct Bad {
    std::function<void(v1::GenerateRequest&)> set;
    const char* message;
  };
  const std::vector<Bad> cases = {
      {[](v1::GenerateRequest& r) { r.add_stop_token_ids(150); },
       "Token id 150 at 'stop_token_ids[0]' is outside the vocabulary [0, 100)"},
      {[](v1::GenerateRequest& r) { (*r.mutable_sampling()->mutable_logit_bias())[150] = 1; },
       "'logit_bias' key '150' is not a token id of this model: the vocabulary is [0, 100)"},
      {[](v1::GenerateRequest& r) {
         v1::StructuredOutput* s = r.mutable_sampling()->mutable_structured();
         s->set_kind(Kind::KIND_JSON_OBJECT);
         s->add_end_token_ids(150);
       },
       "Token id 150 at 'stop_token_ids[0]' is outside the vocabulary [0, 100)"},
      {[](v1::GenerateRequest& r) { r.set_prompt_token_ids(1, 150); }, "150"},
  };
  for (const Bad& bad : cases) {
    v1::GenerateRequest request = InProcessScheduler::Request({1, 2, 3}, 4);
    bad.set(request);
    const InProcessScheduler::Result r = scheduler.Generate(request);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.message;
    EXPECT_THAT(r.status.error_message(), HasSubstr(bad.message));
  }
  EXPECT_TRUE(scheduler.engine().set_up().empty());
}

// A client that gives up while its constraint compiles leaves nothing behind: the request is
// never run, and the scheduler goes on serving.
TEST(SchedulerValidationTest, ClientGoneWhileItsConstraintCompilesRunsNothing) {
  InProcessScheduler scheduler;
  for (int i = 0; i < 8; ++i) {
    v1::GenerateRequest request = InProcessScheduler::Request({1, 2, 3}, 200);
    v1::StructuredOutput* s = request.mutable_sampling()->mutable_structured();
    s->set_kind(Kind::KIND_REGEX);
    s->set_regex("[a-z]{1,40}@[a-z]{1,40}\\.(com|org|net)" + std::to_string(i));  // a fresh compile each time
    grpc::ClientContext context;
    auto reader = scheduler.stub().Generate(&context, request);
    context.TryCancel();
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  }
  const InProcessScheduler::Result r = scheduler.Generate(InProcessScheduler::Request({1}, 3));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 3u);
}

}  // namespace
}  // namespace orca::scheduler
