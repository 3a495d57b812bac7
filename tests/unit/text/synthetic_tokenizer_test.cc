#include "core/text/synthetic_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/text/chat_template.h"
#include "core/text/hf_tokenizer_loader.h"
#include "core/text/incremental_detokenizer.h"
#include "core/text/tokenizer.h"

namespace orca::text {
namespace {

std::unique_ptr<Tokenizer> Build(int32_t vocab_size, SyntheticTokenizerFiles* files_out = nullptr) {
  auto files = MakeSyntheticByteLevelTokenizer(vocab_size);
  EXPECT_TRUE(files.ok()) << files.status();
  auto t = LoadHfTokenizer(files->tokenizer_json, files->tokenizer_config_json, files->generation_config_json);
  EXPECT_TRUE(t.ok()) << t.status();
  if (files_out != nullptr) *files_out = *files;
  return std::move(*t);
}

class SyntheticTokenizerTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(SyntheticTokenizerTest, LayoutAndSpecialTokens) {
  const int32_t v = GetParam();
  auto t = Build(v);
  EXPECT_EQ(t->vocab_size(), v);
  EXPECT_EQ(t->TokenToId("<|endoftext|>"), v - 3);
  EXPECT_EQ(t->TokenToId("<|im_start|>"), v - 2);
  EXPECT_EQ(t->TokenToId("<|im_end|>"), v - 1);
  EXPECT_EQ(t->bos_id(), v - 3);
  EXPECT_EQ(t->eos_ids(), (std::vector<int32_t>{v - 1, v - 3}));
  EXPECT_TRUE(t->IsSpecial(v - 1));
  EXPECT_FALSE(t->IsSpecial(v - 4));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(t->TokenBytes(b), std::string(1, static_cast<char>(b)));
  // No BOS is added; special tokens written in text are recognised.
  EXPECT_EQ(t->Encode("<|im_start|>user", true).front(), v - 2);
}

TEST_P(SyntheticTokenizerTest, RoundTripsText) {
  auto t = Build(GetParam());
  for (const std::string text :
       {"Hello, world!", "def f(x):\n    return x * 2\n", "  spaces  and\ttabs\n\n",
        "Привет мир, 你好, émoji 👍🏽", "<|im_start|>user\nhi<|im_end|>\n", "a", ""}) {
    std::vector<int32_t> ids = t->Encode(text, true);
    EXPECT_EQ(*t->Decode(ids, false), text);
    IncrementalDetokenizer detok(*t, {}, false);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Add(id);
    EXPECT_EQ(streamed + detok.Flush(), text);
  }
}

TEST_P(SyntheticTokenizerTest, IsDeterministic) {
  auto a = MakeSyntheticByteLevelTokenizer(GetParam());
  auto b = MakeSyntheticByteLevelTokenizer(GetParam());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokenizer_json, b->tokenizer_json);
  EXPECT_EQ(a->tokenizer_config_json, b->tokenizer_config_json);
}

INSTANTIATE_TEST_SUITE_P(VocabSizes, SyntheticTokenizerTest, ::testing::Values(259, 300, 1000, 50000));

TEST(SyntheticTokenizer, LearnedMergesCompressEnglish) {
  auto t = Build(1000);
  const std::string text = "The scheduler picks the requests for the next iteration.";
  EXPECT_LT(t->Encode(text, false).size(), text.size() / 2);
}

// `orca model synth` writes this config: the gateway finds the built-in ChatML in it (ChatTemplate::FromModel),
// so a synthesized model, the default one included, chats without --chat-template (the gateway guesses no
// template for a model that ships none).
TEST(SyntheticTokenizer, ConfigCarriesAChatMLTemplate) {
  SyntheticTokenizerFiles files;
  Build(300, &files);
  auto chatml = ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(chatml.ok());
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "synthetic-chat-template";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << files.tokenizer_config_json;
  auto from_model = ChatTemplate::FromModel(dir.string());
  ASSERT_TRUE(from_model.ok()) << from_model.status();
  EXPECT_EQ((*from_model)->source(), (*chatml)->source());
  ChatTemplateInputs inputs;
  inputs.messages.push_back({.role = "user", .content = "Hi"});
  auto rendered = (*from_model)->Render(inputs);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(SyntheticTokenizer, RejectsBadVocabSizes) {
  EXPECT_EQ(MakeSyntheticByteLevelTokenizer(258).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeSyntheticByteLevelTokenizer(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace orca::text

namespace orca::text {
namespace {

// Issue 11: an end-of-sequence id the tokenizer does not have would never end
// a generation; loading says so, naming the file, instead of dropping it.
TEST(SyntheticTokenizer, OutOfVocabularyEosInGenerationConfigIsRejected) {
  auto files = MakeSyntheticByteLevelTokenizer(300);
  ASSERT_TRUE(files.ok());
  const std::string dir = ::testing::TempDir() + "/oov-eos-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir + "/" + name) << text; };
  write("tokenizer.json", files->tokenizer_json);
  write("tokenizer_config.json", files->tokenizer_config_json);
  write("generation_config.json", files->generation_config_json);
  ASSERT_TRUE(Tokenizer::Load(dir).ok());
  write("generation_config.json", "{\"eos_token_id\": [299, 300]}");
  auto t = Tokenizer::Load(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(
                "generation_config.json: eos_token_id 300 is outside the tokenizer's vocabulary of 300 tokens"),
            std::string::npos)
      << t.status();
}

}  // namespace
}  // namespace orca::text
