// The scheduler's ConstraintCompiler: a spec is compiled once however often it
// comes (refusals included), a refusal names the field and the compiler's
// reason, and every Compile is answered exactly once, also after Stop.

#include "services/scheduler/constraint_compiler.h"

#include <future>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace orca::scheduler {
namespace {

using ::testing::HasSubstr;
using Kind = StructuredOutputSpec::Kind;

absl::Status CompileAndWait(ConstraintCompiler& compiler, const StructuredOutputSpec& spec) {
  std::promise<absl::Status> done;
  std::future<absl::Status> outcome = done.get_future();
  compiler.Compile(spec, [&done](absl::Status s) { done.set_value(std::move(s)); });
  return outcome.get();
}

std::unique_ptr<ConstraintCompiler> NewCompiler(ConstraintCompiler::Options options = {}) {
  auto compiler = ConstraintCompiler::Create(options);
  EXPECT_TRUE(compiler.ok()) << compiler.status();
  return *std::move(compiler);
}

TEST(ConstraintCompilerTest, EachDistinctSpecIsCompiledOnce) {
  auto compiler = NewCompiler();
  const StructuredOutputSpec schema{Kind::kJsonSchema, R"({"type":"object","properties":{"a":{"type":"integer"}}})"};
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(CompileAndWait(*compiler, schema).ok());
  EXPECT_EQ(compiler->num_compiled(), 1);
  StructuredOutputSpec same_grammar_other_ends = schema;
  same_grammar_other_ends.end_token_ids = {7};  // not part of the grammar
  EXPECT_TRUE(CompileAndWait(*compiler, same_grammar_other_ends).ok());
  EXPECT_EQ(compiler->num_compiled(), 1);
  EXPECT_TRUE(CompileAndWait(*compiler, {Kind::kRegex, "", "[a-z]+"}).ok());
  EXPECT_EQ(compiler->num_compiled(), 2);
}

TEST(ConstraintCompilerTest, ARefusalNamesTheFieldAndIsRememberedToo) {
  auto compiler = NewCompiler();
  const StructuredOutputSpec bad{Kind::kJsonSchema, R"({"type":"number","multipleOf":3})"};
  for (int i = 0; i < 3; ++i) {
    const absl::Status s = CompileAndWait(*compiler, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("'json_schema' cannot be enforced: unsupported JSON Schema keyword 'multipleOf'"));
  }
  EXPECT_EQ(compiler->num_compiled(), 1);
  const absl::Status regex = CompileAndWait(*compiler, {Kind::kRegex, "", "(a"});
  EXPECT_THAT(std::string(regex.message()), HasSubstr("'guided_regex' cannot be enforced: "));
}

TEST(ConstraintCompilerTest, NoConstraintIsAnsweredAtOnceWithoutACompile) {
  auto compiler = NewCompiler();
  bool answered = false;
  compiler->Compile(StructuredOutputSpec{}, [&answered](absl::Status s) {
    EXPECT_TRUE(s.ok());
    answered = true;
  });
  EXPECT_TRUE(answered);  // inline, on this thread
  EXPECT_EQ(compiler->num_compiled(), 0);
}

TEST(ConstraintCompilerTest, EveryCompileIsAnsweredOnceAlsoAcrossStop) {
  auto compiler = NewCompiler({.num_threads = 1, .max_queued = 1000});
  constexpr int kCompiles = 64;
  std::vector<std::promise<absl::Status>> done(kCompiles);
  for (int i = 0; i < kCompiles; ++i) {
    compiler->Compile({Kind::kRegex, "", "[a-z]{1,20}@x" + std::to_string(i)},
                      [&done, i](absl::Status s) { done[i].set_value(std::move(s)); });
  }
  compiler->Stop();  // those still queued are answered Unavailable
  for (int i = 0; i < kCompiles; ++i) {
    const absl::Status s = done[i].get_future().get();
    EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kUnavailable) << s;
  }
  const absl::Status after = CompileAndWait(*compiler, {Kind::kRegex, "", "b+"});
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
}

TEST(ConstraintCompilerTest, OptionsOutOfRangeAreRefused) {
  EXPECT_FALSE(ConstraintCompiler::Create({.num_threads = 0}).ok());
  EXPECT_FALSE(ConstraintCompiler::Create({.cache_capacity = 0}).ok());
}

}  // namespace
}  // namespace orca::scheduler
