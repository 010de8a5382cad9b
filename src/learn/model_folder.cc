#include "learn/model_folder.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "base/file_util.h"
#include "base/sha256.h"
#include "learn/weights_file.h"

namespace teller::learn {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Reads j[key] into *value when present; throws std::invalid_argument when the
// value has another type or does not fit (no silent float-to-int casts).
template <typename T>
void Read(const Json& j, const char* key, T* value) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return;
  const Json& v = j[key];
  const auto fail = [&] {
    throw std::invalid_argument(fmt::format("\"{}\" is {}", key, v.dump()));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) fail();
    *value = v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) fail();
    *value = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!v.is_array()) fail();
    for (const Json& item : v) {
      if (!item.is_string()) fail();
      value->push_back(item.get<std::string>());
    }
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) fail();
      *value = static_cast<T>(v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        if (x < 0) fail();
      } else {
        if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) fail();
      }
      *value = static_cast<T>(x);
    } else {
      fail();
    }
  } else {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail();
    *value = static_cast<T>(v.get<double>());
  }
}

// Sizes a model file may ask for: far above what teller trains, far below what
// would exhaust memory when the model is built.
base::Status CheckBounds(const TrainOptions& o, const std::string& path) {
  const auto out = [&](const char* what, double value) {
    return base::InvalidArgument("{}: \"{}\" = {} is out of range", path, what, value);
  };
  const ModelConfig& m = o.model;
  if (m.vocab_size < 1 || m.vocab_size > (1 << 20)) return out("vocab_size", m.vocab_size);
  if (m.template_count < 2 || m.template_count > (1 << 20))
    return out("template_count", m.template_count);
  if (m.dim < 1 || m.dim > 4096) return out("dim", m.dim);
  if (m.heads < 1 || m.heads > 64) return out("heads", m.heads);
  if (m.dim % m.heads != 0) {
    return base::InvalidArgument("{}: dim {} is not a multiple of heads {}", path, m.dim, m.heads);
  }
  for (auto [name, layers] : {std::pair{"gcn_layers", m.gcn_layers},
                              {"log_layers", m.log_layers},
                              {"joint_layers", m.joint_layers}}) {
    if (layers < 0 || layers > 32) return out(name, layers);
  }
  if (!(m.dropout >= 0 && m.dropout < 1)) return out("dropout", m.dropout);
  if (!(m.modality_dropout >= 0 && m.modality_dropout < 1))
    return out("modality_dropout", m.modality_dropout);
  if (m.summary_bins < 0 || m.summary_bins > 64) return out("summary_bins", m.summary_bins);
  if (m.explain_vocab < 0 || m.explain_vocab > (1 << 20))
    return out("explain_vocab", m.explain_vocab);
  if (o.input.max_tokens < 1 || o.input.max_tokens > (1 << 16))
    return out("max_tokens", o.input.max_tokens);
  if (o.input.max_logs < 0 || o.input.max_logs > (1 << 16))
    return out("max_logs", o.input.max_logs);
  if (o.input.max_depth < 0 || o.input.max_depth > 1024) return out("max_depth", o.input.max_depth);
  if (!(o.input.lambda_per_us > 0)) return out("lambda_per_us", o.input.lambda_per_us);
  if (m.summary_features != SummaryWidth(o.input)) {
    return base::InvalidArgument("{}: summary_features {} does not match the inputs ({})", path,
                                 m.summary_features, SummaryWidth(o.input));
  }
  return base::OkStatus();
}

}  // namespace

