// Builds a PipelineTokenizer from the vocabulary embedded in a GGUF file, as
// llama.cpp does: "llama" = SentencePiece merging by score with <0xNN> byte
// fallback; "gpt2" = byte-level BPE with tokenizer.ggml.merges.

#include <algorithm>
#include <cctype>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/common/status_macros.h"
#include "core/formats/gguf_file.h"
#include "core/text/components.h"
#include "core/text/hf_tokenizer_loader.h"
#include "core/text/pipeline_tokenizer.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace {

// llama.cpp token types.
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A special-token id: nullopt when the key is absent; an error naming the file
// and the key when it is outside the vocabulary (it would never be emitted or
// recognised, and Encode would index past the token table).
absl::StatusOr<std::optional<int32_t>> OptionalId(const formats::GgufFile& f, const std::string& key, size_t n) {
  absl::StatusOr<int64_t> v = f.GetInt(key);
  if (!v.ok()) return std::nullopt;
  if (*v < 0 || static_cast<uint64_t>(*v) >= n)
    return absl::InvalidArgumentError(absl::StrCat(f.Describe(), ": ", key, " is ", *v, ", outside the vocabulary of ",
                                                   n, " tokens (tokenizer.ggml.tokens)"));
  return static_cast<int32_t>(*v);
}

absl::StatusOr<std::string_view> PrePattern(const formats::GgufFile& f) {
  absl::StatusOr<std::string> pre = f.GetString("tokenizer.ggml.pre");
  const std::string name = pre.ok() ? *pre : "default";
  if (name == "default" || name == "gpt2" || name == "gpt-2") return kGpt2Pattern;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "smaug-bpe") return kLlama3Pattern;
  if (name == "qwen2" || name == "qwen35") return kQwen2Pattern;
  // The tokenizer.json regexes themselves (llama.cpp's own engine runs an ASCII approximation of them).
  if (name == "gpt-4o") return kGpt4oPattern;
  if (name == "tekken") return kTekkenPattern;
  return absl::UnimplementedError(
      absl::StrCat("unsupported GGUF tokenizer.ggml.pre '", name,
                   "' (supported: default, gpt2, llama-bpe, llama3, qwen2, gpt-4o, tekken)"));
}

