#pragma once
/// The one rule for the name a model is served under when none is given:
/// every service of a deployment (gateway, scheduler, workers, `orca serve`'s
/// banner) labels metrics and answers `"model"` with this name, so they must agree.

#include <string>
#include <string_view>

namespace orca {

/// "/models/llama-3/" → "llama-3"; "/m/stories260K.gguf" → "stories260K"
/// (a .gguf file's extension is dropped, as clients name models without it).
std::string ServedModelNameFromPath(std::string_view path);

}  // namespace orca
