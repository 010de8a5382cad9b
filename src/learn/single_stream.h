// The single-stream variant (learn/single_stream_data.h) run on step records: a TPE
// vocabulary, the log templates and the explanation words learned from the train
// records, the sequences fitted and decoded by the trainer plugin. `teller paper-tables` gives
// it a row beside the MoT model; it is not saved as a model folder.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "learn/model_inputs.h"
#include "learn/single_stream_data.h"
#include "step_records/step_records.h"

namespace teller::learn {

struct SingleStreamRunOptions {
  int32_t tpe_vocab_size = 512;  // as models/default
  InputConfig input;
  SingleStreamOptions model;
};

struct SingleStreamRun {
  // Per test record: the type token's distribution (normal first) and the decoded
  // words in slot form (learn/explanation_text.h), empty where the type is normal.
  std::vector<std::array<float, diagnose::kFaultCategoryCount>> type_probability;
  std::vector<std::vector<std::string>> words;
  std::vector<float> epoch_loss;
  int64_t parameters = 0;
  int64_t tpe_vocab = 0;
  double train_seconds = 0;
};

// Errors when the trainer plugin is missing (kUnimplemented) or the train part has no
// abnormal record with a reference explanation. Reports each epoch to `progress`.
base::StatusOr<SingleStreamRun> RunSingleStream(const step_records::RecordSet& train,
                                                const step_records::RecordSet& test,
                                                const SingleStreamRunOptions& options = {},
                                                base::ProgressSink* progress = nullptr);

}  // namespace teller::learn
