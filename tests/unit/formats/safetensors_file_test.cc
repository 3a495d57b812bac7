// Safetensors reading: tensors of dtypes Orca does not use are kept with their dtype and
// size, so `orca model info` can list them, and fail only when a model needs them.

#include "core/formats/safetensors_file.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/common/mapped_file.h"
#include "gtest/gtest.h"

namespace orca::formats {
namespace {

TEST(SafetensorsFileTest, TensorsOfDtypesOrcaDoesNotUseAreListedWithTheirDtypeAndSize) {
  const std::string header =
      R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})";
  std::string s(8, '\0');
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  s += header;
  s += std::string(24, '\1');
  const std::string path =
      (std::filesystem::temp_directory_path() / ("unsupported-" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  ASSERT_TRUE(WriteStringToFile(path, s).ok());
  auto f = SafetensorsSource::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const TensorInfo* ids = (*f)->Find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_FALSE(ids->unsupported.empty());
  EXPECT_EQ(ids->unsupported_type, "I64");
  EXPECT_EQ(ids->nbytes, 16u);
  EXPECT_EQ(ids->ShapeString(), "[2]");
  EXPECT_EQ(ids->data, nullptr);
  const std::string summary = TensorTypeSummary(**f, /*list_tensors=*/false);
  EXPECT_NE(summary.find("tensor types: I64 ×1 (0.00 MiB, not supported) f32 ×1 (0.00 MiB); 0.00 MiB in all\n"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("Orca cannot load tensors of type I64 ("), std::string::npos) << summary;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace orca::formats
