// Model folder loader (learn::LoadModel in src/learn/root_cause). The input is the
// three text files of a model folder, model.json, tpe.json and templates.json,
// joined by NUL bytes; weights.pt is the shipped model's ($TELLER_FUZZ_MODEL, default
// models/default). Unless the input starts with '!', a model.json that parses gets
// the right checksums written in, so the fuzzer explores past the checksum gate.
// Any folder must load or be refused with a Status; what loads must agree with its
// configuration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/sha256.h"
#include "fuzz_util.h"
#include "learn/root_cause.h"

namespace {

const std::string& Weights() {
  static const std::string bytes = [] {
    const char* folder = std::getenv("TELLER_FUZZ_MODEL");
    const std::string path = std::string(folder ? folder : "models/default") + "/weights.pt";
    auto read = teller::base::ReadFile(path);
    FUZZ_CHECK(read.ok(), "cannot read %s (set TELLER_FUZZ_MODEL to a model folder)", path.c_str());
    return *read;
  }();
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const bool keep_checksums = !input.empty() && input.front() == '!';
  if (keep_checksums) input.remove_prefix(1);
  std::vector<std::string> parts;
  for (int i = 0; i < 2; ++i) {
    const size_t nul = input.find('\0');
    parts.emplace_back(input.substr(0, nul));
    input = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  }
  parts.emplace_back(input);

  static const std::string dir = [] {
    const std::string path = fuzz::ScratchDir() + "/model";
    std::filesystem::create_directories(path);
    return path;
  }();
  fuzz::WriteBytes(dir + "/tpe.json", parts[1]);
  fuzz::WriteBytes(dir + "/templates.json", parts[2]);
  fuzz::WriteBytes(dir + "/weights.pt", Weights());
  std::string model_json = parts[0];
  if (!keep_checksums) {
    nlohmann::json doc = nlohmann::json::parse(model_json, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_discarded() && doc.is_object()) {
      doc["sha256"] = {{"tpe.json", base::Sha256Hex(parts[1])},
                       {"templates.json", base::Sha256Hex(parts[2])},
                       {"weights.pt", base::Sha256Hex(Weights())}};
      model_json = doc.dump();
    }
  }
  fuzz::WriteBytes(dir + "/model.json", model_json);

  base::StatusOr<learn::TrainedModel> model = learn::LoadModel(dir);
  if (!model.ok()) return 0;
  const learn::ModelConfig& config = model->model.config();
  FUZZ_CHECK(config.vocab_size == static_cast<int64_t>(model->vocab.size()),
             "vocab_size %lld but %zu tokens", static_cast<long long>(config.vocab_size),
             model->vocab.size());
  FUZZ_CHECK(config.template_count == static_cast<int64_t>(model->templates.size()),
             "template_count differs from templates.json");
  FUZZ_CHECK(model->step_threshold >= 0 && model->step_threshold <= 1, "step threshold");
  return 0;
}