base::StatusOr<TrainOptions> ConfigFromJson(const Json& j, const std::string& path) {
  TrainOptions o;
  // Absent from models saved before they existed.
  o.input.record_statistics = false;
  o.input.operator_tokens = false;
  o.model.statistics_head = false;
  o.model.modality_dropout = 0;
  o.model.summary_bins = 0;
  try {
    const Json& m = j.at("model");
    Read(m, "vocab_size", &o.model.vocab_size);
    Read(m, "template_count", &o.model.template_count);
    Read(m, "dim", &o.model.dim);
    Read(m, "gcn_layers", &o.model.gcn_layers);
    Read(m, "log_layers", &o.model.log_layers);
    Read(m, "joint_layers", &o.model.joint_layers);
    Read(m, "heads", &o.model.heads);
    Read(m, "dropout", &o.model.dropout);
    Read(m, "use_trace", &o.model.use_trace);
    Read(m, "use_logs", &o.model.use_logs);
    Read(m, "init_seed", &o.model.init_seed);
    Read(m, "summary_features", &o.model.summary_features);
    Read(m, "statistics_head", &o.model.statistics_head);
    Read(m, "modality_dropout", &o.model.modality_dropout);
    Read(m, "summary_bins", &o.model.summary_bins);
    Read(m, "explain_vocab", &o.model.explain_vocab);
    Read(m, "explain_by_type", &o.model.explain_by_type);
    const Json& in = j.at("input");
    Read(in, "max_tokens", &o.input.max_tokens);
    Read(in, "max_logs", &o.input.max_logs);
    Read(in, "max_depth", &o.input.max_depth);
    Read(in, "lambda_per_us", &o.input.lambda_per_us);
    Read(in, "record_statistics", &o.input.record_statistics);
    Read(in, "operator_tokens", &o.input.operator_tokens);
    const Json& t = j.at("train");
    Read(t, "epochs", &o.train.epochs);
    Read(t, "batch_size", &o.train.batch_size);
    Read(t, "learning_rate", &o.train.learning_rate);
    Read(t, "weight_decay", &o.train.weight_decay);
    Read(t, "seed", &o.train.seed);
    Read(t, "patience", &o.train.patience);
    Read(t, "step_weight", &o.train.step_weight);
    Read(t, "type_weight", &o.train.type_weight);
    Read(t, "token_weight", &o.train.token_weight);
    Read(t, "explain_weight", &o.train.explain_weight);
    Read(t, "normal_share", &o.train.normal_share);
    Read(j, "tpe_vocab_size", &o.tpe_vocab_size);
    Read(j, "view", &o.view);
    Read(j, "corpus", &o.corpus);
  } catch (const std::exception& e) {
    return base::InvalidArgument("{}: the model configuration is incomplete or mistyped: {}", path,
                                 e.what());
  }
  TELLER_RETURN_IF_ERROR(CheckBounds(o, path));
  return o;
}

Json ConfigToJson(const TrainOptions& o) {
  return Json{{"model",
               {{"vocab_size", o.model.vocab_size},
                {"template_count", o.model.template_count},
                {"dim", o.model.dim},
                {"gcn_layers", o.model.gcn_layers},
                {"log_layers", o.model.log_layers},
                {"joint_layers", o.model.joint_layers},
                {"heads", o.model.heads},
                {"dropout", o.model.dropout},
                {"use_trace", o.model.use_trace},
                {"use_logs", o.model.use_logs},
                {"init_seed", o.model.init_seed},
                {"summary_features", o.model.summary_features},
                {"statistics_head", o.model.statistics_head},
                {"modality_dropout", o.model.modality_dropout},
                {"summary_bins", o.model.summary_bins},
                {"explain_vocab", o.model.explain_vocab},
                {"explain_by_type", o.model.explain_by_type}}},
              {"input",
               {{"max_tokens", o.input.max_tokens},
                {"max_logs", o.input.max_logs},
                {"max_depth", o.input.max_depth},
                {"lambda_per_us", o.input.lambda_per_us},
                {"record_statistics", o.input.record_statistics},
                {"operator_tokens", o.input.operator_tokens}}},
              {"train",
               {{"epochs", o.train.epochs},
                {"batch_size", o.train.batch_size},
                {"learning_rate", o.train.learning_rate},
                {"weight_decay", o.train.weight_decay},
                {"seed", o.train.seed},
                {"patience", o.train.patience},
                {"step_weight", o.train.step_weight},
                {"type_weight", o.train.type_weight},
                {"token_weight", o.train.token_weight},
                {"explain_weight", o.train.explain_weight},
                {"normal_share", o.train.normal_share}}},
              {"tpe_vocab_size", o.tpe_vocab_size},
              {"view", o.view},
              {"corpus", o.corpus}};
}

