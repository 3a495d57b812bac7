#include "core/common/flags.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <optional>

namespace orca {
namespace {

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args) out.push_back(a.data());
  return out;
}

TEST(FlagSetTest, ParsesTypedFlagsInBothForms) {
  std::string model;
  int64_t max_bs = 8;
  double temp = 1.0;
  bool verbose = false;
  FlagSet flags("t", "test");
  flags.AddString("model", &model, "m");
  flags.AddInt("max-bs", &max_bs, "b");
  flags.AddDouble("temperature", &temp, "t");
  flags.AddBool("verbose", &verbose, "v");
  std::vector<std::string> args = {"prog", "--model", "x.gguf", "--max_bs=32", "--temperature=0.5", "--verbose"};
  auto argv = Argv(args);
  ASSERT_TRUE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  EXPECT_EQ(model, "x.gguf");
  EXPECT_EQ(max_bs, 32);
  EXPECT_DOUBLE_EQ(temp, 0.5);
  EXPECT_TRUE(verbose);
  EXPECT_TRUE(flags.IsSet("max-bs"));
}

// What every main() does with its flags: go on, stop with 0 after the usage for --help, or stop
// with 2 after "<program>: <error>" on stderr.
TEST(FlagSetTest, ParseForMainGivesTheExitCodeAndSaysWhy) {
  auto run = [](std::vector<std::string> args, std::string* out, std::string* err) {
    int64_t n = 0;
    FlagSet flags("prog", "does things");
    flags.AddInt("n", &n, "a number");
    auto argv = Argv(args);
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    std::optional<int> code = flags.ParseForMain(static_cast<int>(argv.size()), argv.data());
    *out = testing::internal::GetCapturedStdout();
    *err = testing::internal::GetCapturedStderr();
    return code;
  };
  std::string out, err;
  EXPECT_EQ(run({"prog", "--n", "3"}, &out, &err), std::nullopt);
  EXPECT_EQ(out + err, "");
  EXPECT_EQ(run({"prog", "--help"}, &out, &err), 0);
  EXPECT_NE(out.find("Usage: prog [flags]"), std::string::npos) << out;
  EXPECT_EQ(err, "");
  EXPECT_EQ(run({"prog", "--m", "3"}, &out, &err), 2);
  EXPECT_EQ(err.rfind("prog: ", 0), 0u) << err;
  EXPECT_NE(err.find("--m"), std::string::npos) << err;
  EXPECT_EQ(out, "");
}

TEST(FlagSetTest, BoolFlagsTakeTrueOrFalseAsTheNextArgumentOrAfterEquals) {
  bool progress = true, ignore_eos = true, logprobs = false, usage = true;
  FlagSet flags("t", "test");
  flags.AddBool("progress", &progress, "p");
  flags.AddBool("ignore-eos", &ignore_eos, "i");
  flags.AddBool("logprobs", &logprobs, "l");
  flags.AddBool("include-usage", &usage, "u");
  std::vector<std::string> args = {"prog",       "--progress", "false",           "--ignore-eos=false",
                                   "--logprobs", "TRUE",       "--include-usage", "False"};
  auto argv = Argv(args);
  absl::Status s = flags.Parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(progress);
  EXPECT_FALSE(ignore_eos);
  EXPECT_TRUE(logprobs);
  EXPECT_FALSE(usage);
  EXPECT_TRUE(flags.positional().empty());
}

TEST(FlagSetTest, BoolFlagLeavesOtherWordsAsPositionalArguments) {
  bool verbose = false;
  int64_t n = 0;
  FlagSet flags("t", "test");
  flags.AddBool("verbose", &verbose, "v");
  flags.AddInt("n", &n, "n");
  std::vector<std::string> args = {"prog", "--verbose", "model.gguf", "--verbose", "--n", "3"};
  auto argv = Argv(args);
  absl::Status s = flags.Parse(static_cast<int>(argv.size()), argv.data(), 1, /*allow_positional=*/true);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(verbose);
  EXPECT_EQ(n, 3);
  ASSERT_EQ(flags.positional().size(), 1u);
  EXPECT_EQ(flags.positional()[0], "model.gguf");
  // Without positionals allowed, a word that is not true/false after a bool flag is still an error.
  FlagSet strict("t", "test");
  strict.AddBool("verbose", &verbose, "v");
  std::vector<std::string> bad = {"prog", "--verbose", "maybe"};
  auto bad_argv = Argv(bad);
  EXPECT_FALSE(strict.Parse(static_cast<int>(bad_argv.size()), bad_argv.data()).ok());
}

TEST(FlagSetTest, RejectsWrongTypesWithTheFlagName) {
  int64_t n = 0;
  FlagSet flags("t", "test");
  flags.AddInt("n-slots", &n, "slots");
  std::vector<std::string> args = {"prog", "--n-slots=lots"};
  auto argv = Argv(args);
  auto status = flags.Parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("--n-slots"), std::string::npos);
  EXPECT_NE(status.message().find("lots"), std::string::npos);
}

