// Step records -> the model's inputs (paper 3.6): TPE tokens with parent index,
// depth and time features, the aligned log lines as template ids, and the
// labels. Plain vectors; the torch code only batches them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "step_records/step_records.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

namespace teller::learn {

struct InputConfig {
  int32_t max_tokens = 256;  // longer records keep their most deviant tokens + ancestors
  int32_t max_logs = 32;
  int32_t max_depth = 31;      // deeper tokens share the last depth embedding
  double lambda_per_us = 1.0;  // Delta scale in log(1 + lambda * Delta)
  // Append the record's statistical features (step_records::StatisticalFeatures) and
  // their difference to the median over the bundle's records of the same phase to
  // the summary: what the classical comparison methods see, plus the run-relative view.
  // Models saved before it was added read it as false.
  bool record_statistics = true;
  // Trace names as tpe::OperatorToken spells them (what the operator is, so names of
  // real traces are known); models saved before it was added read it as false.
  bool operator_tokens = true;
};

// Per-token time features: log(1 + lambda*Delta), and the log ratio of Delta to
// the median of the same token id within the record and over the bundle's steps
// of the same phase.
inline constexpr int kTimeFeatures = 3;
// Per-record summary: for each layer (model::kLayerCount), the mean and the max of
// its tokens' bundle-relative time feature; what slowed (kernels, launches,
// collectives, host ranges) is what tells fault categories apart.
inline constexpr int kSummaryFeatures = 2 * model::kLayerCount;
// Summary width under a configuration: kSummaryFeatures, plus twice the statistical
// feature columns with record_statistics.
int SummaryWidth(const InputConfig& config);

struct ModelInput {
  std::vector<int64_t> token;
  std::vector<int64_t> depth;
  std::vector<int64_t> parent;  // index into this input, -1 for roots
  std::vector<float> time;      // token count x kTimeFeatures
  std::vector<int64_t> log_template;
  std::vector<int64_t> log_level;
  std::vector<float> summary;  // SummaryWidth(config)
  // Labels.
  float step_label = 0;
  int64_t fault_label = 0;         // diagnose::FaultCategory as int (0 normal)
  std::vector<float> token_label;  // 1: the token covers an affected node
  // The reference explanation's word ids (learn/explanation_text.h), begin and end
  // marks included; empty for normal records and where the model has no decoder.
  std::vector<int64_t> explanation;
  // Where each kept token came from: record node range [node_begin, node_end).
  std::vector<uint32_t> node_begin;
  std::vector<uint32_t> node_end;
  int32_t dropped_tokens = 0;  // tokens beyond max_tokens left out
  size_t size() const { return token.size(); }
};

// Encodes records with one vocabulary. Bundle medians are computed over the
// records given, grouped by record.bundle, so call it with all records of a
// bundle at once (a dataset split keeps whole requests, and each bundle's
// records are all present at diagnosis time).
base::StatusOr<std::vector<ModelInput>> MakeInputs(
    const step_records::RecordSet& set, const tpe::TpeVocabulary& vocab,
    const step_records::TemplateVocabulary& templates, const InputConfig& config);

}  // namespace teller::learn
