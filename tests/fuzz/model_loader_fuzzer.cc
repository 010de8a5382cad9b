// Model folder reader (learn::ReadModelFolder in src/learn/model_folder: everything
// `teller diagnose --learned-model` checks before torch reads the weights). The
// input is the three text files of a model folder, model.json, tpe.json and
// templates.json, joined by NUL bytes; weights.bin is a fixed placeholder. Unless the
// input starts with '!', a model.json that parses gets the right checksums written
// in, so the fuzzer explores past the checksum gate. Any folder must load or be
// refused with a Status; what loads must agree with its configuration.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "fuzz_util.h"
#include "learn/model_folder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  static const std::string dir = [] {
    const std::string path = fuzz::ScratchDir() + "/model";
    std::filesystem::create_directories(path);
    return path;
  }();
  static const std::string weights = "placeholder weights";
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

  fuzz::WriteBytes(dir + "/tpe.json", parts[1]);
  fuzz::WriteBytes(dir + "/templates.json", parts[2]);
  fuzz::WriteBytes(dir + "/weights.bin", weights);
  std::string model_json = parts[0];
  if (!keep_checksums) {
    nlohmann::json doc = nlohmann::json::parse(model_json, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_discarded() && doc.is_object()) {
      doc["sha256"] = {{"tpe.json", base::Sha256Hex(parts[1])},
                       {"templates.json", base::Sha256Hex(parts[2])},
                       {"weights.bin", base::Sha256Hex(weights)}};
      model_json = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  fuzz::WriteBytes(dir + "/model.json", model_json);

  base::StatusOr<learn::ModelFolder> folder = learn::ReadModelFolder(dir);
  if (!folder.ok()) return 0;
  const learn::TrainOptions& options = folder->options;
  FUZZ_CHECK(options.model.vocab_size == static_cast<int64_t>(folder->vocab.size()),
             "vocab_size %lld but %zu tokens", static_cast<long long>(options.model.vocab_size),
             folder->vocab.size());
  FUZZ_CHECK(options.model.template_count == static_cast<int64_t>(folder->templates.size()),
             "template_count differs from templates.json");
  FUZZ_CHECK(options.model.dim > 0 && options.model.dim % options.model.heads == 0,
             "dim and heads");
  FUZZ_CHECK(folder->step_threshold >= 0 && folder->step_threshold <= 1, "step threshold");
  // The configuration written back (as SaveModel writes it) reads to the same one.
  nlohmann::json doc = nlohmann::json::parse(model_json);
  const auto dump = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string config = dump(learn::ConfigToJson(options));
  doc["config"] = nlohmann::json::parse(config);
  fuzz::WriteBytes(dir + "/model.json", dump(doc));
  base::StatusOr<learn::ModelFolder> again = learn::ReadModelFolder(dir);
  FUZZ_CHECK(again.ok(), "a written configuration does not read: %s",
             again.status().ToString().c_str());
  FUZZ_CHECK(dump(learn::ConfigToJson(again->options)) == config,
             "configuration does not round-trip");
  return 0;
}