// Issue 11: a limit too big for its 32-bit flag is refused with the value as
// given, not wrapped ("max_bs must be >= 1 (got -727379968)" for 1e12).
TEST(FlagSetTest, ThirtyTwoBitFlagsRefuseBigValuesAsGiven) {
  int max_bs = 16;
  FlagSet flags("t", "test");
  flags.AddInt("max-bs", &max_bs, "b");
  std::vector<std::string> args = {"prog", "--max-bs=1000000000000"};
  auto argv = Argv(args);
  absl::Status status = flags.Parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "--max-bs must be at most 2147483647, got 1000000000000");
  EXPECT_EQ(max_bs, 16);
  std::vector<std::string> ok = {"prog", "--max-bs=2147483647"};
  auto ok_argv = Argv(ok);
  ASSERT_TRUE(flags.Parse(static_cast<int>(ok_argv.size()), ok_argv.data()).ok());
  EXPECT_EQ(max_bs, 2147483647);
}

TEST(FlagSetTest, RejectsUnknownFlags) {
  FlagSet flags("t", "test");
  std::vector<std::string> args = {"prog", "--bogus=1"};
  auto argv = Argv(args);
  EXPECT_FALSE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
}

TEST(FlagSetTest, ConfigFileSetsFlagsAndCommandLineWins) {
  std::string path = ::testing::TempDir() + "/flags_test.yaml";
  {
    std::ofstream out(path);
    out << "max_bs: 4\nn_slots: 1024\n";
  }
  int64_t max_bs = 1, n_slots = 1;
  FlagSet flags("t", "test");
  flags.AddInt("max-bs", &max_bs, "b");
  flags.AddInt("n-slots", &n_slots, "s");
  flags.EnableConfigFile();
  std::vector<std::string> args = {"prog", "--config", path, "--max-bs=16"};
  auto argv = Argv(args);
  ASSERT_TRUE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  EXPECT_EQ(max_bs, 16);
  EXPECT_EQ(n_slots, 1024);
  std::remove(path.c_str());
}

TEST(FlagSetTest, EnvironmentFillsUnsetFlagsOnly) {
  int64_t stage = 0, stages = 1;
  FlagSet flags("t", "test");
  flags.AddInt("stage", &stage, "s");
  flags.AddInt("num-stages", &stages, "n");
  flags.EnableEnvironment("ORCA_TEST_");
  setenv("ORCA_TEST_STAGE", "3", 1);
  setenv("ORCA_TEST_NUM_STAGES", "4", 1);
  std::vector<std::string> args = {"prog", "--num-stages=8"};
  auto argv = Argv(args);
  ASSERT_TRUE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  EXPECT_EQ(stage, 3);
  EXPECT_EQ(stages, 8);  // the command line wins
  setenv("ORCA_TEST_STAGE", "three", 1);
  FlagSet bad("t", "test");
  bad.AddInt("stage", &stage, "s");
  bad.EnableEnvironment("ORCA_TEST_");
  std::vector<std::string> none = {"prog"};
  auto argv2 = Argv(none);
  absl::Status s = bad.Parse(static_cast<int>(argv2.size()), argv2.data());
  EXPECT_NE(s.message().find("ORCA_TEST_STAGE"), std::string::npos) << s;
  unsetenv("ORCA_TEST_STAGE");
  unsetenv("ORCA_TEST_NUM_STAGES");
}

TEST(FlagSetTest, HelpListsFlags) {
  int64_t n = 3;
  FlagSet flags("prog", "does things");
  flags.AddInt("n", &n, "how many");
  std::vector<std::string> args = {"prog", "--help"};
  auto argv = Argv(args);
  ASSERT_TRUE(flags.Parse(static_cast<int>(argv.size()), argv.data()).ok());
  EXPECT_TRUE(flags.help_requested());
  EXPECT_NE(flags.Usage().find("--n <int>"), std::string::npos);
  EXPECT_NE(flags.Usage().find("default: 3"), std::string::npos);
}

TEST(ParsePositiveNumberListTest, ParsesAndNamesTheFlagAndItemItRejects) {
  absl::StatusOr<std::vector<double>> rates = ParsePositiveNumberList("0.5, 1,2", "rates");
  ASSERT_TRUE(rates.ok()) << rates.status();
  EXPECT_EQ(*rates, (std::vector<double>{0.5, 1, 2}));
  absl::StatusOr<std::vector<double>> bad = ParsePositiveNumberList("1,0", "rates");
  EXPECT_EQ(bad.status().message(), "--rates: '0' is not a positive number");
  EXPECT_EQ(ParsePositiveNumberList("1,x", "rates").status().message(), "--rates: 'x' is not a positive number");
  EXPECT_EQ(ParsePositiveNumberList("", "targets").status().message(), "--targets is empty");
}

}  // namespace
}  // namespace orca
