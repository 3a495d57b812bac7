#include "core/common/model_name.h"

namespace orca {

std::string ServedModelNameFromPath(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (const size_t slash = path.find_last_of('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  constexpr std::string_view kGguf = ".gguf";
  if (path.size() > kGguf.size() && path.ends_with(kGguf)) path.remove_suffix(kGguf.size());
  return std::string(path);
}

}  // namespace orca
