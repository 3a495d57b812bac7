// A structured-output constraint sent straight to the scheduler's gRPC port —
// not through a gateway, which compiles and refuses it — with real processes:
// a JSON Schema nested 6,000 deep used to reach the worker, whose compile
// recursed until the process died, failing every request on the engine. Now
// the scheduler compiles the constraint before admitting it: the sender gets
// INVALID_ARGUMENT, a request generating at the same time completes, the
// worker stays alive, and a valid constraint is still enforced afterwards.

#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "services/gateway/testing/byte_level_model.h"
#include "tests/integration/cluster.h"
#include "tests/unit/engine/test_models.h"

namespace orca::testing {
namespace {

// A small Llama over the byte-level test tokenizer (token id = byte, 256 = EOS), so
// the worker can build the vocabulary structured outputs need.
std::string ModelWithTokenizer() {
  engine::SyntheticModelOptions o = engine::testing::SmallLlama(DType::kF32);
  o.vocab_size = gateway::testing::kByteLevelVocabSize;
  o.eos_token_id = gateway::testing::kByteLevelEosId;
  o.max_position = 1024;  // the 1,003 tokens of the normal request
  const std::string dir = engine::testing::SyntheticModel(o);
  std::ofstream(dir + "/tokenizer.json") << gateway::testing::ByteLevelTokenizerJson();
  std::ofstream(dir + "/tokenizer_config.json") << gateway::testing::ByteLevelTokenizerConfigJson();
  return dir;
}

std::string DeepSchema(int depth) {
  std::string schema;
  for (int i = 0; i < depth; ++i) schema += R"({"type":"array","items":)";
  schema += R"({"type":"integer"})";
  schema += std::string(depth, '}');
  return schema;
}

// Waits (a bounded while) until a request is generating; a tiny model may also finish it first,
// which the test tolerates: what it checks holds either way.
void WaitUntilGenerating(v1::Scheduler::Stub* stub) {
  for (int i = 0; i < 250; ++i) {
    grpc::ClientContext ctx;
    v1::SchedulerStats s;
    if (stub->GetStats(&ctx, v1::StatsRequest(), &s).ok() && s.num_requests_running() == 1) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(HostileConstraintTest, DeepSchemaToTheSchedulerIsRefusedWhileTheWorkerKeepsServing) {
  ClusterOptions co;
  co.model = ModelWithTokenizer();
  co.pipeline = 1;
  co.n_slots = 4096;  // a request may take half (the per-request KV share)
  co.name = "hostile-constraint";
  Cluster cluster(co);
  ASSERT_TRUE(cluster.Start()) << cluster.Logs();
  auto stub = cluster.NewStub();

  auto normal = std::async(std::launch::async, [&stub] { return Generate(stub.get(), {1, 2, 3}, 1000); });
  WaitUntilGenerating(stub.get());
  v1::SamplingParams deep;
  deep.mutable_structured()->set_kind(v1::StructuredOutput::KIND_JSON_SCHEMA);
  deep.mutable_structured()->set_schema(DeepSchema(6000));
  const GenerateResult refused = Generate(stub.get(), {4, 5, 6}, 16, deep);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << refused.status.error_message() << " / finish " << refused.finish << ": " << refused.error;
  EXPECT_NE(refused.status.error_message().find("nesting deeper than 128 levels"), std::string::npos)
      << refused.status.error_message();
  EXPECT_TRUE(refused.tokens.empty());

  const GenerateResult served = normal.get();
  EXPECT_TRUE(served.status.ok()) << served.status.error_message() << "\n" << cluster.Logs();
  EXPECT_EQ(served.finish, v1::FINISH_REASON_LENGTH) << served.error;
  EXPECT_EQ(served.tokens.size(), 1000u);
  EXPECT_TRUE(cluster.worker(0).Alive()) << cluster.worker(0).State() << "\n" << cluster.Logs();

  // The engine still serves, constraints included: an integer, byte by byte.
  v1::SamplingParams integer;
  integer.mutable_structured()->set_kind(v1::StructuredOutput::KIND_JSON_SCHEMA);
  integer.mutable_structured()->set_schema(R"({"type":"integer"})");
  const GenerateResult guided = Generate(stub.get(), {7, 8}, 8, integer, /*ignore_eos=*/false);
  ASSERT_TRUE(guided.status.ok()) << guided.status.error_message() << "\n" << cluster.Logs();
  EXPECT_NE(guided.finish, v1::FINISH_REASON_ERROR) << guided.error;
  ASSERT_FALSE(guided.tokens.empty());
  for (int32_t t : guided.tokens) {
    EXPECT_TRUE(t == gateway::testing::kByteLevelEosId || t == '-' || (t >= '0' && t <= '9')) << "token " << t;
  }
  EXPECT_EQ(SettledStats(stub.get()).kv_slots_used(), 0);
}

}  // namespace
}  // namespace orca::testing
