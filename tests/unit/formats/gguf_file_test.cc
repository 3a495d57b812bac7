// GGUF writing and reading: every metadata kind and tensor type round-trips
// through GgufWriter and GgufFile (values re-written with their original GGUF
// types read back the same), quantized tensors are mapped in place, and
// damaged files fail with the tensor and the problem named.

#include "core/formats/gguf_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/dtype.h"
#include "core/common/mapped_file.h"
#include "core/formats/gguf_writer.h"
#include "gtest/gtest.h"

namespace orca::formats {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf")).string();
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen());
  return s;
}

// Quantized bytes of random values (valid blocks).
std::string QuantizedBytes(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(cols);
  std::string out(DTypeRowBytes(t, cols) * rows, '\0');
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(gen);
    QuantizeRow(t, row.data(), out.data() + r * DTypeRowBytes(t, cols), cols);
  }
  return out;
}

struct Written {
  std::vector<std::string> names;
  std::vector<std::string> data;
};

Written WriteModelFile(const std::string& path) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 2);
  w.SetI32("some.signed", -5);
  w.SetF32("llama.rope.freq_base", 10000.0f);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "<s>"});
  w.SetI32Array("tokenizer.ggml.token_type", {1, 1, 3});
  w.SetF32Array("tokenizer.ggml.scores", {0.5f, -1.0f, 0.0f});
  Written out;
  struct Spec {
    const char* name;
    std::vector<int64_t> shape;
    DType dtype;
  };
  const Spec specs[] = {
      {"norm.weight", {64}, DType::kF32},         {"a.weight", {3, 64}, DType::kF16},
      {"b.weight", {5, 64}, DType::kBF16},        {"q8.weight", {7, 64}, DType::kQ8_0},
      {"q4_0.weight", {3, 96}, DType::kQ4_0},     {"q4_1.weight", {2, 32}, DType::kQ4_1},
      {"q5_0.weight", {4, 64}, DType::kQ5_0},     {"q5_1.weight", {1, 128}, DType::kQ5_1},
      {"q4_k.weight", {3, 512}, DType::kQ4_K},    {"q5_k.weight", {2, 256}, DType::kQ5_K},
      {"q6_k.weight", {2, 2, 256}, DType::kQ6_K},
  };
  uint32_t seed = 1;
  for (const Spec& s : specs) {
    EXPECT_TRUE(w.AddTensor(s.name, s.shape, s.dtype).ok()) << s.name;
    const int64_t cols = s.shape.back();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < s.shape.size(); ++i) rows *= s.shape[i];
    out.names.push_back(s.name);
    out.data.push_back(IsQuantized(s.dtype) ? QuantizedBytes(s.dtype, rows, cols, seed++)
                                            : RandomBytes(w.TensorBytes(out.data.size()), seed++));
  }
  absl::Status st = w.Write(path, [&](size_t i, std::string* bytes) {
    *bytes = out.data[i];
    return absl::OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(GgufWriterTest, EveryMetadataKindAndTensorTypeRoundTrips) {
  const std::string path = TempPath("roundtrip");
  const Written written = WriteModelFile(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetInt("llama.block_count"), 2);
  EXPECT_EQ(*(*f)->GetInt("some.signed"), -5);
  EXPECT_EQ(*(*f)->GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_TRUE(*(*f)->GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(*(*f)->GetStringArray("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "<s>"}));
  EXPECT_EQ(*(*f)->GetIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(*(*f)->GetFloatArray("tokenizer.ggml.scores"), (std::vector<double>{0.5, -1.0, 0.0}));
  ASSERT_EQ((*f)->Names(), written.names);
  for (size_t i = 0; i < written.names.size(); ++i) {
    const TensorInfo* t = (*f)->Find(written.names[i]);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->unsupported.empty()) << t->unsupported;
    ASSERT_EQ(t->nbytes, written.data[i].size()) << t->name;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t->data), t->nbytes), written.data[i]) << t->name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 32, 0u) << t->name << " is not aligned in the mapping";
  }
  EXPECT_EQ((*f)->Find("q6_k.weight")->shape, (std::vector<int64_t>{2, 2, 256}));
  EXPECT_EQ((*f)->Find("q4_k.weight")->dtype, DType::kQ4_K);

  // Copy every value with its original type and every tensor: the same values and types.
  GgufWriter copy;
  for (const auto& [key, value] : (*f)->metadata()) copy.Copy(key, value);
  for (const std::string& name : (*f)->Names()) {
    const TensorInfo* t = (*f)->Find(name);
    ASSERT_TRUE(copy.AddTensor(name, t->shape, t->dtype).ok());
  }
  const std::string path2 = TempPath("copy");
  ASSERT_TRUE(copy.Write(path2,
                         [&](size_t i, std::string* bytes) {
                           const TensorInfo* t = (*f)->Find(written.names[i]);
                           bytes->assign(reinterpret_cast<const char*>(t->data), t->nbytes);
                           return absl::OkStatus();
                         })
                  .ok());
  auto g = GgufFile::Open(path2);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const auto& [key, value] : (*f)->metadata()) {
    const GgufValue& other = (*g)->metadata().at(key);
    EXPECT_EQ(other.type, value.type) << key;
    EXPECT_EQ(other.array_type, value.array_type) << key;
    EXPECT_EQ(other.value, value.value) << key;
  }
  std::remove(path.c_str());
  std::remove(path2.c_str());
}

TEST(GgufWriterTest, RejectsRowsThatAreNotWholeBlocksAndWrongByteCounts) {
  GgufWriter w;
  absl::Status s = w.AddTensor("x.weight", {4, 100}, DType::kQ4_K);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("x.weight"), std::string::npos) << s;
  EXPECT_NE(s.message().find("256"), std::string::npos) << s;
  ASSERT_TRUE(w.AddTensor("y.weight", {2, 32}, DType::kQ8_0).ok());
  const std::string path = TempPath("short-fill");
  s = w.Write(path, [](size_t, std::string* bytes) {
    bytes->assign(10, '\0');
    return absl::OkStatus();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("y.weight"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(path)) << "a failed write must leave no file";
}

TEST(GgufFileTest, TheTypeSummaryOfALoadableFileCountsEveryTypeAndWarnsOfNone) {
  const std::string path = TempPath("summary");
  WriteModelFile(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string summary = TensorTypeSummary(**f, /*list_tensors=*/false);
  size_t total = 0;
  for (const auto& name : (*f)->Names()) total += (*f)->Find(name)->nbytes;
  EXPECT_NE(summary.find(" q4_K ×1 ("), std::string::npos) << summary;
  EXPECT_NE(summary.find(absl::StrFormat("; %.2f MiB in all\n", total / 1048576.0)), std::string::npos) << summary;
  EXPECT_EQ(summary.find("not supported"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("cannot load"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("  q4_k.weight"), std::string::npos) << "no tensor lines unless asked: " << summary;
  std::remove(path.c_str());
}

TEST(GgufFileTest, TruncatedFileNamesTheTensorAndTheMissingBytes) {
  const std::string path = TempPath("truncated");
  WriteModelFile(path);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 100);
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("q6_k.weight"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("q6_K"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("truncated by"), std::string::npos) << f.status();
  std::remove(path.c_str());
}

// Rewrites one tensor's directory entry of a written file: its first dimension or its offset.
void PatchTensorInfo(const std::string& path, const std::string& name, int field, uint64_t value) {
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  std::string& s = *text;
  // Directory entry: u64 name length, name, u32 rank, rank × u64 dims, u32 type, u64 offset.
  std::string key(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(key.data(), &len, 8);
  key += name;
  const size_t at = s.find(key);
  ASSERT_NE(at, std::string::npos);
  size_t p = at + key.size();
  uint32_t rank;
  std::memcpy(&rank, s.data() + p, 4);
  p += 4;
  if (field == 0) {  // ne[0]
    std::memcpy(s.data() + p, &value, 8);
  } else {  // offset
    p += 8 * rank + 4;
    std::memcpy(s.data() + p, &value, 8);
  }
  ASSERT_TRUE(WriteStringToFile(path, s).ok());
}

TEST(GgufFileTest, RowsThatAreNotWholeBlocksAreRejectedWithTheTensorNamed) {
  const std::string path = TempPath("badrow");
  WriteModelFile(path);
  PatchTensorInfo(path, "q4_k.weight", 0, 500);  // 500 values per row: not whole 256-value blocks
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("q4_k.weight"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("rows of 500 values"), std::string::npos) << f.status();
  std::remove(path.c_str());
}

TEST(GgufFileTest, MisalignedTensorDataIsRejected) {
  const std::string path = TempPath("misaligned");
  WriteModelFile(path);
  PatchTensorInfo(path, "q8.weight", 1, 33);
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("q8.weight"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("alignment"), std::string::npos) << f.status();
  std::remove(path.c_str());
}

// Found by the GGUF fuzzer: a metadata array whose count the rest of the file cannot
// hold used to be allocated first (4 GiB for this one) and only then found short.
TEST(GgufFileTest, ArrayCountsBeyondTheFileAreRefusedBeforeAllocating) {
  std::string s = "GGUF";
  auto put = [&s](auto v) { s.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{3});  // version
  put(uint64_t{0});  // tensors
  put(uint64_t{1});  // metadata entries
  put(uint64_t{3});  // key length
  s += "arr";
  put(uint32_t{9});        // array
  put(uint32_t{8});        // of strings
  put(uint64_t{1} << 27);  // count: 134M strings, in a file of a few bytes
  put(uint64_t{1});
  s += "x";
  const std::string path = TempPath("huge-array");
  ASSERT_TRUE(WriteStringToFile(path, s).ok());
  auto f = GgufFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << f.status();
  EXPECT_NE(f.status().message().find("arr"), std::string::npos) << f.status();
  std::remove(path.c_str());
}

// A file with a tensor of a type Orca does not load (a Q3_K_M file's Q3_K, an IQ4_XS file's
// IQ4_NL fallbacks) still opens: the tensor is listed with the file's name of its type and
// its size, and using it fails naming both.
TEST(GgufFileTest, TensorsOfTypesOrcaDoesNotLoadAreListedWithTheirTypeAndSize) {
  for (const auto& [id, name, block_values, block_bytes] :
       {std::tuple<uint32_t, const char*, int64_t, int64_t>{11, "Q3_K", 256, 110},
        {20, "IQ4_NL", 32, 18},
        {23, "IQ4_XS", 256, 136},
        {10, "Q2_K", 256, 84},
        {27, "I64", 1, 8}}) {
    const int64_t cols = 512, rows = 3, data_bytes = rows * cols / block_values * block_bytes;
    std::string s = "GGUF";
    auto put = [&s](auto v) { s.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    put(uint32_t{3});  // version
    put(uint64_t{1});  // tensors
    put(uint64_t{0});  // metadata entries
    put(uint64_t{1});
    s += "w";
    put(uint32_t{2});  // rank
    put(uint64_t(cols));
    put(uint64_t(rows));
    put(id);
    put(uint64_t{0});  // offset
    s.resize((s.size() + 31) / 32 * 32, '\0');
    s += RandomBytes(data_bytes, id);
    const std::string path = TempPath(std::string("unsupported-") + name);
    ASSERT_TRUE(WriteStringToFile(path, s).ok());
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    const TensorInfo* t = (*f)->Find("w");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->unsupported_type, name);
    EXPECT_EQ(t->nbytes, static_cast<size_t>(data_bytes)) << name;
    EXPECT_EQ(t->data, nullptr);
    EXPECT_NE(t->unsupported.find(std::string("GGML type ") + name), std::string::npos) << t->unsupported;
    EXPECT_NE(t->unsupported.find("'w'"), std::string::npos) << t->unsupported;
    // `orca model info`: the type under its own name, its MiB, and the line that says it will not load.
    const std::string summary = TensorTypeSummary(**f, /*list_tensors=*/true);
    EXPECT_NE(summary.find(absl::StrFormat("tensor types: %s ×1 (%.2f MiB, not supported); %.2f MiB in all\n", name,
                                           data_bytes / 1048576.0, data_bytes / 1048576.0)),
              std::string::npos)
        << summary;
    EXPECT_NE(summary.find(absl::StrCat("  w [3, 512] ", name, " ", data_bytes, " bytes (")), std::string::npos)
        << summary;
    EXPECT_NE(summary.find(absl::StrCat("Orca cannot load tensors of type ", name, " (it loads F32")),
              std::string::npos)
        << summary;
    // One byte short: still listed, with no size it cannot have.
    ASSERT_TRUE(WriteStringToFile(path, s.substr(0, s.size() - 1)).ok());
    auto short_file = GgufFile::Open(path);
    ASSERT_TRUE(short_file.ok()) << short_file.status();
    EXPECT_EQ((*short_file)->Find("w")->nbytes, 0u) << name;
    std::remove(path.c_str());
  }
}

// The block sizes GgufFile knows for every ggml type agree with Orca's own for the types it loads.
TEST(GgufFileTest, GgmlBlockSizesAgreeWithTheLoadedTypes) {
  for (uint32_t id = 0; id < 64; ++id) {
    DType dtype;
    int64_t values = 0, bytes = 0;
    const bool known = GgufFile::GgmlBlockSize(id, &values, &bytes);
    if (!DTypeFromGgml(id, &dtype)) continue;
    ASSERT_TRUE(known) << GgufFile::GgmlTypeName(id);
    EXPECT_EQ(values, DTypeBlockElems(dtype)) << GgufFile::GgmlTypeName(id);
    EXPECT_EQ(static_cast<size_t>(bytes), DTypeRowBytes(dtype, values)) << GgufFile::GgmlTypeName(id);
  }
  int64_t values = 0, bytes = 0;
  EXPECT_FALSE(GgufFile::GgmlBlockSize(4, &values, &bytes)) << "Q4_2 was retired";
  EXPECT_FALSE(GgufFile::GgmlBlockSize(1000, &values, &bytes));
  EXPECT_EQ(GgufFile::GgmlTypeName(1000), "type#1000");
}

}  // namespace
}  // namespace orca::formats
