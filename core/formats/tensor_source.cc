#include "core/formats/tensor_source.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/formats/gguf_file.h"

namespace orca::formats {

std::string TensorInfo::ShapeString() const { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

std::string TensorTypeSummary(const TensorSource& tensors, bool list_tensors) {
  std::string out;
  std::map<std::string, std::pair<int, size_t>> by_type;
  std::set<std::string> unusable;
  size_t total = 0;
  for (const auto& name : tensors.Names()) {
    const TensorInfo* t = tensors.Find(name);
    std::string type = DTypeName(t->dtype);
    if (!t->unsupported.empty()) {
      type = t->unsupported_type.empty() ? "unsupported" : t->unsupported_type;
      unusable.insert(type);
    }
    by_type[type].first++;
    by_type[type].second += t->nbytes;
    total += t->nbytes;
    if (list_tensors)
      absl::StrAppend(&out, "  ", name, " ", t->ShapeString(), " ", type, " ", t->nbytes, " bytes",
                      t->unsupported.empty() ? "" : absl::StrCat(" (", t->unsupported, ")"), "\n");
  }
  auto mib = [](size_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); };
  absl::StrAppend(&out, "tensor types:");
  for (const auto& [type, v] : by_type)
    absl::StrAppend(&out, " ", type, " ×", v.first, " (", mib(v.second),
                    unusable.count(type) != 0 ? ", not supported" : "", ")");
  absl::StrAppend(&out, "; ", mib(total), " in all\n");
  if (!unusable.empty())
    absl::StrAppend(&out, "Orca cannot load tensors of type ", absl::StrJoin(unusable, ", "), " (it loads ",
                    GgufFile::LoadableTypes(), "): a model that uses them will not load\n");
  return out;
}

}  // namespace orca::formats
