#include "core/text/hf_tokenizer_loader.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/common/status_macros.h"
#include "core/text/components.h"
#include "core/text/pipeline_tokenizer.h"
#include "core/text/unicode.h"

namespace orca::text {
namespace {

using nlohmann::json;

/// A token id from tokenizer.json: an integer in [0, 2^30]; anything else (a float, a
/// string, an id past int32) is an error naming `what`, never a conversion.
absl::StatusOr<int32_t> TokenId(const json& v, const std::string& what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a token id (an integer in [0, 2^30]), not ", v.dump()));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

absl::StatusOr<json> ParseJson(std::string_view text, std::string_view what) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(std::string(what), " is not valid JSON"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(std::string(what), " must be a JSON object"));
  return j;
}

// Config token fields are a string, `{"content": ...}`, or null.
std::string ConfigToken(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && it->at("content").is_string()) {
    return it->at("content").get<std::string>();
  }
  return "";
}

std::optional<bool> ConfigBool(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

absl::Status ParseModel(const json& model, TokenizerSpec* spec, Vocab* vocab_out) {
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrCat("unsupported model type '", type, "' (supported: BPE)"));
  }
  if (!model.contains("vocab") || !model.at("vocab").is_object()) {
    return absl::InvalidArgumentError("model.vocab must be an object of token -> id");
  }
  Vocab vocab;
  vocab.reserve(model.at("vocab").size());
  for (const auto& [token, id] : model.at("vocab").items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 30)) {
      return absl::InvalidArgumentError(absl::StrCat("model.vocab['", token, "'] must be a non-negative id"));
    }
    vocab.emplace(token, id.get<int32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  if (model.contains("merges")) {
    const json& m = model.at("merges");
    merges.reserve(m.size());
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i].is_string()) {
        const std::string s = m[i].get<std::string>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos) {
          return absl::InvalidArgumentError(absl::StrCat("model.merges[", i, "] '", s, "' is not 'a b'"));
        }
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m[i].is_array() && m[i].size() == 2) {
        merges.emplace_back(m[i][0].get<std::string>(), m[i][1].get<std::string>());
      } else {
        return absl::InvalidArgumentError(absl::StrCat("model.merges[", i, "] must be 'a b' or [a, b]"));
      }
    }
  }
  BpeOptions options;
  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    auto it = vocab.find(model.at("unk_token").get<std::string>());
    if (it != vocab.end()) options.unk_id = it->second;
  }
  auto flag = [&](const char* key) {
    return model.contains(key) && model.at(key).is_boolean() && model.at(key).get<bool>();
  };
  auto str = [&](const char* key) {
    return model.contains(key) && model.at(key).is_string() ? model.at(key).get<std::string>() : std::string();
  };
  options.fuse_unk = flag("fuse_unk");
  options.byte_fallback = flag("byte_fallback");
  options.ignore_merges = flag("ignore_merges");
  options.continuing_subword_prefix = str("continuing_subword_prefix");
  options.end_of_word_suffix = str("end_of_word_suffix");
  *vocab_out = vocab;
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<BpeModel> bpe, BpeModel::Create(std::move(vocab), merges, options));
  spec->model = std::move(bpe);
  return absl::OkStatus();
}

// Collects the ids a post-processor puts before/after a single sequence.
absl::Status ParsePostProcessor(const json& pp, std::vector<int32_t>* prefix, std::vector<int32_t>* suffix) {
  if (pp.is_null()) return absl::OkStatus();
  const std::string type = pp.value("type", std::string());
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "TemplateProcessing") {
    bool seen_sequence = false;
    for (const json& item : pp.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken")) return absl::InvalidArgumentError("TemplateProcessing item without type");
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      if (!pp.contains("special_tokens") || !pp.at("special_tokens").contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("TemplateProcessing uses special token '", name, "' missing from special_tokens"));
      }
      for (const json& id : pp.at("special_tokens").at(name).at("ids")) {
        ORCA_ASSIGN_OR_RETURN(int32_t token, TokenId(id, "special_tokens['" + name + "'].ids"));
        (seen_sequence ? suffix : prefix)->push_back(token);
      }
    }
    return absl::OkStatus();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    ORCA_ASSIGN_OR_RETURN(int32_t cls, TokenId(pp.at("cls").at(1), "post_processor.cls"));
    ORCA_ASSIGN_OR_RETURN(int32_t sep, TokenId(pp.at("sep").at(1), "post_processor.sep"));
    prefix->push_back(cls);
    suffix->push_back(sep);
    return absl::OkStatus();
  }
  if (type == "Sequence") {
    for (const json& p : pp.at("processors")) {
      std::vector<int32_t> pre, suf;
      ORCA_RETURN_IF_ERROR(ParsePostProcessor(p, &pre, &suf));
      prefix->insert(prefix->begin(), pre.begin(), pre.end());
      suffix->insert(suffix->end(), suf.begin(), suf.end());
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat("unsupported post_processor type '", type,
                   "' (supported: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)"));
}

