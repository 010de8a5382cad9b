// The trainer plugin: libteller_trainer.so, the only part of teller that links
// libtorch (built when libtorch is found). `teller train` loads it when it runs, so
// every other command, `teller diagnose` with the learned model included, starts
// without libtorch and its hundreds of shared libraries (docs/learn.md). `teller paper-tables`
// loads it for the log comparison methods of Table 2 (learn/log_comparisons.h) and the
// single-stream variant (learn/single_stream.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "learn/log_comparison_data.h"
#include "learn/model_config.h"
#include "learn/model_inputs.h"
#include "learn/single_stream_data.h"
#include "learn/weights_file.h"

namespace teller::learn {

// The network fitted to the inputs: its weights and the report of every epoch.
struct NetworkFit {
  NamedTensors weights;
  std::vector<EpochReport> history;
};

using FitNetworkFunction = base::StatusOr<NetworkFit> (*)(
    const ModelConfig& config, const std::vector<ModelInput>& train,
    const std::vector<ModelInput>& val, const TrainConfig& train_config,
    const std::function<void(const EpochReport&)>& on_epoch);

// Fits one log comparison method on the train part and scores the test part.
using FitLogComparisonFunction = base::StatusOr<LogComparisonScores> (*)(
    LogComparisonId id, const LogComparisonData& train, const LogComparisonData& test,
    const LogComparisonOptions& options);

// Trains the single-stream variant on the train records and decodes the test ones.
// on_epoch (may be empty) hears each finished epoch and its mean loss.
using FitSingleStreamFunction = base::StatusOr<SingleStreamFit> (*)(
    const SingleStreamShape& shape, const std::vector<ModelInput>& train,
    const std::vector<ModelInput>& test, const SingleStreamOptions& options,
    const std::function<void(int32_t epoch, float loss)>& on_epoch);

// Both sides are built from these headers by one compiler; the sizes catch a plugin
// left from another build.
inline constexpr std::size_t kTrainerTypeCount = 10;
struct TrainerPlugin {
  uint32_t abi = 0;
  std::size_t type_sizes[kTrainerTypeCount] = {};
  FitNetworkFunction fit = nullptr;
  FitLogComparisonFunction fit_log_comparison = nullptr;
  FitSingleStreamFunction fit_single_stream = nullptr;
};
// 2: the log comparison methods (fit_log_comparison); 3: the single-stream variant.
inline constexpr uint32_t kTrainerAbi = 3;
inline constexpr std::size_t kTrainerTypeSizes[kTrainerTypeCount] = {
    sizeof(ModelConfig),         sizeof(TrainConfig),       sizeof(ModelInput),
    sizeof(EpochReport),         sizeof(LogComparisonData), sizeof(LogComparisonOptions),
    sizeof(LogComparisonScores), sizeof(SingleStreamShape), sizeof(SingleStreamOptions),
    sizeof(SingleStreamFit)};
inline constexpr const char* kTrainerLibrary = "libteller_trainer.so";
inline constexpr const char* kTrainerEntry = "teller_trainer_plugin";

// Loads the plugin once from $TELLER_LIB_DIR, <bin>/lib, <bin>/../lib/teller,
// <bin>/../lib or the build tree, and checks it; an error says where it looked.
base::StatusOr<const TrainerPlugin*> LoadTrainerPlugin();

}  // namespace teller::learn

extern "C" const teller::learn::TrainerPlugin* teller_trainer_plugin();
