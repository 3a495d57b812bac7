// Loading checkpoints: formats, partitions, and precise errors for corrupt,
// truncated or mismatched files.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/mapped_file.h"
#include "core/engine/engine.h"
#include "core/engine/model_weights.h"
#include "core/formats/gguf_file.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/unit/engine/test_models.h"

namespace orca::engine {
namespace {

std::string CopyModel(const std::string& src, const std::string& name) {
  const std::string dst = testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
  ::mkdir(dst.c_str(), 0755);
  for (const char* f : {"config.json", "model.safetensors"}) {
    std::ifstream in(src + "/" + f, std::ios::binary);
    std::ofstream out(dst + "/" + f, std::ios::binary);
    out << in.rdbuf();
  }
  return dst;
}

absl::Status Load(const std::string& path) {
  Engine::Options o;
  o.model_path = path;
  o.n_slots = 64;
  return Engine::Create(o).status();
}

TEST(ModelLoadingTest, TruncatedSafetensorsNamesFileAndTensor) {
  const std::string dir = CopyModel(testing::SyntheticModel(testing::SmallLlama()), "trunc");
  const std::string file = dir + "/model.safetensors";
  auto content = ReadFileToString(file);
  ASSERT_TRUE(content.ok());
  ASSERT_TRUE(WriteStringToFile(file, content->substr(0, content->size() - 1000)).ok());
  absl::Status s = Load(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("model.safetensors"), std::string::npos) << s;
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s;
  EXPECT_NE(s.message().find("tensor '"), std::string::npos) << s;
}

TEST(ModelLoadingTest, GarbageHeaderIsRejected) {
  const std::string dir = CopyModel(testing::SyntheticModel(testing::SmallLlama()), "garbage");
  ASSERT_TRUE(
      WriteStringToFile(dir + "/model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{{{", 11)).ok());
  absl::Status s = Load(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST(ModelLoadingTest, ShapeMismatchNamesTensorAndExpectedShape) {
  const std::string dir = CopyModel(testing::SyntheticModel(testing::SmallLlama()), "mismatch");
  // Claim a bigger hidden size than the weights have.
  auto cfg = ReadFileToString(dir + "/config.json");
  ASSERT_TRUE(cfg.ok());
  std::string c = *cfg;
  c.replace(c.find("\"intermediate_size\": 96"), 23, "\"intermediate_size\": 128");
  ASSERT_TRUE(WriteStringToFile(dir + "/config.json", c).ok());
  absl::Status s = Load(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mlp.gate_proj.weight"), std::string::npos) << s;
  EXPECT_NE(s.message().find("has shape [96, 64]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("expected [128, 64]"), std::string::npos) << s;
}

TEST(ModelLoadingTest, MissingFilesAndBadConfigAreClear) {
  EXPECT_EQ(Load("/nonexistent/model").code(), absl::StatusCode::kInvalidArgument);
  const std::string dir = CopyModel(testing::SyntheticModel(testing::SmallLlama()), "badcfg");
  ASSERT_TRUE(WriteStringToFile(dir + "/config.json", "{\"model_type\": \"llama\", \"hidden_size\": \"big\"}").ok());
  absl::Status s = Load(dir);
  EXPECT_NE(s.message().find("'hidden_size' must be an integer"), std::string::npos) << s;
  ASSERT_TRUE(WriteStringToFile(dir + "/config.json", "{\"model_type\": \"bert\"}").ok());
  EXPECT_EQ(Load(dir).code(), absl::StatusCode::kUnimplemented);
}

// Issue 11: values that would break the model at run time are refused when it
// loads, naming the file and the field.
TEST(ModelLoadingTest, RopeThetaZeroAndOutOfVocabularySpecialIdsAreRejected) {
  const std::string dir = CopyModel(testing::SyntheticModel(testing::SmallLlama()), "badids");
  auto original = ReadFileToString(dir + "/config.json");
  ASSERT_TRUE(original.ok());
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = nlohmann::json::parse(*original);
    j[key] = value;
    EXPECT_TRUE(WriteStringToFile(dir + "/config.json", j.dump()).ok());
    return Load(dir);
  };
  absl::Status s = with("rope_theta", 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(dir + "/config.json: rope_theta must be a positive number, got 0"), std::string::npos)
      << s;
  // RoPE scaling whose formula would divide by zero (llama3 with equal frequency factors, a zero factor).
  s = with("rope_scaling",
           {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 2.0}, {"high_freq_factor", 2.0}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(dir + "/config.json: llama3 rope_scaling needs positive, different low_freq_factor and "
                                   "high_freq_factor"),
            std::string::npos)
      << s;
  s = with("rope_scaling", {{"type", "linear"}, {"factor", 0.0}});
  EXPECT_NE(s.message().find(dir + "/config.json: rope_scaling factor must be a positive number, got 0"),
            std::string::npos)
      << s;
  s = with("eos_token_id", nlohmann::json::array({2, 1000000000000LL}));
  EXPECT_NE(s.message().find("config.json: eos_token_id"), std::string::npos) << s;
  EXPECT_NE(s.message().find("outside the vocabulary (vocab_size 300)"), std::string::npos) << s;
  s = with("bos_token_id", 300);
  EXPECT_NE(s.message().find("config.json: bos_token_id 300 is outside the vocabulary (vocab_size 300)"),
            std::string::npos)
      << s;
  ASSERT_TRUE(WriteStringToFile(dir + "/config.json", *original).ok());
  ASSERT_TRUE(WriteStringToFile(dir + "/generation_config.json", "{\"eos_token_id\": [2, 4000]}").ok());
  s = Load(dir);
  EXPECT_NE(s.message().find(dir + "/generation_config.json: eos_token_id 4000 is outside the vocabulary"),
            std::string::npos)
      << s;
}

TEST(ModelLoadingTest, CorruptGgufIsRejected) {
  const std::string path = testing::TempDir() + "/bad-" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(WriteStringToFile(path, std::string("GGUF\x03\x00\x00\x00\xff\xff", 10)).ok());
  auto g = formats::GgufFile::Open(path);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("truncated or corrupt"), std::string::npos) << g.status();
  const std::string real = testing::SharedModelsDir() + "/stories260K.gguf";
  auto content = ReadFileToString(real);
  if (!content.ok()) {
    std::filesystem::remove(path);
    return;
  }
  ASSERT_TRUE(WriteStringToFile(path, content->substr(0, content->size() / 2)).ok());
  absl::Status s = Load(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("but the file has"), std::string::npos) << s;  // names the tensor and the bytes
  std::filesystem::remove(path);
}

TEST(ModelLoadingTest, PartitionsLoadOnlyTheirLayersAndShard) {
  const std::string path = testing::SyntheticModel(testing::SmallLlama());
  auto ckpt = Checkpoint::Open(path);
  ASSERT_TRUE(ckpt.ok());
  // Row-major weights (no packing at upload): the slice is a view of the mapping.
  kernels::CpuBackend::Options bo;
  bo.pack_weights = false;
  auto backend = kernels::CpuBackend::Create(bo);
  ModelWeights::Options o;
  o.partition = Partition::ForStage(1, 2, 3, /*tp_rank=*/1, /*tp_size=*/2);
  auto w = ModelWeights::Load(**ckpt, o, backend.get());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->num_local_layers(), 1);  // layers [2, 3)
  EXPECT_EQ((*w)->partition().layer_begin, 2);
  EXPECT_TRUE((*w)->token_embedding().empty());  // not the first stage: no lookup table
  // The vocabulary-parallel head: rank 1 holds the tied embedding's rows [150, 300) only.
  EXPECT_TRUE((*w)->vocab_parallel_head());
  EXPECT_EQ((*w)->head_vocab().begin, 150);
  EXPECT_EQ((*w)->head_vocab().size, 150);
  EXPECT_EQ((*w)->lm_head().n, 150);
  EXPECT_EQ((*w)->lm_head().ld, 64);                 // a view of the mapped rows
  EXPECT_EQ((*w)->layer(0).q.n, 32);                 // 2 of 4 heads × 16
  EXPECT_EQ((*w)->layer(0).o.k, 32);                 // row-parallel slice
  EXPECT_EQ((*w)->layer(0).o.ld, 64);                // a strided view of the mapped tensor: no copy
  EXPECT_LT((*w)->owned_bytes(), 4096u);             // only norms and RoPE tables are copied
  o.partition = Partition::ForStage(0, 1, 3, 0, 3);  // 3 does not divide 4 heads
  EXPECT_EQ(ModelWeights::Load(**ckpt, o, backend.get()).status().code(), absl::StatusCode::kInvalidArgument);
  // The default backend packs the shard's matrices once at load: no row-major copy is kept.
  auto packing = kernels::CpuBackend::Create({});
  o.partition = Partition::ForStage(1, 2, 3, /*tp_rank=*/1, /*tp_size=*/2);
  auto packed = ModelWeights::Load(**ckpt, o, packing.get());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_GT((*packed)->packed_bytes(), 0u);
  EXPECT_LT((*packed)->owned_bytes(), 4096u);
}

TEST(ModelLoadingTest, WeightsOfTheComputeDtypeAreUsedInPlace) {
  auto ckpt = Checkpoint::Open(testing::SyntheticModel(testing::SmallLlama(DType::kBF16)));
  ASSERT_TRUE(ckpt.ok());
  kernels::CpuBackend::Options bo;
  bo.pack_weights = false;  // row-major weights, used where they are
  auto backend = kernels::CpuBackend::Create(bo);
  ModelWeights::Options o;
  o.partition = Partition::Whole(3);
  auto same = ModelWeights::Load(**ckpt, o, backend.get());
  ASSERT_TRUE(same.ok());
  const formats::TensorInfo* q = (*ckpt)->tensors().Find("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ((*same)->layer(0).q.data, q->data);  // points into the mapping
  o.dtype = DType::kF32;
  auto converted = ModelWeights::Load(**ckpt, o, backend.get());
  ASSERT_TRUE(converted.ok());
  EXPECT_NE((*converted)->layer(0).q.data, q->data);
  EXPECT_GT((*converted)->owned_bytes(), (*same)->owned_bytes() + (*same)->mapped_bytes());
}

}  // namespace
}  // namespace orca::engine

namespace orca::engine {
namespace {

// Splits a single-file checkpoint into two shards plus model.safetensors.index.json.
void Shard(const std::string& src, const std::string& dst) {
  ::mkdir(dst.c_str(), 0755);
  auto config = ReadFileToString(src + "/config.json");
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(WriteStringToFile(dst + "/config.json", *config).ok());
  auto file = ReadFileToString(src + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  uint64_t header_len;
  std::memcpy(&header_len, file->data(), 8);
  const nlohmann::json header = nlohmann::json::parse(file->substr(8, header_len));
  const std::string data = file->substr(8 + header_len);
  nlohmann::json shard_header[2], index;
  std::string shard_data[2];
  int i = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const int s = i++ % 2;
    const uint64_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
    nlohmann::json e = entry;
    e["data_offsets"] = {shard_data[s].size(), shard_data[s].size() + (end - begin)};
    shard_header[s][name] = e;
    shard_data[s] += data.substr(begin, end - begin);
    index["weight_map"][name] = s == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s) {
    std::string h = shard_header[s].dump();
    h.append((8 - h.size() % 8) % 8, ' ');
    const uint64_t len = h.size();
    std::string out(reinterpret_cast<const char*>(&len), 8);
    out += h + shard_data[s];
    ASSERT_TRUE(WriteStringToFile(
                    dst + (s == 0 ? "/model-00001-of-00002.safetensors" : "/model-00002-of-00002.safetensors"), out)
                    .ok());
  }
  ASSERT_TRUE(WriteStringToFile(dst + "/model.safetensors.index.json", index.dump()).ok());
}

TEST(ModelLoadingTest, ShardedCheckpointGivesTheSameLogits) {
  const std::string single = testing::SyntheticModel(testing::SmallLlama());
  const std::string sharded = testing::TempDir() + "/sharded-" + std::to_string(::getpid());
  Shard(single, sharded);
  std::vector<float> logits[2];
  int which = 0;
  for (const std::string& path : {single, sharded}) {
    Engine::Options o;
    o.model_path = path;
    o.n_slots = 64;
    o.keep_logits = true;
    auto engine = Engine::Create(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    StepInput in;
    in.seqs.push_back({1, {3, 1, 4, 1, 5}, 0, true, SequenceSetup{8, {}, {}}});
    StepOutput out;
    ASSERT_TRUE((*engine)->Step(in, nullptr, &out).ok());
    logits[which++] = out.logits;
  }
  EXPECT_EQ(logits[0], logits[1]);
  // A shard the index names but that is missing is an error naming it.
  ASSERT_EQ(std::remove((sharded + "/model-00002-of-00002.safetensors").c_str()), 0);
  absl::Status s = Load(sharded);
  EXPECT_NE(s.message().find("model-00002-of-00002.safetensors"), std::string::npos) << s;
}

}  // namespace
}  // namespace orca::engine
