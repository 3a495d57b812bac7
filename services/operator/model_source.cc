#include "services/operator/model_source.h"

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace orca::k8s {
namespace {

constexpr char kField[] = "spec.model.uri";

absl::Status SetSyntheticParam(const std::string& key, const std::string& value, SyntheticModel* m) {
  if (key == "dtype") {
    if (value != "f32" && value != "bf16" && value != "f16") {
      return absl::InvalidArgumentError(
          absl::StrCat(kField, ": synthetic dtype must be f32, bf16 or f16, got '", value, "'"));
    }
    m->dtype = value;
    return absl::OkStatus();
  }
  struct IntParam {
    const char* name;
    int64_t* dst;
    int64_t min;
    int64_t max;
  };
  const IntParam params[] = {
      {"layers", &m->num_layers, 1, 1024},
      {"hidden", &m->hidden_size, 1, 65536},
      {"heads", &m->num_heads, 1, 1024},
      {"kvHeads", &m->num_kv_heads, 1, 1024},
      {"intermediate", &m->intermediate_size, 1, 1 << 20},
      {"vocab", &m->vocab_size, 260, 1 << 22},
      {"maxPosition", &m->max_position, 1, 1 << 22},
      {"seed", &m->seed, 0, INT64_MAX},
  };
  for (const IntParam& p : params) {
    if (key != p.name) continue;
    int64_t v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < p.min || v > p.max) {
      return absl::InvalidArgumentError(absl::StrCat(kField, ": synthetic parameter '", key,
                                                     "' must be an integer in [", p.min, ", ", p.max, "], got '", value,
                                                     "'"));
    }
    *p.dst = v;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(kField, ": unknown synthetic parameter '", key,
                   "' (known: layers, hidden, heads, kvHeads, intermediate, vocab, maxPosition, seed, dtype)"));
}

absl::StatusOr<ModelSource> ParseSynthetic(const std::string& rest) {
  ModelSource source;
  source.kind = ModelSource::Kind::kSynthetic;
  SyntheticModel& m = source.synthetic;
  const size_t q = rest.find('?');
  m.arch = rest.substr(0, q);
  if (m.arch != "llama" && m.arch != "gpt2") {
    return absl::InvalidArgumentError(
        absl::StrCat(kField, ": synthetic architecture must be llama or gpt2, got '", m.arch, "'"));
  }
  if (q != std::string::npos && q + 1 < rest.size()) {
    for (absl::string_view pair : absl::StrSplit(rest.substr(q + 1), '&')) {
      if (pair.empty()) continue;
      std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      if (kv.second.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(kField, ": synthetic parameter '", kv.first, "' has no value"));
      }
      if (auto st = SetSyntheticParam(kv.first, kv.second, &m); !st.ok()) return st;
    }
  }
  if (m.hidden_size % m.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kField, ": synthetic hidden (", m.hidden_size,
                                                   ") must be divisible by heads (", m.num_heads, ")"));
  }
  const int64_t kv_heads = m.num_kv_heads == 0 ? m.num_heads : m.num_kv_heads;
  if (m.num_heads % kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kField, ": synthetic heads (", m.num_heads, ") must be a multiple of kvHeads (", kv_heads, ")"));
  }
  if (m.arch == "gpt2" && m.num_kv_heads != 0 && m.num_kv_heads != m.num_heads) {
    return absl::InvalidArgumentError(absl::StrCat(kField, ": gpt2 has no grouped-query attention; drop kvHeads"));
  }
  return source;
}

}  // namespace

int64_t SyntheticModel::KvBytesPerToken() const {
  const int64_t kv_heads = num_kv_heads == 0 ? num_heads : num_kv_heads;
  const int64_t head_dim = hidden_size / num_heads;
  const int64_t dtype_bytes = dtype == "f32" ? 4 : 2;
  return 2 * num_layers * kv_heads * head_dim * dtype_bytes;
}

std::vector<std::string> SyntheticModel::SynthArgs(const std::string& out_dir) const {
  std::vector<std::string> args = {
      "--arch",         arch,
      "--out",          out_dir,
      "--num-layers",   std::to_string(num_layers),
      "--hidden-size",  std::to_string(hidden_size),
      "--num-heads",    std::to_string(num_heads),
      "--vocab-size",   std::to_string(vocab_size),
      "--max-position", std::to_string(max_position),
      "--seed",         std::to_string(seed),
      "--dtype",        dtype,
  };
  if (num_kv_heads != 0) args.insert(args.end(), {"--num-kv-heads", std::to_string(num_kv_heads)});
  if (intermediate_size != 0) args.insert(args.end(), {"--intermediate-size", std::to_string(intermediate_size)});
  return args;
}

std::string ModelSource::ContainerModelPath() const {
  switch (kind) {
    case Kind::kPvc:
      return sub_path.empty() ? std::string(kModelMountPath) : absl::StrCat(kModelMountPath, "/", sub_path);
    case Kind::kPath:
      return local_path;
    case Kind::kSynthetic:
      return absl::StrCat(kModelMountPath, "/synthetic");
  }
  return local_path;
}

absl::StatusOr<ModelSource> ParseModelUri(const std::string& uri) {
  static const std::regex kClaim("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  if (uri.rfind("synthetic://", 0) == 0) return ParseSynthetic(uri.substr(12));
  if (uri.rfind("pvc://", 0) == 0) {
    ModelSource source;
    source.kind = ModelSource::Kind::kPvc;
    const std::string rest = uri.substr(6);
    const size_t slash = rest.find('/');
    source.claim = rest.substr(0, slash);
    if (slash != std::string::npos) source.sub_path = rest.substr(slash + 1);
    while (!source.sub_path.empty() && source.sub_path.back() == '/') source.sub_path.pop_back();
    if (source.claim.size() > 253 || !std::regex_match(source.claim, kClaim)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kField, ": '", source.claim, "' is not a valid PersistentVolumeClaim name (pvc://CLAIM/PATH)"));
    }
    for (absl::string_view part : absl::StrSplit(source.sub_path, '/')) {
      if (part == "..")
        return absl::InvalidArgumentError(absl::StrCat(kField, ": the path inside the claim must not contain '..'"));
    }
    return source;
  }
  std::string path = uri;
  if (path.rfind("file://", 0) == 0) path = path.substr(7);
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(kField, ": '", uri,
                     "' is not supported; use pvc://CLAIM/PATH, an absolute path (/models/x or file:///models/x) or "
                     "synthetic://llama?layers=N&hidden=N"));
  }
  ModelSource source;
  source.kind = ModelSource::Kind::kPath;
  source.local_path = path;
  return source;
}

}  // namespace orca::k8s
