// Converts model folders of the torch-archive era (schema teller-model/1, weights.pt)
// to teller-model/2 (weights.bin, learn/weights_file.h), which diagnosis reads
// without libtorch. The folder is rewritten in place; weights.pt is removed.
// Usage: convert_model_weights FOLDER...
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/sha256.h"
#include "learn/model_folder.h"
#include "learn/root_cause.h"
#include "learn/root_cause_model.h"

namespace teller::learn {
namespace {

namespace fs = std::filesystem;

base::Status Convert(const std::string& folder) {
  const fs::path dir(folder);
  const std::string model_json = (dir / "model.json").string();
  TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(model_json));
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("schema", "") != kTorchArchiveSchema)
    return base::InvalidArgument("{}: not a {} model folder", model_json, kTorchArchiveSchema);
  const std::string archive = (dir / "weights.pt").string();
  TELLER_ASSIGN_OR_RETURN(std::string archive_sum, base::Sha256OfFile(archive));
  if (doc["sha256"].value("weights.pt", "") != archive_sum)
    return base::DataLoss("{}: checksum mismatch; refusing to convert it", archive);
  TELLER_ASSIGN_OR_RETURN(TrainOptions options, ConfigFromJson(doc["config"], model_json));
  TELLER_ASSIGN_OR_RETURN(RootCauseModel network, RootCauseModel::Create(options.model));
  TELLER_RETURN_IF_ERROR(network.LoadTorchArchive(archive));
  const std::string weights = (dir / kWeightsFileName).string();
  TELLER_RETURN_IF_ERROR(WriteWeightsFile(network.ExportWeights(), weights));
  TELLER_ASSIGN_OR_RETURN(std::string weights_sum, base::Sha256OfFile(weights));
  doc["schema"] = kModelSchema;
  doc["sha256"].erase("weights.pt");
  doc["sha256"][kWeightsFileName] = weights_sum;
  TELLER_RETURN_IF_ERROR(base::WriteFileAtomic(model_json, doc.dump(1) + "\n"));
  TELLER_RETURN_IF_ERROR(LoadModel(folder).status());
  std::error_code error;
  fs::remove(archive, error);
  return base::OkStatus();
}

}  // namespace
}  // namespace teller::learn

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: convert_model_weights FOLDER...\n");
    return 2;
  }
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    const teller::base::Status status = teller::learn::Convert(argv[i]);
    if (status.ok()) {
      std::printf("%s: converted to %s\n", argv[i], teller::learn::kModelSchema);
    } else {
      std::fprintf(stderr, "%s\n", status.message().c_str());
      ++failed;
    }
  }
  return failed ? 1 : 0;
}