// Added tokens, specials and decode pieces, per llama.cpp token type.
void FillTokenTables(const std::vector<std::string>& tokens, const std::vector<int64_t>& types, bool is_spm,
                     TokenizerSpec* out) {
  TokenizerSpec& spec = *out;
  const size_t n = tokens.size();
  for (size_t id = 0; id < n; ++id) {
    const int64_t type = types[id];
    const std::string& tok = tokens[id];
    if (type == kControl || type == kUnknown || type == kUserDefined) {
      AddedToken a;
      a.content = tok;
      a.id = static_cast<int32_t>(id);
      a.special = type != kUserDefined;
      spec.special[id] = a.special;
      if (!tok.empty()) spec.added_tokens.push_back(std::move(a));
      spec.pieces[id] = tok;
    } else if (is_spm) {
      if (type == kByte && tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(tok[3])) && std::isxdigit(static_cast<unsigned char>(tok[4]))) {
        spec.pieces[id] = std::string(1, static_cast<char>(std::stoi(tok.substr(3, 2), nullptr, 16)));
      } else {
        spec.pieces[id] = absl::StrReplaceAll(tok, {{"\u2581", " "}});
      }
    } else {
      std::string bytes;
      for (char32_t c : DecodeUtf8(tok)) {
        int b = UnicodeToByte(c);
        if (b < 0) {
          bytes = tok;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      spec.pieces[id] = bytes;
    }
  }
}

// BOS/EOS (and EOT) ids and whether Encode adds them.
absl::Status ResolveSpecialIds(const formats::GgufFile& gguf, const std::vector<std::string>& tokens, bool is_spm,
                               TokenizerSpec* out) {
  TokenizerSpec& spec = *out;
  const formats::GgufFile* f = &gguf;
  const size_t n = tokens.size();
  ORCA_ASSIGN_OR_RETURN(spec.bos_id, OptionalId(*f, "tokenizer.ggml.bos_token_id", n));
  ORCA_ASSIGN_OR_RETURN(std::optional<int32_t> eos, OptionalId(*f, "tokenizer.ggml.eos_token_id", n));
  if (spec.bos_id) spec.bos_token = tokens[*spec.bos_id];
  if (eos) {
    spec.eos_token = tokens[*eos];
    spec.eos_ids.push_back(*eos);
  }
  // End of generation as llama.cpp decides it for a GGUF: the eos, eot and eom ids, and every token whose text is one
  // of the end-of-turn markers chat models emit. A converter names one eos (Llama 3.x Instruct: <|eot_id|>), while
  // the model may also end with <|eom_id|> (Llama 3.1's tool turns) or <|endoftext|> (Qwen2.5).
  auto add_eog = [&spec](int32_t id) {
    if (std::find(spec.eos_ids.begin(), spec.eos_ids.end(), id) == spec.eos_ids.end()) spec.eos_ids.push_back(id);
  };
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    ORCA_ASSIGN_OR_RETURN(std::optional<int32_t> id, OptionalId(*f, key, n));
    if (id) add_eog(*id);
  }
  static constexpr std::string_view kEndOfTurnTexts[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>",
                                                         "<|endoftext|>", "<|eom_id|>", "<EOT>"};
  for (size_t i = 0; i < n; ++i)
    for (std::string_view text : kEndOfTurnTexts)
      if (tokens[i] == text) add_eog(static_cast<int32_t>(i));
  const bool add_bos = f->GetBool("tokenizer.ggml.add_bos_token").value_or(is_spm);
  const bool add_eos = f->GetBool("tokenizer.ggml.add_eos_token").value_or(false);
  if (add_bos && spec.bos_id) spec.prefix_ids.push_back(*spec.bos_id);
  if (add_eos && eos) spec.suffix_ids.push_back(*eos);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path) {
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<formats::GgufFile> f, formats::GgufFile::Open(path));
  ORCA_ASSIGN_OR_RETURN(std::string model, f->GetString("tokenizer.ggml.model"));
  ORCA_ASSIGN_OR_RETURN(std::vector<std::string> tokens, f->GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = tokens.size();
  std::vector<int64_t> types(n, kNormal);
  if (f->Has("tokenizer.ggml.token_type")) {
    ORCA_ASSIGN_OR_RETURN(types, f->GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.token_type has ", types.size(), " entries for ", n, " tokens"));
    }
  }
  const bool is_spm = model == "llama";
  if (!is_spm && model != "gpt2") {
    return absl::UnimplementedError(
        absl::StrCat("unsupported GGUF tokenizer.ggml.model '", model, "' (supported: llama, gpt2)"));
  }
  TokenizerSpec spec;
  spec.id_to_token = tokens;
  spec.present.assign(n, true);
  spec.special.assign(n, false);
  spec.pieces.assign(n, "");
  FillTokenTables(tokens, types, is_spm, &spec);
  ORCA_ASSIGN_OR_RETURN(std::optional<int32_t> unk, OptionalId(*f, "tokenizer.ggml.unknown_token_id", n));
  if (is_spm) {
    std::vector<float> scores(n, 0.0f);
    if (f->Has("tokenizer.ggml.scores")) {
      ORCA_ASSIGN_OR_RETURN(std::vector<double> s, f->GetFloatArray("tokenizer.ggml.scores"));
      if (s.size() != n) return absl::InvalidArgumentError("tokenizer.ggml.scores does not match the token count");
      for (size_t i = 0; i < n; ++i) scores[i] = static_cast<float>(s[i]);
    }
    // Control/unused tokens never come out of merging (as in llama.cpp, which
    // only merges into normal and user-defined pieces).
    std::vector<std::string> mergeable = tokens;
    for (size_t i = 0; i < n; ++i) {
      if (types[i] == kControl || types[i] == kUnknown || types[i] == kUnused) mergeable[i].clear();
    }
    ORCA_ASSIGN_OR_RETURN(spec.model, SentencePieceModel::Create(mergeable, std::move(scores), unk));
    const bool add_space_prefix = f->GetBool("tokenizer.ggml.add_space_prefix").value_or(true);
    spec.normalizer = MakeSentencePieceNormalizer(add_space_prefix);
    spec.decode_rules.strip_leading = add_space_prefix ? 1 : 0;
  } else {
    ORCA_ASSIGN_OR_RETURN(std::vector<std::string> merge_lines, f->GetStringArray("tokenizer.ggml.merges"));
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(merge_lines.size());
    for (size_t i = 0; i < merge_lines.size(); ++i) {
      size_t sp = merge_lines[i].find(' ', 1);
      if (sp == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.merges[", i, "] is not 'a b'"));
      }
      merges.emplace_back(merge_lines[i].substr(0, sp), merge_lines[i].substr(sp + 1));
    }
    Vocab vocab;
    for (size_t i = 0; i < n; ++i) vocab.try_emplace(tokens[i], static_cast<int32_t>(i));
    ORCA_ASSIGN_OR_RETURN(spec.model, BpeModel::Create(std::move(vocab), merges, BpeOptions{}));
    ORCA_ASSIGN_OR_RETURN(std::string_view pattern, PrePattern(*f));
    ORCA_ASSIGN_OR_RETURN(spec.pre_tokenizer, MakeByteLevelPreTokenizer(pattern));
  }
  ORCA_RETURN_IF_ERROR(ResolveSpecialIds(*f, tokens, is_spm, &spec));
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<PipelineTokenizer> t, PipelineTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace orca::text
