#pragma once
/// Fluent builder of OrcaDeployment objects (JSON) for the operator tests:
///
///   json cr = OrcaDeploymentBuilder("chat").Pipeline(2).Tensor(2).Replicas(2).Build();

#include <string>

#include "nlohmann/json.hpp"

namespace orca::k8s::testing {

class OrcaDeploymentBuilder {
 public:
  explicit OrcaDeploymentBuilder(std::string name = "demo", std::string ns = "team-a") {
    object_ = {{"apiVersion", "serving.orca.dev/v1alpha1"},
               {"kind", "OrcaDeployment"},
               {"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}, {"generation", 1}}},
               {"spec", {{"model", {{"uri", "synthetic://llama?layers=4&hidden=64&heads=4&kvHeads=2"}}}}}};
  }
  OrcaDeploymentBuilder& Uri(const std::string& uri) { return Set("/spec/model/uri", uri); }
  OrcaDeploymentBuilder& Replicas(int n) { return Set("/spec/replicas", n); }
  OrcaDeploymentBuilder& Pipeline(int n) { return Set("/spec/parallelism/pipeline", n); }
  OrcaDeploymentBuilder& Tensor(int n) { return Set("/spec/parallelism/tensor", n); }
  OrcaDeploymentBuilder& Generation(int64_t g) { return Set("/metadata/generation", g); }
  OrcaDeploymentBuilder& NoUid() {
    object_["metadata"].erase("uid");
    return *this;
  }
  /// Sets any field by JSON pointer ("/spec/scheduler/maxBatchSize").
  OrcaDeploymentBuilder& Set(const std::string& pointer, nlohmann::json value) {
    object_[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return *this;
  }
  OrcaDeploymentBuilder& Remove(const std::string& pointer) {
    const nlohmann::json::json_pointer p(pointer);
    object_[p.parent_pointer()].erase(p.back());
    return *this;
  }
  nlohmann::json Build() const { return object_; }

 private:
  nlohmann::json object_;
};

}  // namespace orca::k8s::testing