base::StatusOr<ModelFolder> ReadModelFolder(const std::string& folder) {
  const fs::path dir(folder);
  const std::string path = (dir / "model.json").string();
  auto text = base::ReadFile(path);
  if (!text.ok()) {
    return base::NotFound(
        "{}: not a teller model folder (no readable model.json; train one with "
        "`teller train`)",
        folder);
  }
  Json doc = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return base::InvalidArgument("{}: not valid JSON", path);
  if (doc.contains("schema") && doc["schema"] == kTorchArchiveSchema) {
    return base::InvalidArgument(
        "{}: a model folder of an older teller (torch weights.pt); convert it with "
        "`<build>/src/learn/convert_model_weights {}` or train it again",
        path, folder);
  }
  if (!doc.contains("schema") || doc["schema"] != kModelSchema) {
    return base::InvalidArgument("{}: schema {}, expected \"{}\"", path,
                                 doc.contains("schema") ? doc["schema"].dump() : "missing",
                                 kModelSchema);
  }
  if (!doc.contains("sha256") || !doc["sha256"].is_object()) {
    return base::InvalidArgument("{}: no \"sha256\" checksums of the model files", path);
  }
  for (const char* file : kModelFiles) {
    const std::string file_path = (dir / file).string();
    const Json& sums = doc["sha256"];
    const std::string want =
        sums.contains(file) && sums[file].is_string() ? sums[file].get<std::string>() : "";
    TELLER_ASSIGN_OR_RETURN(std::string got, base::Sha256OfFile(file_path));
    if (got != want) {
      return base::DataLoss(
          "{}: checksum mismatch (sha256 {} but model.json says {}); the model "
          "folder was changed or damaged, refusing to load it",
          file_path, got, want.empty() ? "nothing" : want);
    }
  }
  ModelFolder trained;
  if (!doc.contains("config") || !doc["config"].is_object()) {
    return base::InvalidArgument("{}: no \"config\" object", path);
  }
  TELLER_ASSIGN_OR_RETURN(trained.options, ConfigFromJson(doc["config"], path));
  TELLER_ASSIGN_OR_RETURN(trained.vocab, tpe::TpeVocabulary::Load((dir / "tpe.json").string()));
  TELLER_ASSIGN_OR_RETURN(std::string templates_text,
                          base::ReadFile((dir / "templates.json").string()));
  Json templates = Json::parse(templates_text, nullptr, false);
  if (!templates.is_array() || templates.size() < 2) {
    return base::InvalidArgument("{}: expected a JSON array of template patterns",
                                 (dir / "templates.json").string());
  }
  for (size_t t = 2; t < templates.size(); ++t) {
    if (!templates[t].is_string()) {
      return base::InvalidArgument("{}: template {} is not a string",
                                   (dir / "templates.json").string(), t);
    }
    trained.templates.Intern(templates[t].get<std::string>());
  }
  if (trained.options.model.vocab_size != static_cast<int64_t>(trained.vocab.size()) ||
      trained.options.model.template_count != static_cast<int64_t>(trained.templates.size())) {
    return base::InvalidArgument(
        "{}: vocabulary sizes ({} tokens, {} templates) differ from the "
        "configuration ({}, {})",
        folder, trained.vocab.size(), trained.templates.size(), trained.options.model.vocab_size,
        trained.options.model.template_count);
  }
  trained.weights_path = (dir / kWeightsFileName).string();
  try {
    Read(doc, "train_records", &trained.train_records);
    Read(doc, "val_records", &trained.val_records);
    Read(doc, "step_threshold", &trained.step_threshold);
    Read(doc, "token_threshold", &trained.token_threshold);
    Read(doc, "best_val_step_f1", &trained.best_val_step_f1);
    std::vector<std::string> words;
    Read(doc, "explanation_words", &words);
    if (!words.empty()) trained.explanations = ExplanationVocabulary::FromWords(std::move(words));
    if (trained.best_val_step_f1 < 0 && doc.contains("history") && doc["history"].is_array()) {
      for (const Json& e : doc["history"]) {
        bool best = false;
        Read(e, "best", &best);
        if (best) Read(e, "val_step_f1", &trained.best_val_step_f1);
      }
    }
  } catch (const std::exception& e) {
    return base::InvalidArgument("{}: {}", path, e.what());
  }
  if (trained.options.model.explain_vocab > 0 &&
      static_cast<size_t>(trained.options.model.explain_vocab) != trained.explanations.size()) {
    return base::InvalidArgument("{}: {} explanation words, the decoder has {}", path,
                                 trained.explanations.size(), trained.options.model.explain_vocab);
  }
  if (!(trained.step_threshold >= 0 && trained.step_threshold <= 1) ||
      !(trained.token_threshold >= 0 && trained.token_threshold <= 1)) {
    return base::InvalidArgument("{}: thresholds must lie in [0, 1]", path);
  }
  return trained;
}

namespace {

std::vector<fs::path> ShippedModelsFolders() {
  std::vector<fs::path> candidates;
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(exe.parent_path() / "models");
    candidates.push_back(exe.parent_path().parent_path() / "models");
    candidates.push_back(exe.parent_path().parent_path() / "share" / "teller" / "models");
  }
  candidates.push_back(fs::path(TELLER_DEFAULT_SOURCE_DIR) / "models");
  return candidates;
}

}  // namespace

std::string FindShippedModel(const std::string& name) {
  std::error_code error;
  for (const fs::path& folder : ShippedModelsFolders()) {
    if (fs::is_regular_file(folder / name / "model.json", error)) return (folder / name).string();
  }
  return "";
}

std::string FindShippedFile(const std::string& name) {
  std::error_code error;
  for (const fs::path& folder : ShippedModelsFolders()) {
    if (fs::is_regular_file(folder / name, error)) return (folder / name).string();
  }
  return "";
}

}  // namespace teller::learn
