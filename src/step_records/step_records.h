// Step records (paper 3.3, 4.1): one record per (request q, engine step s), the
// request's projection C_q(s) on every rank serving it, with its serialization,
// per-node facts, aligned log lines and, for simulated bundles, the labels.
// The learned model, the comparison methods and the evaluation all read these.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "localize/operator_family.h"
#include "model/trace.h"
#include "tpe/step_serializer.h"

namespace teller::step_records {

// Log template texts interned across bundles, so template ids mean the same in
// every record of a set. Id 0 is reserved for padding, 1 for unknown templates.
class TemplateVocabulary {
 public:
  TemplateVocabulary();
  int32_t Intern(std::string_view pattern);
  int32_t Find(std::string_view pattern) const;  // kUnknown when absent
  std::string_view Get(int32_t id) const { return patterns_[static_cast<size_t>(id)]; }
  size_t size() const { return patterns_.size(); }
  static constexpr int32_t kPadding = 0;
  static constexpr int32_t kUnknown = 1;

 private:
  std::vector<std::string> patterns_;
  std::unordered_map<std::string, int32_t> index_;
};

struct RecordLog {
  int32_t template_id = TemplateVocabulary::kUnknown;
  model::LogLevel level = model::LogLevel::kUnknown;
  int32_t rank = -1;
  std::string text;  // the line, for explanations and the log-based comparison methods
};

struct StepRecord {
  // Provenance.
  std::string bundle;  // dataset bundle name, or the input path outside a dataset
  std::string engine;  // labels.json engine, "" when unknown
  std::string request;
  int64_t step = -1;  // global engine step
  model::StepPhase phase = model::StepPhase::kUnknown;
  std::vector<int32_t> ranks;  // ranks whose projection is in the record
  int64_t duration_ns = 0;     // longest step range of those ranks

  // The serialization: node k owns tokens 2k and 2k+1 (tpe::Serialization).
  tpe::Serialization serialization;
  // Per node.
  std::vector<int32_t> node_rank;
  std::vector<model::Layer> node_layer;
  std::vector<localize::OperatorFamily> node_family;
  std::vector<int64_t> node_queue_ns;  // kernel start minus launch start, 0 elsewhere
  std::vector<uint8_t> node_affected;  // 1: a labelled affected operator instance

  std::vector<RecordLog> logs;

  // Labels (simulated bundles; all false/none otherwise).
  bool has_labels = false;
  bool request_faulty = false;  // the request is affected by a fault
  bool is_anomaly = false;      // this step of this request is abnormal
  diagnose::FaultCategory fault_type = diagnose::FaultCategory::kNone;  // when is_anomaly
  std::string mechanism;                                                // "none" when normal
  std::string explanation;                // reference explanation (first phrasing), "" when normal
  std::vector<std::string> explanations;  // all phrasings

  std::string key() const { return bundle + "/" + request; }
  size_t node_count() const { return node_rank.size(); }
  // Names (normalized, as in the serialization) of the affected nodes.
  std::vector<std::string> AffectedOperators(const tpe::SymbolTable& symbols) const;
};

// Records of many bundles sharing one symbol table and one template vocabulary.
struct RecordSet {
  tpe::SymbolTable symbols;
  TemplateVocabulary templates;
  std::vector<StepRecord> records;
  // Affected operator instances in the labels of the kept bundles, and how many
  // of them matched a node of some record (the rest fall outside every request).
  int64_t label_instances = 0;
  int64_t matched_instances = 0;
};

struct RecordOptions {
  std::string bundle;                                     // provenance name
  const std::unordered_set<std::string>* keys = nullptr;  // "bundle/request" to keep; null all
  size_t max_logs_per_record = 32;                        // the latest lines win
  // false: the horizontal view, one record per (request, step) over every rank;
  // true: the vertical view, one record per (request, step, rank).
  bool vertical = false;
  // Names as tpe::OperatorToken spells them (what the operator is); false: NormalizeName
  // (models trained before operator tokens).
  bool operator_tokens = true;
};

// Appends the step records of one reconstructed trace: one per (request, step), or, for
// plain captures without request ids, one per engine step under the key "bundle/".
// Errors only on unreadable labels.
base::Status AddTraceRecords(const model::Trace& trace, const RecordOptions& options,
                             RecordSet* set);

// Ordinal of each node of a step among the step's nodes of the same layer and name, in
// start-time order: the labels' definition of an operator instance (docs/format.md).
std::vector<int32_t> InstanceOrdinals(const model::Trace& trace, model::StepIndex step);

}  // namespace teller::step_records
