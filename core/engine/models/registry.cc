// The table of model families: the one place that lists them. A new family is its file plus a line here.
#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "core/engine/models/model_family.h"

namespace orca::engine {

extern const ModelFamily kLlamaFamily;
extern const ModelFamily kGpt2Family;
extern const ModelFamily kQwen3Family;
extern const ModelFamily kGemma2Family;
extern const ModelFamily kGemma3Family;
extern const ModelFamily kGraniteFamily;
extern const ModelFamily kOlmo2Family;
extern const ModelFamily kStarcoder2Family;
extern const ModelFamily kPhi3Family;
extern const ModelFamily kMistral3Family;

namespace {

const ModelFamily* const kFamilies[] = {&kLlamaFamily,   &kGpt2Family,  &kQwen3Family,      &kGemma2Family,
                                        &kGemma3Family,  &kGraniteFamily, &kOlmo2Family,  &kStarcoder2Family,
                                        &kPhi3Family,    &kMistral3Family};

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string SortedNames(std::vector<std::string> ModelFamily::*field) {
  std::set<std::string> names;
  for (const ModelFamily* f : kFamilies) names.insert((f->*field).begin(), (f->*field).end());
  return absl::StrJoin(names, ", ");
}

}  // namespace

const ModelFamily& FamilyOf(ModelArch arch) {
  for (const ModelFamily* f : kFamilies)
    if (f->arch == arch) return *f;
  return kLlamaFamily;  // unreachable: every ModelArch has a family
}

const ModelFamily* FindHfFamily(const std::string& model_type, const std::string& architecture) {
  for (const ModelFamily* f : kFamilies)
    if (model_type.empty() ? Contains(f->hf_architectures, architecture) : Contains(f->hf_model_types, model_type))
      return f;
  return nullptr;
}

const ModelFamily* FindGgufFamily(const std::string& arch) {
  for (const ModelFamily* f : kFamilies)
    if (Contains(f->gguf_architectures, arch)) return f;
  return nullptr;
}

const ModelFamily* FindFamilyByName(const std::string& name) {
  for (const ModelFamily* f : kFamilies)
    if (name == f->name) return f;
  return nullptr;
}

std::string SupportedHfModelTypes() { return SortedNames(&ModelFamily::hf_model_types); }
std::string SupportedGgufArchitectures() { return SortedNames(&ModelFamily::gguf_architectures); }

std::string FamilyNames() {
  std::vector<std::string> names;
  for (const ModelFamily* f : kFamilies) names.push_back(f->name);
  return absl::StrJoin(names, ", ");
}

}  // namespace orca::engine
