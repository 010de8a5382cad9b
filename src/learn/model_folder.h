// A model folder's files other than the weights' values: model.json (schema, SHA-256 of
// the other files, configuration, thresholds), tpe.json and templates.json. Kept
// apart from the torch code so that every build, the clang fuzz build included,
// reads and checks them (tests/fuzz/model_loader_fuzzer.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "learn/explanation_text.h"
#include "learn/root_cause.h"

namespace teller::learn {

// teller-model/2: the weights in weights.bin (learn/weights_file.h). Folders of
// teller-model/1 (a torch archive, weights.pt) are refused with the conversion.
inline constexpr const char* kModelSchema = "teller-model/2";
inline constexpr const char* kTorchArchiveSchema = "teller-model/1";
// Files whose checksums model.json carries.
inline constexpr std::array<const char*, 3> kModelFiles = {"tpe.json", "templates.json",
                                                           "weights.bin"};

struct ModelFolder {
  TrainOptions options;
  tpe::TpeVocabulary vocab;
  step_records::TemplateVocabulary templates;
  ExplanationVocabulary explanations;  // model.json "explanation_words"; marks only without
  float step_threshold = 0.5f;
  float token_threshold = 0.5f;
  double best_val_step_f1 = -1;
  int64_t train_records = 0;
  int64_t val_records = 0;
  std::string weights_path;  // checked against its checksum, not read
};

nlohmann::json ConfigToJson(const TrainOptions& options);
// Typed and bounded; `path` names the file in errors.
base::StatusOr<TrainOptions> ConfigFromJson(const nlohmann::json& config, const std::string& path);

// Verifies every file against the checksums in model.json, then reads the
// configuration (typed and bounded: a mistyped or oversized field is an error) and
// the vocabularies, and checks that they agree.
base::StatusOr<ModelFolder> ReadModelFolder(const std::string& folder);

// Models and files shipped with teller live in a models/ folder next to the binary's
// build or install tree (<bin>/models, <bin>/../models, <bin>/../share/teller/models)
// or in the source tree it was built from, looked up in that order.
inline constexpr const char* kShippedDefaultModel = "default";     // traces (and logs)
inline constexpr const char* kShippedLogsOnlyModel = "logs-only";  // log lines alone
// Traces whose operator names the default does not know (other GPUs, libraries, engines):
// trained on operator tokens (tpe/operator_token.h) over the paper preset and the real traces.
inline constexpr const char* kShippedOperatorTokenModel = "operator-tokens";
// The largest trace it is handed (events): it reads about 6 us an event on one core
// (docs/benchmarks.md: a 1 GB Kineto file, 1.5 M events, took 9.4 s), so a bigger
// trace would wait on it far longer than on the rules.
inline constexpr size_t kOperatorTokenModelMaxEvents = 300'000;
// The folder models/NAME when it holds a model.json; "" when none does.
std::string FindShippedModel(const std::string& name);
// The file models/NAME (e.g. diagnose-calibration.json); "" when none.
std::string FindShippedFile(const std::string& name);

}  // namespace teller::learn
