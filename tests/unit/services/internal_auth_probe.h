#pragma once
// Calls every method of a gRPC service by name, whatever its shape (unary or
// streaming), with one empty request message and the given authorization
// metadata, and returns each call's status. Methods come from the service's
// descriptor, so an RPC added later is probed without touching the tests.
// ExpectEveryMethodRefuses runs the refusal table of an internal port.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace orca::testing {

/// Status of `/<service>/<method>` called with `authorization` ("" = none).
inline grpc::Status CallByName(grpc::GenericStub& stub, const std::string& method, const std::string& authorization) {
  grpc::ClientContext ctx;
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&] { return cq.Next(&tag, &ok); };
  call->StartCall(reinterpret_cast<void*>(1));
  step();
  grpc::Slice nothing("");
  grpc::ByteBuffer empty(&nothing, 1);  // an empty message: every field at its default
  call->Write(empty, reinterpret_cast<void*>(2));
  step();
  call->WritesDone(reinterpret_cast<void*>(3));
  step();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  step();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

/// Every method of `service_full_name` (e.g. "orca.v1.Worker") called through
/// `channel` with `authorization`: method name -> status.
inline std::map<std::string, grpc::Status> CallEveryMethod(const std::shared_ptr<grpc::Channel>& channel,
                                                           const std::string& service_full_name,
                                                           const std::string& authorization) {
  std::map<std::string, grpc::Status> out;
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_full_name);
  if (service == nullptr) return out;
  grpc::GenericStub stub(channel);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name = service->method(i)->name();
    out[name] = CallByName(stub, "/" + service_full_name + "/" + name, authorization);
  }
  return out;
}

/// A caller an internal port must refuse: the "authorization" it sends ("" =
/// none) and a piece of the message its refusal must carry.
struct RefusedCaller {
  const char* name;
  std::string authorization;
  const char* message;
};

/// Calls every method of `service_full_name` through `channel` as each of
/// `callers` and expects each call UNAUTHENTICATED with the caller's message
/// and never echoing `token`; `methods` are the service's method names (a
/// method added or removed fails the count).
inline void ExpectEveryMethodRefuses(const std::shared_ptr<grpc::Channel>& channel,
                                     const std::string& service_full_name, const std::vector<RefusedCaller>& callers,
                                     const std::string& token, const std::vector<std::string>& methods) {
  for (const RefusedCaller& c : callers) {
    const auto statuses = CallEveryMethod(channel, service_full_name, c.authorization);
    ASSERT_EQ(statuses.size(), methods.size()) << absl::StrJoin(methods, ", ");
    for (const auto& [method, status] : statuses) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << c.name << ": " << method;
      EXPECT_NE(status.error_message().find(c.message), std::string::npos)
          << c.name << ": " << method << ": " << status.error_message();
      EXPECT_EQ(status.error_message().find(token), std::string::npos) << "a refusal never echoes the token";
    }
  }
}

}  // namespace orca::testing
