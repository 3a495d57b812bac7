// Tokenizer behaviour on small hand-written tokenizer.json files: added-token
// flags, byte fallback, BOS/EOS sources, errors for bad or unsupported input.
#include "core/text/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/text/hf_tokenizer_loader.h"

namespace orca::text {
namespace {

using nlohmann::json;

// A byte-level BPE over a tiny alphabet, with a few added tokens.
json ByteLevelJson() {
  json vocab = json::object();
  const char* printable = "abcdefghijklmnopqrstuvwxyz";
  int id = 0;
  for (const char* p = printable; *p; ++p) vocab[std::string(1, *p)] = id++;
  vocab["\xC4\xA0"] = id++;  // "Ġ" (space)
  vocab["ab"] = id++;
  vocab
      ["\xC4\xA0"
       "ab"] = id++;
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  return {
      {"added_tokens",
       json::array({
           {{"id", 100}, {"content", "<bos>"}, {"special", true}, {"normalized", false}},
           {{"id", 101}, {"content", "<eos>"}, {"special", true}, {"normalized", false}},
           {{"id", 102}, {"content", "<L>"}, {"special", false}, {"lstrip", true}, {"normalized", false}},
           {{"id", 103}, {"content", "<R>"}, {"special", false}, {"rstrip", true}, {"normalized", false}},
           {{"id", 104}, {"content", "word"}, {"special", false}, {"single_word", true}, {"normalized", false}},
       })},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {100}}, {"tokens", {"<bos>"}}}}}}}},
      {"decoder", byte_level},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "\xC4\xA0 ab"})}}},
  };
}

std::unique_ptr<Tokenizer> Load(const json& j, const json& config = json::object(), const json& gen = nullptr) {
  auto t = LoadHfTokenizer(j.dump(), config.dump(), gen.is_null() ? "" : gen.dump());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(TokenizerTest, BpeMergesAndPostProcessorBos) {
  auto t = Load(ByteLevelJson());
  EXPECT_EQ(t->Encode("ab ab", true), (std::vector<int32_t>{100, 27, 28}));
  EXPECT_EQ(t->Encode("ab ab", false), (std::vector<int32_t>{27, 28}));
  EXPECT_EQ(t->bos_id(), 100);
  EXPECT_EQ(*t->Decode({100, 27, 28}, false), "<bos>ab ab");
  EXPECT_EQ(*t->Decode({100, 27, 28}, true), "ab ab");
  EXPECT_EQ(t->IdToToken(28),
            "\xC4\xA0"
            "ab");
  EXPECT_EQ(t->TokenBytes(28), " ab");
}

TEST(TokenizerTest, AddedTokenFlags) {
  auto t = Load(ByteLevelJson());
  // lstrip eats the spaces before <L>; rstrip the spaces after <R>.
  EXPECT_EQ(t->Encode("a   <L>b", false), (std::vector<int32_t>{0, 102, 1}));
  EXPECT_EQ(t->Encode("a<R>   b", false), (std::vector<int32_t>{0, 103, 1}));
  // single_word: only matched when not inside a word.
  EXPECT_EQ(t->Encode("word", false), (std::vector<int32_t>{104}));
  EXPECT_EQ(t->Encode("swords", false).size(), 6u);
  EXPECT_FALSE(t->IsSpecial(104));
  EXPECT_TRUE(t->IsSpecial(101));
}

TEST(TokenizerTest, ConfigAndGenerationConfigDriveBosEos) {
  json config = {{"bos_token", "<bos>"}, {"eos_token", {{"content", "<eos>"}}}, {"add_bos_token", false}};
  auto t = Load(ByteLevelJson(), config, json{{"eos_token_id", json::array({101, 103})}});
  EXPECT_EQ(t->Encode("ab", true), (std::vector<int32_t>{27}));  // add_bos_token false wins
  EXPECT_EQ(t->eos_ids(), (std::vector<int32_t>{101, 103}));
  EXPECT_EQ(t->eos_token(), "<eos>");
  EXPECT_EQ(t->bos_token(), "<bos>");
  config["add_eos_token"] = true;
  auto t2 = Load(ByteLevelJson(), config);
  EXPECT_EQ(t2->Encode("ab", true), (std::vector<int32_t>{27, 101}));
}

TEST(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto t = Load(ByteLevelJson());
  auto r = t->Decode({0, 99999});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("99999 at position 1"), std::string::npos) << r.status();
  EXPECT_FALSE(t->Decode({50}).ok());  // a hole between the model vocab and the added tokens
  EXPECT_FALSE(t->Decode({-1}).ok());
}

