// The vocabulary embedded in ../shared/models/stories260K.gguf (SentencePiece
// "llama" model with scores and byte tokens) against llama2.c/llama.cpp
// references: prompt ids (with BOS) and decoded greedy continuations.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

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

// ---- Vocabularies written into GGUF files by the test ------------------------

// Minimal GGUF v3 writer (metadata only, no tensors).
class GgufWriter {
 public:
  void String(const std::string& key, const std::string& v) {
    Key(key, 8);
    Str(v);
    ++count_;
  }
  void U32(const std::string& key, uint32_t v) {
    Key(key, 4);
    Pod(v);
    ++count_;
  }
  void Bool(const std::string& key, bool v) {
    Key(key, 7);
    Pod(static_cast<uint8_t>(v));
    ++count_;
  }
  void Strings(const std::string& key, const std::vector<std::string>& v) {
    Key(key, 9);
    Pod(uint32_t{8});
    Pod(static_cast<uint64_t>(v.size()));
    for (const auto& s : v) Str(s);
    ++count_;
  }
  void Floats(const std::string& key, const std::vector<float>& v) {
    Key(key, 9);
    Pod(uint32_t{6});
    Pod(static_cast<uint64_t>(v.size()));
    for (float f : v) Pod(f);
    ++count_;
  }
  void Ints(const std::string& key, const std::vector<int32_t>& v) {
    Key(key, 9);
    Pod(uint32_t{5});
    Pod(static_cast<uint64_t>(v.size()));
    for (int32_t x : v) Pod(x);
    ++count_;
  }
  void Write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    out.write("GGUF", 4);
    uint32_t version = 3;
    uint64_t tensors = 0;
    out.write(reinterpret_cast<const char*>(&version), 4);
    out.write(reinterpret_cast<const char*>(&tensors), 8);
    out.write(reinterpret_cast<const char*>(&count_), 8);
    out << body_;
    out << std::string((32 - (24 + body_.size()) % 32) % 32, '\0');
  }

 private:
  template <typename T>
  void Pod(T v) {
    body_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void Str(const std::string& s) {
    Pod(static_cast<uint64_t>(s.size()));
    body_ += s;
  }
  void Key(const std::string& k, uint32_t type) {
    Str(k);
    Pod(type);
  }
  std::string body_;
  uint64_t count_ = 0;
};

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".gguf")).string();
}

