// The gateway's gRPC API in-process: orca.v1.Generation (streaming generate,
// tokenize, detokenize, list models), gRPC health checking and reflection.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orca/v1/generation.grpc.pb.h"
#include "tests/unit/gateway/gateway_test_util.h"

namespace orca::gateway {
namespace {

using testing::GatewayFixture;
using ::testing::HasSubstr;

std::unique_ptr<orca::v1::Generation::Stub> Connect(GatewayFixture& f) {
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(f.gateway().grpc_port()), grpc::InsecureChannelCredentials());
  return orca::v1::Generation::NewStub(channel);
}

struct Collected {
  std::vector<orca::v1::TextGenerateResponse> messages;
  grpc::Status status;
  std::string Text(int index) const {
    std::string text;
    for (const auto& m : messages) {
      if (m.index() == index) text += m.text();
    }
    return text;
  }
};

Collected Generate(orca::v1::Generation::Stub& stub, const orca::v1::TextGenerateRequest& request,
                   const std::string& api_key = "") {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (!api_key.empty()) context.AddMetadata("authorization", "Bearer " + api_key);
  Collected out;
  auto reader = stub.Generate(&context, request);
  orca::v1::TextGenerateResponse message;
  while (reader->Read(&message)) out.messages.push_back(message);
  out.status = reader->Finish();
  return out;
}

TEST(GatewayGrpcTest, GenerateStreamsTextAndFinishes) {
  GatewayFixture f;
  auto stub = Connect(f);
  orca::v1::TextGenerateRequest request;
  request.set_prompt("Hello");
  request.set_max_new_tokens(5);
  request.mutable_sampling()->set_logprobs(true);
  Collected result = Generate(*stub, request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_FALSE(result.messages.empty());
  const auto& last = result.messages.back();
  EXPECT_EQ(last.finish_reason(), orca::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.prompt_tokens(), 5);
  EXPECT_EQ(last.completion_tokens(), 5);
  EXPECT_FALSE(last.request_id().empty());
  const auto scheduled = f.scheduler().requests()[0];
  std::string expected;
  for (int i = 0; i < 5; ++i) expected.push_back(static_cast<char>(f.scheduler().TokenAt(scheduled, i)));
  EXPECT_EQ(result.Text(0), expected);
  int tokens = 0;
  for (const auto& m : result.messages) tokens += m.tokens_size();
  EXPECT_EQ(tokens, 5);
  // Proto defaults mean greedy decoding.
  EXPECT_EQ(scheduled.sampling().temperature(), 0.0f);
}

// Several long streams at once, one message per token: the writes start on the pipeline's
// thread and complete on gRPC's, and each call ends with a Finish racing its last writes'
// completions. Every stream gets all its tokens, in order, and ends OK (under
// ThreadSanitizer, scripts/tsan.sh, this is where the stream reactors' hand-offs run most).
TEST(GatewayGrpcTest, ConcurrentLongStreamsEachGetEveryToken) {
  constexpr int kStreams = 4, kTokens = 800;
  GatewayFixture f;
  auto stub = Connect(f);
  std::vector<Collected> results(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i)
    clients.emplace_back([&, i] {
      orca::v1::TextGenerateRequest request;
      request.set_prompt("x");
      request.set_max_new_tokens(kTokens);
      results[i] = Generate(*stub, request);
    });
  for (auto& c : clients) c.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << "stream " << i << ": " << results[i].status.error_message();
    ASSERT_FALSE(results[i].messages.empty());
    const auto& last = results[i].messages.back();
    EXPECT_EQ(last.completion_tokens(), kTokens) << "stream " << i;
    EXPECT_EQ(last.finish_reason(), orca::v1::FINISH_REASON_LENGTH) << "stream " << i;
    EXPECT_GT(results[i].messages.size(), 1u) << "stream " << i;
  }
}

TEST(GatewayGrpcTest, ChatMessagesNChoicesAndStopStrings) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.script = testing::Bytes("yes, done");
  GatewayFixture f(config);
  auto stub = Connect(f);
  orca::v1::TextGenerateRequest request;
  auto* message = request.mutable_messages()->add_messages();
  message->set_role("user");
  message->set_content("ok?");
  request.set_max_new_tokens(9);
  request.set_n(2);
  request.add_stop(",");
  Collected result = Generate(*stub, request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.Text(0), "yes");
  EXPECT_EQ(result.Text(1), "yes");
  int finished = 0;
  for (const auto& m : result.messages) finished += m.finish_reason() == orca::v1::FINISH_REASON_STOP ? 1 : 0;
  EXPECT_EQ(finished, 2);
}