TEST(TokenizerTest, InvalidUtf8InputIsSanitizedNotFatal) {
  auto t = Load(ByteLevelJson());
  std::vector<int32_t> ids = t->Encode(
      "a\xFF"
      "b",
      false);
  EXPECT_FALSE(ids.empty());
}

TEST(TokenizerTest, SentencePieceStyleByteFallback) {
  json vocab = {{"<unk>", 0},
                {"<s>", 1},
                {"</s>", 2},
                {"\xE2\x96\x81", 3},
                {"a", 4},
                {"\xE2\x96\x81"
                 "a",
                 5}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 6 + b;
  }
  json j = {
      {"added_tokens", json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}}})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array({{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"byte_fallback", true},
        {"unk_token", "<unk>"},
        {"vocab", vocab},
        {"merges", json::array({"\xE2\x96\x81 a"})}}},
  };
  auto t = Load(j, {{"bos_token", "<s>"}, {"add_bos_token", true}});
  // "a é" -> ▁a ▁ <0xC3> <0xA9>
  EXPECT_EQ(t->Encode("a é", true), (std::vector<int32_t>{1, 5, 3, 6 + 0xC3, 6 + 0xA9}));
  EXPECT_EQ(*t->Decode(t->Encode("a é", true)), "a é");
  EXPECT_EQ(t->decode_rules().strip_leading, 1);
}

TEST(TokenizerTest, UnsupportedComponentsAreNamed) {
  json j = ByteLevelJson();
  j["model"]["type"] = "WordPiece";
  auto r = LoadHfTokenizer(j.dump(), "", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("WordPiece"), std::string::npos);
  j = ByteLevelJson();
  j["normalizer"] = {{"type", "BertNormalizer"}};
  r = LoadHfTokenizer(j.dump(), "", "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("BertNormalizer"), std::string::npos);
  j = ByteLevelJson();
  j["decoder"] = {{"type", "CTC"}};
  EXPECT_NE(std::string(LoadHfTokenizer(j.dump(), "", "").status().message()).find("CTC"), std::string::npos);
  j = ByteLevelJson();
  j["model"]["merges"] = json::array({"a zz"});
  EXPECT_NE(std::string(LoadHfTokenizer(j.dump(), "", "").status().message()).find("merges[0]"), std::string::npos);
  EXPECT_FALSE(LoadHfTokenizer("{not json", "", "").ok());
  EXPECT_FALSE(LoadHfTokenizer("{\"model\": {\"vocab\": 3}}", "", "").ok());
  EXPECT_TRUE(absl::IsNotFound(Tokenizer::Load("/nonexistent/model").status()));
}

// Found by the tokenizer.json fuzzer: a float id (1.1e26) was converted to int (undefined).
TEST(TokenizerTest, AddedTokenIdsMustBeIntegerIds) {
  for (const json& id : {json(1.1e26), json(3.5), json("7"), json(-1), json(int64_t{1} << 40)}) {
    json j = ByteLevelJson();
    j["added_tokens"][0]["id"] = id;
    auto r = LoadHfTokenizer(j.dump(), "", "");
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_NE(std::string(r.status().message()).find("added_tokens[].id must be a token id"), std::string::npos)
        << r.status();
  }
}

TEST(TokenizerTest, CleanUpTokenizationSpaces) {
  EXPECT_EQ(Tokenizer::CleanUpTokenizationSpaces("Hello , world . I do n't know ' s it 's"),
            "Hello, world. I don't know's it's");
}

}  // namespace
}  // namespace orca::text
