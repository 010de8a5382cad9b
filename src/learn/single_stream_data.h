// The single-stream variant of the paper's root-cause model (section 3.7 ii): each step
// record becomes one token sequence, its TPE trace tokens, a separator, its log
// templates, then `<fault_type> y </fault_type>` and the explanation's words, and one
// causal transformer learns the sequence's tail. What it reads and returns, as plain
// structs the trainer plugin (learn/trainer_plugin.h) takes and gives back;
// learn/single_stream.h makes them from step records.
#pragma once

#include <cstdint>
#include <vector>

namespace teller::learn {

// How many ids of each kind the sequences use (ModelInput's token, log_template,
// fault_label and explanation ids are below them).
struct SingleStreamShape {
  int64_t trace_vocab = 0;       // TPE vocabulary
  int64_t template_count = 0;    // log templates
  int64_t type_count = 0;        // diagnose::kFaultCategoryCount, normal first
  int64_t word_count = 0;        // explanation vocabulary, marks first
  int64_t summary_features = 0;  // ModelInput::summary's width
};

struct SingleStreamOptions {
  uint64_t seed = 1;
  int32_t threads = 2;
  int32_t epochs = 8;
  int32_t dim = 64;
  int32_t layers = 2;
  int32_t heads = 4;
  // Each epoch trains on every abnormal record and this share of the normal ones.
  double normal_share = 0.25;
  int32_t max_words = 72;  // decoded words at most, marks included
};

// The test records' outputs: the type token's distribution after `<fault_type>`, and
// for the records whose greedy type is not normal, the explanation decoded after
// `</fault_type>` (word ids, begin and end marks dropped).
struct SingleStreamFit {
  std::vector<float> type_probability;      // records x type_count
  std::vector<std::vector<int32_t>> words;  // one per record, empty when normal
  std::vector<float> epoch_loss;            // mean train loss of each epoch
  int64_t parameters = 0;
  double train_seconds = 0;
};

}  // namespace teller::learn
