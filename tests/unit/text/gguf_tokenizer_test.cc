// The vocabulary embedded in ../shared/models/stories260K.gguf (SentencePiece
// "llama" model with scores and byte tokens) against llama2.c/llama.cpp
// references: prompt ids (with BOS) and decoded greedy continuations.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/text/chat_template.h"
#include "core/text/incremental_detokenizer.h"
#include "core/text/tokenizer.h"

namespace orca::text {
namespace {

using nlohmann::json;

class Stories260KTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* shared = std::getenv("ORCA_SHARED_DIR");
    const std::string dir = shared != nullptr ? shared : "../shared";
    gguf_ = dir + "/models/stories260K.gguf";
    if (!std::filesystem::exists(gguf_)) GTEST_SKIP() << gguf_ << " absent";
    std::ifstream in(dir + "/models/stories260K.reference.json");
    std::stringstream ss;
    ss << in.rdbuf();
    reference_ = json::parse(ss.str());
    auto tok = Tokenizer::Load(gguf_);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::move(*tok);
  }
  std::string gguf_;
  json reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(Stories260KTest, EncodesPromptsLikeTheReference) {
  ASSERT_FALSE(reference_["cases"].empty());
  for (const json& c : reference_["cases"]) {
    const std::string prompt = c["prompt"];
    EXPECT_EQ(tokenizer_->Encode(prompt, true), c["prompt_token_ids"].get<std::vector<int32_t>>()) << prompt;
  }
}

TEST_F(Stories260KTest, DecodesPromptPlusGreedyTokensToTheReferenceText) {
  for (const json& c : reference_["cases"]) {
    std::vector<int32_t> ids = c["prompt_token_ids"];
    const auto greedy = c["greedy_token_ids"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), greedy.begin(), greedy.end());
    auto text = tokenizer_->Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c["text"].get<std::string>());
  }
}

TEST_F(Stories260KTest, VocabularyMetadata) {
  EXPECT_EQ(tokenizer_->vocab_size(), 512);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_ids(), std::vector<int32_t>{2});
  EXPECT_EQ(tokenizer_->IdToToken(13), "<0x0A>");
  EXPECT_EQ(tokenizer_->TokenBytes(13), "\n");
  EXPECT_TRUE(tokenizer_->IsSpecial(1));
  EXPECT_FALSE(tokenizer_->IsSpecial(400));
  // Characters outside the 512-token vocabulary fall back to byte tokens.
  std::vector<int32_t> ids = tokenizer_->Encode("é", false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(*tokenizer_->Decode(ids), "é");
  EXPECT_TRUE(absl::IsNotFound(ChatTemplate::FromModel(gguf_).status()));
}

TEST_F(Stories260KTest, StreamingMatchesFullDecodeOnRandomIds) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, tokenizer_->vocab_size() - 1);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(1 + trial % 17);
    for (int32_t& x : ids) x = id(rng);
    for (bool skip : {true, false}) {
      IncrementalDetokenizer detok(*tokenizer_, {}, skip);
      std::string streamed;
      for (int32_t x : ids) streamed += detok.Add(x);
      streamed += detok.Flush();
      EXPECT_EQ(streamed, *tokenizer_->Decode(ids, skip));
    }
  }
}

}  // namespace
}  // namespace orca::text