// One decoder step, applied to every token (before Fuse) or to the joined text.
struct DecoderStep {
  enum class Type { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } type;
  std::unique_ptr<Regex> pattern;
  std::string content;
  int start = 0;
  int stop = 0;
  bool prepend = true;
};

absl::Status FlattenDecoder(const json& d, std::vector<DecoderStep>* steps) {
  const std::string type = d.value("type", std::string());
  DecoderStep step;
  if (type == "Sequence") {
    for (const json& sub : d.at("decoders")) ORCA_RETURN_IF_ERROR(FlattenDecoder(sub, steps));
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    step.type = DecoderStep::Type::kByteLevel;
  } else if (type == "Replace") {
    step.type = DecoderStep::Type::kReplace;
    const json& p = d.at("pattern");
    if (p.contains("String")) {
      step.pattern = Regex::Literal(p.at("String").get<std::string>());
    } else {
      ORCA_ASSIGN_OR_RETURN(step.pattern, Regex::Compile(p.at("Regex").get<std::string>()));
    }
    step.content = d.value("content", std::string());
  } else if (type == "ByteFallback") {
    step.type = DecoderStep::Type::kByteFallback;
  } else if (type == "Fuse") {
    step.type = DecoderStep::Type::kFuse;
  } else if (type == "Strip") {
    step.type = DecoderStep::Type::kStrip;
    step.content = d.value("content", std::string(" "));
    step.start = d.value("start", 0);
    step.stop = d.value("stop", 0);
  } else if (type == "Metaspace") {
    step.type = DecoderStep::Type::kMetaspace;
    step.content = d.value("replacement", std::string("\u2581"));
    std::string scheme = d.contains("prepend_scheme") && d.at("prepend_scheme").is_string()
                             ? d.at("prepend_scheme").get<std::string>()
                             : std::string("always");
    bool add_prefix = !(d.contains("add_prefix_space") && d.at("add_prefix_space").is_boolean() &&
                        !d.at("add_prefix_space").get<bool>());
    step.prepend = scheme != "never" && add_prefix;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("unsupported decoder type '", type,
                     "' (supported: Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

std::string ReplaceInPiece(const std::string& piece, const Regex& re, const std::string& content) {
  std::vector<size_t> offsets;
  std::vector<char32_t> cps = DecodeUtf8(piece, &offsets);
  std::vector<Regex::Match> matches = re.FindAll(cps);
  if (matches.empty()) return piece;
  std::string out;
  size_t last = 0;
  for (const Regex::Match& m : matches) {
    out.append(piece, offsets[last], offsets[m.begin] - offsets[last]);
    out += content;
    last = m.end;
  }
  out.append(piece, offsets[last], std::string::npos);
  return out;
}

// Computes each id's decode piece and the whole-text rules from the decoder.
absl::Status PlanDecoding(const json& decoder, const absl::flat_hash_set<std::string>& added_contents,
                          TokenizerSpec* spec) {
  if (decoder.is_null()) {
    return absl::UnimplementedError("tokenizer.json has no decoder; Orca needs one to turn ids back into text");
  }
  std::vector<DecoderStep> steps;
  ORCA_RETURN_IF_ERROR(FlattenDecoder(decoder, &steps));
  bool fused = false;
  for (const DecoderStep& s : steps) {
    if (s.type == DecoderStep::Type::kFuse) fused = true;
    if (s.type == DecoderStep::Type::kStrip && fused) {
      if (s.stop > 0) return absl::UnimplementedError("decoder Strip with stop > 0 after Fuse is not supported");
      spec->decode_rules.strip_leading = s.start;
      spec->decode_rules.strip_char = s.content;
    }
    if (s.type == DecoderStep::Type::kMetaspace && s.prepend) {
      spec->decode_rules.strip_leading = 1;
      spec->decode_rules.strip_char = " ";
    }
  }
  const size_t n = spec->id_to_token.size();
  spec->pieces.assign(n, "");
  for (size_t id = 0; id < n; ++id) {
    if (!spec->present[id]) continue;
    std::string piece = spec->id_to_token[id];
    const bool is_added = added_contents.contains(piece);
    bool after_fuse = false;
    for (const DecoderStep& s : steps) {
      switch (s.type) {
        case DecoderStep::Type::kByteLevel: {
          if (is_added) break;
          std::string bytes;
          bool all = true;
          for (char32_t c : DecodeUtf8(piece)) {
            int b = UnicodeToByte(c);
            if (b < 0) {
              all = false;
              break;
            }
            bytes.push_back(static_cast<char>(b));
          }
          if (all) piece = std::move(bytes);
          break;
        }
        case DecoderStep::Type::kReplace:
          piece = ReplaceInPiece(piece, *s.pattern, s.content);
          break;
        case DecoderStep::Type::kByteFallback:
          if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>' &&
              std::isxdigit(static_cast<unsigned char>(piece[3])) &&
              std::isxdigit(static_cast<unsigned char>(piece[4]))) {
            piece = std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
          }
          break;
        case DecoderStep::Type::kFuse:
          after_fuse = true;
          break;
        case DecoderStep::Type::kStrip:
          if (!after_fuse) {
            for (int k = 0; k < s.start && piece.compare(0, s.content.size(), s.content) == 0; ++k) {
              piece.erase(0, s.content.size());
            }
            for (int k = 0; k < s.stop && piece.size() >= s.content.size() &&
                            piece.compare(piece.size() - s.content.size(), s.content.size(), s.content) == 0;
                 ++k) {
              piece.erase(piece.size() - s.content.size());
            }
          }
          break;
        case DecoderStep::Type::kMetaspace:
          piece = absl::StrReplaceAll(piece, {{s.content, " "}});
          break;
      }
    }
    spec->pieces[id] = std::move(piece);
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const json& tj, std::vector<AddedToken>* out, int64_t* size) {
  if (tj.contains("added_tokens") && tj.at("added_tokens").is_array()) {
    for (const json& a : tj.at("added_tokens")) {
      AddedToken t;
      ORCA_ASSIGN_OR_RETURN(t.id, TokenId(a.at("id"), "added_tokens[].id"));
      t.content = a.at("content").get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      t.normalized = a.value("normalized", !t.special);
      if (t.id < 0 || t.id > (1 << 30)) {
        return absl::InvalidArgumentError(absl::StrCat("added token '", t.content, "' has invalid id ", t.id));
      }
      *size = std::max<int64_t>(*size, t.id + 1);
      out->push_back(std::move(t));
    }
  }
  return absl::OkStatus();
}

// BOS/EOS from tokenizer_config.json (tokens, add_bos_token/add_eos_token),
// the post-processor, and generation_config.json eos_token_id (int or list).
absl::Status ResolveBosEos(const json& config, const json& generation, const Vocab& vocab, TokenizerSpec* out) {
  TokenizerSpec& spec = *out;
  auto lookup = [&](const std::string& token) -> std::optional<int32_t> {
    if (token.empty()) return std::nullopt;
    for (const AddedToken& t : spec.added_tokens) {
      if (t.content == token) return t.id;
    }
    auto it = vocab.find(AsAbsl(token));
    if (it != vocab.end()) return it->second;
    return std::nullopt;
  };
  spec.bos_token = ConfigToken(config, "bos_token");
  spec.eos_token = ConfigToken(config, "eos_token");
  spec.bos_id = lookup(spec.bos_token);
  if (!spec.bos_id.has_value() && spec.bos_token.empty() && !spec.prefix_ids.empty()) {
    spec.bos_id = spec.prefix_ids.front();
    spec.bos_token = spec.id_to_token[*spec.bos_id];
  }
  // An explicit add_bos_token / add_eos_token in tokenizer_config.json wins over
  // the post-processor, as transformers' Llama/Gemma tokenizers rebuild it so.
  if (std::optional<bool> add_bos = ConfigBool(config, "add_bos_token"); add_bos.has_value() && spec.bos_id) {
    auto& p = spec.prefix_ids;
    p.erase(std::remove(p.begin(), p.end(), *spec.bos_id), p.end());
    if (*add_bos) p.insert(p.begin(), *spec.bos_id);
  }
  std::optional<int32_t> eos_id = lookup(spec.eos_token);
  if (std::optional<bool> add_eos = ConfigBool(config, "add_eos_token"); add_eos.has_value() && eos_id) {
    auto& suffix = spec.suffix_ids;
    suffix.erase(std::remove(suffix.begin(), suffix.end(), *eos_id), suffix.end());
    if (*add_eos) suffix.push_back(*eos_id);
  }
  if (eos_id) spec.eos_ids.push_back(*eos_id);
  if (generation.contains("eos_token_id")) {
    const json& e = generation.at("eos_token_id");
    std::vector<int64_t> ids;
    if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
    if (e.is_array()) {
      for (const json& x : e) {
        if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
      }
    }
    for (int64_t id : ids) {
      // An id the tokenizer does not have would never end a generation: say so rather than drop it.
      if (id < 0 || id >= static_cast<int64_t>(spec.id_to_token.size()))
        return absl::InvalidArgumentError(absl::StrCat("generation_config.json: eos_token_id ", id,
                                                       " is outside the tokenizer's vocabulary of ",
                                                       spec.id_to_token.size(), " tokens"));
      if (std::find(spec.eos_ids.begin(), spec.eos_ids.end(), id) == spec.eos_ids.end())
        spec.eos_ids.push_back(static_cast<int32_t>(id));
    }
  }
  if (spec.eos_token.empty() && !spec.eos_ids.empty()) spec.eos_token = spec.id_to_token[spec.eos_ids.front()];
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Build(const json& tj, const json& config, const json& generation) {
  TokenizerSpec spec;
  if (!tj.contains("model")) return absl::InvalidArgumentError("tokenizer.json has no 'model'");
  Vocab vocab;
  ORCA_RETURN_IF_ERROR(ParseModel(tj.at("model"), &spec, &vocab));
  int64_t size = 0;
  for (const auto& [token, id] : vocab) size = std::max<int64_t>(size, id + 1);
  ORCA_RETURN_IF_ERROR(ParseAddedTokens(tj, &spec.added_tokens, &size));
  spec.id_to_token.assign(size, "");
  spec.present.assign(size, false);
  spec.special.assign(size, false);
  for (const auto& [token, id] : vocab) {
    spec.id_to_token[id] = token;
    spec.present[id] = true;
  }
  absl::flat_hash_set<std::string> added_contents;
  absl::flat_hash_set<std::string> special_contents;
  for (const AddedToken& t : spec.added_tokens) {
    spec.id_to_token[t.id] = t.content;
    spec.present[t.id] = true;
    added_contents.insert(t.content);
    if (t.special) special_contents.insert(t.content);
  }
  if (config.contains("additional_special_tokens") && config.at("additional_special_tokens").is_array()) {
    for (const json& s : config.at("additional_special_tokens")) {
      if (s.is_string()) special_contents.insert(s.get<std::string>());
      if (s.is_object() && s.contains("content")) special_contents.insert(s.at("content").get<std::string>());
    }
  }
  for (size_t id = 0; id < spec.id_to_token.size(); ++id) {
    spec.special[id] = spec.present[id] && special_contents.contains(spec.id_to_token[id]);
  }
  ORCA_ASSIGN_OR_RETURN(spec.normalizer, ParseNormalizer(tj.value("normalizer", json())));
  ORCA_ASSIGN_OR_RETURN(spec.pre_tokenizer, ParsePreTokenizer(tj.value("pre_tokenizer", json())));
  ORCA_RETURN_IF_ERROR(Annotate(
      ParsePostProcessor(tj.value("post_processor", json()), &spec.prefix_ids, &spec.suffix_ids), "post_processor"));
  ORCA_RETURN_IF_ERROR(Annotate(PlanDecoding(tj.value("decoder", json()), added_contents, &spec), "decoder"));
  spec.decode_rules.clean_up_tokenization_spaces = ConfigBool(config, "clean_up_tokenization_spaces").value_or(false);

  ORCA_RETURN_IF_ERROR(ResolveBosEos(config, generation, vocab, &spec));
  ORCA_ASSIGN_OR_RETURN(std::unique_ptr<PipelineTokenizer> t, PipelineTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json,
                                                           std::string_view generation_config_json) {
  ORCA_ASSIGN_OR_RETURN(json tj, ParseJson(tokenizer_json, "tokenizer.json"));
  json config = json::object();
  if (!tokenizer_config_json.empty()) {
    ORCA_ASSIGN_OR_RETURN(config, ParseJson(tokenizer_config_json, "tokenizer_config.json"));
  }
  json generation = json::object();
  if (!generation_config_json.empty()) {
    ORCA_ASSIGN_OR_RETURN(generation, ParseJson(generation_config_json, "generation_config.json"));
  }
  return GuardJson("tokenizer.json", [&] { return Build(tj, config, generation); });
}

}  // namespace orca::text
