// A .safetensors file: header length, JSON header, offsets; every tensor's bytes
// are touched so an offset outside the file is an ASan report.
#include <cstdint>

#include "core/formats/safetensors_file.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const orca::fuzz::InputFile file(data, size);
  auto st = orca::formats::SafetensorsSource::Open(file.path());
  if (!st.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*st)->Names()) {
    const orca::formats::TensorInfo* t = (*st)->Find(name);
    if (t == nullptr || t->data == nullptr || t->nbytes == 0) continue;
    sink = sink + t->data[0] + t->data[t->nbytes - 1];
  }
  return 0;
}
