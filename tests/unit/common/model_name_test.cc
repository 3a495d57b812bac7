#include "core/common/model_name.h"

#include <gtest/gtest.h>

namespace orca {
namespace {

TEST(ServedModelNameTest, DirectoryIsItsBasename) {
  EXPECT_EQ(ServedModelNameFromPath("/models/llama-3"), "llama-3");
  EXPECT_EQ(ServedModelNameFromPath("/models/llama-3/"), "llama-3");
  EXPECT_EQ(ServedModelNameFromPath("relative//dir//"), "dir");
}

TEST(ServedModelNameTest, GgufFileDropsTheExtension) {
  // The name `orca serve` prints in its example request must be the one the gateway answers to.
  EXPECT_EQ(ServedModelNameFromPath("../shared/models/stories260K.gguf"), "stories260K");
  EXPECT_EQ(ServedModelNameFromPath("model.Q4_K_M.gguf"), "model.Q4_K_M");
}

TEST(ServedModelNameTest, KeepsOtherExtensionsAndDegenerateNames) {
  EXPECT_EQ(ServedModelNameFromPath("/m/weights.safetensors"), "weights.safetensors");
  EXPECT_EQ(ServedModelNameFromPath(".gguf"), ".gguf");
  EXPECT_EQ(ServedModelNameFromPath("plain"), "plain");
  EXPECT_EQ(ServedModelNameFromPath(""), "");
}

}  // namespace
}  // namespace orca