TEST(GatewayGrpcTest, InvalidInputUnknownModelAndAuth) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.gateway.api_keys = {"k1"};
  GatewayFixture f(config);
  auto stub = Connect(f);
  orca::v1::TextGenerateRequest request;
  request.set_prompt("x");
  EXPECT_EQ(Generate(*stub, request).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  request.mutable_sampling()->set_temperature(-1);
  Collected bad = Generate(*stub, request, "k1");
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.status.error_message(), HasSubstr("temperature"));

  request.clear_sampling();
  request.set_max_new_tokens(5000);
  Collected too_long = Generate(*stub, request, "k1");
  EXPECT_EQ(too_long.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(too_long.status.error_message(), HasSubstr("maximum context length is 1024"));

  request.set_max_new_tokens(2);
  orca::v1::TextGenerateRequest chat;
  orca::v1::ChatMessage* m = chat.mutable_messages()->add_messages();
  m->set_role("wizard");
  m->set_content("hi");
  Collected wizard = Generate(*stub, chat, "k1");
  EXPECT_EQ(wizard.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wizard.status.error_message(), HasSubstr("'messages[0].role' is 'wizard'"));

  request.set_model("other");
  EXPECT_EQ(Generate(*stub, request, "k1").status.error_code(), grpc::StatusCode::NOT_FOUND);
  request.clear_input();
  request.clear_model();
  EXPECT_EQ(Generate(*stub, request, "k1").status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(GatewayGrpcTest, CancellingTheCallCancelsAtTheScheduler) {
  GatewayFixture::Config config = GatewayFixture::DefaultConfig();
  config.scheduler.iteration_interval = absl::Milliseconds(5);
  GatewayFixture f(config);
  auto stub = Connect(f);
  orca::v1::TextGenerateRequest request;
  request.set_prompt("x");
  request.set_max_new_tokens(900);
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, request);
  orca::v1::TextGenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));
  context.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().num_cancelled() == 1; }, absl::Seconds(10)));
  EXPECT_TRUE(f.scheduler().WaitFor([&] { return f.scheduler().kv_slots_used() == 0; }, absl::Seconds(10)));
}

TEST(GatewayGrpcTest, TokenizeDetokenizeListModels) {
  GatewayFixture f;
  auto stub = Connect(f);
  grpc::ClientContext c1;
  orca::v1::TokenizeRequest tokenize;
  tokenize.set_text("hi");
  orca::v1::TokenizeResponse tokens;
  ASSERT_TRUE(stub->Tokenize(&c1, tokenize, &tokens).ok());
  EXPECT_THAT(std::vector<int32_t>(tokens.token_ids().begin(), tokens.token_ids().end()),
              ::testing::ElementsAre('h', 'i'));
  EXPECT_EQ(tokens.count(), 2);
  EXPECT_EQ(tokens.max_model_len(), 1024);

  grpc::ClientContext c2;
  orca::v1::DetokenizeRequest detokenize;
  detokenize.add_token_ids('o');
  detokenize.add_token_ids('k');
  orca::v1::DetokenizeResponse text;
  ASSERT_TRUE(stub->Detokenize(&c2, detokenize, &text).ok());
  EXPECT_EQ(text.text(), "ok");

  // Special tokens are kept unless the request asks to skip them (HTTP /detokenize, HF and vLLM alike).
  detokenize.add_token_ids(testing::kByteLevelEosId);
  grpc::ClientContext c2b;
  ASSERT_TRUE(stub->Detokenize(&c2b, detokenize, &text).ok());
  EXPECT_EQ(text.text(), "ok<|endoftext|>");
  detokenize.set_skip_special_tokens(true);
  grpc::ClientContext c2c;
  ASSERT_TRUE(stub->Detokenize(&c2c, detokenize, &text).ok());
  EXPECT_EQ(text.text(), "ok");

  grpc::ClientContext c3;
  detokenize.add_token_ids(100000);
  EXPECT_EQ(stub->Detokenize(&c3, detokenize, &text).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext c4;
  orca::v1::ListModelsResponse models;
  ASSERT_TRUE(stub->ListModels(&c4, orca::v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 1);
  EXPECT_EQ(models.models(0).id(), "byte-model");
  EXPECT_EQ(models.models(0).owned_by(), "orca");
}

// Calls a unary method with raw protobuf bytes.
grpc::Status RawUnary(grpc::Channel* channel, const std::string& method, const std::string& request,
                      std::string* response) {
  grpc::GenericStub stub(channel->shared_from_this());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  auto call = stub.PrepareUnaryCall(&context, method, request_buffer, &cq);
  call->StartCall();
  grpc::ByteBuffer response_buffer;
  grpc::Status status;
  call->Finish(&response_buffer, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  std::vector<grpc::Slice> slices;
  if (status.ok() && response_buffer.Dump(&slices).ok()) {
    for (const auto& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

TEST(GatewayGrpcTest, HealthCheckingFollowsSchedulerReadiness) {
  GatewayFixture f;
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(f.gateway().grpc_port()), grpc::InsecureChannelCredentials());
  std::string response;
  // grpc.health.v1.HealthCheckRequest{service: ""} is empty; SERVING is `08 01`.
  ASSERT_TRUE(RawUnary(channel.get(), "/grpc.health.v1.Health/Check", "", &response).ok());
  EXPECT_EQ(response, std::string("\x08\x01", 2));
  f.scheduler().SetReady(false);
  EXPECT_TRUE(f.scheduler().WaitFor(
      [&] {
        std::string r;
        return RawUnary(channel.get(), "/grpc.health.v1.Health/Check", "", &r).ok() &&
               r == std::string("\x08\x02", 2);  // NOT_SERVING
      },
      absl::Seconds(10)));
}

TEST(GatewayGrpcTest, ReflectionListsTheGenerationService) {
  GatewayFixture f;
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(f.gateway().grpc_port()), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  // ServerReflectionRequest{list_services: "*"}: field 7, length-delimited.
  grpc::Slice slice(std::string("\x3a\x01*", 3));
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_THAT(bytes, HasSubstr("orca.v1.Generation"));
  EXPECT_THAT(bytes, HasSubstr("grpc.health.v1.Health"));
  context.TryCancel();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
}

}  // namespace
}  // namespace orca::gateway
