// The entry point of the trainer plugin, libteller_trainer.so (learn/trainer_plugin.h):
// fits the torch network and hands back its weights, fits and scores the log
// comparison methods, and fits and decodes the single-stream variant.
#include "learn/log_comparison_models.h"
#include "learn/root_cause_model.h"
#include "learn/single_stream_model.h"
#include "learn/trainer_plugin.h"

namespace teller::learn {
namespace {

base::StatusOr<NetworkFit> FitNetwork(const ModelConfig& config,
                                      const std::vector<ModelInput>& train,
                                      const std::vector<ModelInput>& val,
                                      const TrainConfig& train_config,
                                      const std::function<void(const EpochReport&)>& on_epoch) {
  TELLER_ASSIGN_OR_RETURN(RootCauseModel model, RootCauseModel::Create(config));
  NetworkFit fit;
  TELLER_RETURN_IF_ERROR(model.Train(train, val, train_config, [&](const EpochReport& report) {
    fit.history.push_back(report);
    if (on_epoch) on_epoch(report);
  }));
  fit.weights = model.ExportWeights();
  return fit;
}

const TrainerPlugin kPlugin{
    kTrainerAbi,
    {kTrainerTypeSizes[0], kTrainerTypeSizes[1], kTrainerTypeSizes[2], kTrainerTypeSizes[3],
     kTrainerTypeSizes[4], kTrainerTypeSizes[5], kTrainerTypeSizes[6], kTrainerTypeSizes[7],
     kTrainerTypeSizes[8], kTrainerTypeSizes[9]},
    &FitNetwork,
    &FitLogComparison,
    &FitSingleStream};

}  // namespace
}  // namespace teller::learn

extern "C" __attribute__((visibility("default"))) const teller::learn::TrainerPlugin*
teller_trainer_plugin() {
  return &teller::learn::kPlugin;
}