TEST(GgufVocabularyTest, Gpt2VocabularyMatchesTheSameTokenizerJson) {
  const char* shared = std::getenv("ORCA_SHARED_DIR");
  const std::string dir = std::string(shared != nullptr ? shared : "../shared") + "/models/tiny-gpt2";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " absent";
  std::ifstream in(dir + "/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  json tj = json::parse(ss.str());
  std::vector<std::string> tokens(50257);
  std::vector<int32_t> types(50257, 1);
  for (const auto& [tok, id] : tj["model"]["vocab"].items()) tokens[id.get<int>()] = tok;
  types[50256] = 3;  // control
  std::vector<std::string> merges;
  for (const json& m : tj["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  GgufWriter w;
  w.String("general.architecture", "gpt2");
  w.String("tokenizer.ggml.model", "gpt2");
  w.String("tokenizer.ggml.pre", "gpt2");
  w.Strings("tokenizer.ggml.tokens", tokens);
  w.Ints("tokenizer.ggml.token_type", types);
  w.Strings("tokenizer.ggml.merges", merges);
  w.U32("tokenizer.ggml.bos_token_id", 50256);
  w.U32("tokenizer.ggml.eos_token_id", 50256);
  const std::string path = TempPath("orca_gpt2_vocab");
  w.Write(path);
  auto from_gguf = Tokenizer::Load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  auto from_json = Tokenizer::Load(dir);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  const char* src = std::getenv("ORCA_SOURCE_DIR");
  std::ifstream corpus_in(std::string(src != nullptr ? src : ".") + "/tests/text_parity/corpus.json");
  ASSERT_TRUE(corpus_in.good());
  json corpus = json::parse(corpus_in);
  for (const json& text : corpus) {
    const auto ids = (*from_json)->Encode(text.get<std::string>(), false);
    EXPECT_EQ((*from_gguf)->Encode(text.get<std::string>(), false), ids) << text;
    EXPECT_EQ(*(*from_gguf)->Decode(ids, false), *(*from_json)->Decode(ids, false));
  }
  EXPECT_EQ((*from_gguf)->Encode("hi", true).size(), 1u);  // gpt2 vocabularies add no BOS by default
  EXPECT_EQ((*from_gguf)->eos_ids(), std::vector<int32_t>{50256});
}

// A SentencePiece vocabulary's first 259 tokens: <unk>, <s>, </s> and the 256 byte tokens, with their types.
void SentencePieceBase(std::vector<std::string>* tokens, std::vector<int32_t>* types) {
  *tokens = {"<unk>", "<s>", "</s>"};
  *types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens->push_back(name);
    types->push_back(6);
  }
}

// SentencePiece merging follows vocabulary scores, not merge ranks.
TEST(GgufVocabularyTest, SentencePieceMergesByScore) {
  auto build = [](float score_a_b, float score_sp_a) {
    std::vector<std::string> tokens;
    std::vector<int32_t> types;
    SentencePieceBase(&tokens, &types);
    std::vector<std::string> pieces = {"\u2581", "a", "b", "ab", "\u2581a"};
    std::vector<float> scores(tokens.size(), 0.0f);
    for (const auto& p : pieces) {
      tokens.push_back(p);
      types.push_back(1);
    }
    scores.insert(scores.end(), {-1.0f, -2.0f, -2.0f, score_a_b, score_sp_a});
    GgufWriter w;
    w.String("tokenizer.ggml.model", "llama");
    w.Strings("tokenizer.ggml.tokens", tokens);
    w.Floats("tokenizer.ggml.scores", scores);
    w.Ints("tokenizer.ggml.token_type", types);
    w.U32("tokenizer.ggml.bos_token_id", 1);
    w.U32("tokenizer.ggml.eos_token_id", 2);
    w.U32("tokenizer.ggml.unknown_token_id", 0);
    const std::string path = TempPath("orca_spm_vocab");
    w.Write(path);
    auto t = Tokenizer::Load(path);
    std::filesystem::remove(path);
    EXPECT_TRUE(t.ok()) << t.status();
    return std::move(*t);
  };
  const int32_t kSpace = 259, kB = 261, kAB = 262, kSpaceA = 263;
  auto prefer_ab = build(-0.5f, -3.0f);
  EXPECT_EQ(prefer_ab->Encode("ab", true), (std::vector<int32_t>{1, kSpace, kAB}));
  auto prefer_space_a = build(-3.0f, -0.5f);
  EXPECT_EQ(prefer_space_a->Encode("ab", true), (std::vector<int32_t>{1, kSpaceA, kB}));
  // Unknown characters use byte tokens; decoding strips the added leading space.
  std::vector<int32_t> ids = prefer_ab->Encode("a\n", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{kSpaceA, 3 + '\n'}));
  EXPECT_EQ(*prefer_ab->Decode(ids), "a\n");
}

// Generation ends where llama.cpp ends it for a GGUF: the eos id, the eot and eom ids, and any token whose text is an
// end-of-turn marker (a Llama 3.x Instruct file names <|eot_id|> as eos; the model also ends tool turns with
// <|eom_id|>; Qwen2.5 may end with <|endoftext|>).
TEST(GgufVocabularyTest, EndOfTurnTokensEndGenerationAsInLlamaCpp) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  SentencePieceBase(&tokens, &types);
  const int32_t first = static_cast<int32_t>(tokens.size());
  for (const char* t :
       {"<|im_end|>", "a", "<|custom_end|>", "<|eom_id|>", "<|endoftext|>", "<|eot_id|>", "<|im_start|>"}) {
    tokens.push_back(t);
    types.push_back(std::string(t) == "a" ? 1 : 3);
  }
  GgufWriter w;
  w.String("tokenizer.ggml.model", "llama");
  w.Strings("tokenizer.ggml.tokens", tokens);
  w.Floats("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
  w.Ints("tokenizer.ggml.token_type", types);
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", first + 5);  // <|eot_id|>
  w.U32("tokenizer.ggml.eom_token_id", first + 2);  // named by key only
  const std::string path = TempPath("orca_eog_vocab");
  w.Write(path);
  auto t = Tokenizer::Load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(t.ok()) << t.status();
  // eos first; then the key; then the markers in vocabulary order (not "a", not <|im_start|>).
  EXPECT_EQ((*t)->eos_ids(), (std::vector<int32_t>{first + 5, first + 2, first, first + 3, first + 4}));
}

// Issue 11: a BOS id outside the vocabulary used to be dropped silently (no
// BOS added to any prompt); now loading fails, naming the file and the key.
TEST_F(Stories260KTest, OutOfVocabularyBosIsRejectedNamingTheKey) {
  std::ifstream in(gguf_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "tokenizer.ggml.bos_token_id";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  uint32_t type = 0;
  std::memcpy(&type, &bytes[at + key.size()], 4);
  ASSERT_TRUE(type == 4 || type == 5) << "bos id stored as GGUF type " << type;  // (u)int32
  const uint32_t oov = 99999;
  std::memcpy(&bytes[at + key.size() + 4], &oov, 4);
  const std::string path = ::testing::TempDir() + "/oov-bos-" + std::to_string(::getpid()) + ".gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  auto t = Tokenizer::Load(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(path + ": tokenizer.ggml.bos_token_id is 99999, outside the vocabulary of 512"),
            std::string::npos)
      << t.status();
}

}  // namespace
}  // namespace orca::text
