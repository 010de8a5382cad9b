// Corpora of step serializations, the input of Trace Pair Encoding (`teller tpe`):
// the serializations alone with their provenance, read from bundles, stores, raw
// traces or every bundle of dataset folders, and filtered by split part, step, rank
// and request.
//
// Request steps are grouped as AddTraceRecords groups them (request_steps.h). Where
// a corpus differs from the model's records it says so through its options, not by
// a second copy of the loop:
//   - CorpusUnit::kEngineStep: one engine step's whole tree on one rank (no request);
//   - CorpusFilter::rank keeps only that rank's projection in a request step;
//   - CorpusFilter::request matches the bare request id or "bundle/request";
//   - labels.json is not read, so unlabelled or mislabelled traces load as well.
// The nodes of a projection keep reconstruct::ProjectRequest's pre-order, which is
// node-index order (AddTraceRecords sorts them, which leaves them as they are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "tpe/step_serializer.h"

namespace teller::step_records {

// What one corpus record is: an engine step on one rank, or the paper's step record
// C_q(s), request q's projection of engine step s over the ranks that served it.
enum class CorpusUnit { kEngineStep, kRequestStep };

std::string_view CorpusUnitName(CorpusUnit unit);  // "engine-step", "request-step"
base::StatusOr<CorpusUnit> ParseCorpusUnit(const std::string& text);

// One part of a dataset's splits.json: [DATASET_DIR:]SPLIT:PART, e.g.
// request_disjoint:train.
struct SplitPart {
  std::string dataset;  // empty: each dataset input's own splits.json
  std::string name;
  std::string part;
  std::string Text() const { return name + ":" + part; }
};

base::StatusOr<SplitPart> ParseSplitPart(const std::string& text);

// One trace to open: a bundle, store or raw input; a dataset contributes its bundles.
struct CorpusSource {
  std::string path;
  std::string name;     // shown in labels: the input as given, or the dataset bundle
  std::string bundle;   // dataset bundle name; "" outside a dataset
  std::string dataset;  // the dataset folder; "" outside a dataset
};

// Each input as a source, a dataset folder as one source per bundle of its manifest.
base::StatusOr<std::vector<CorpusSource>> ExpandCorpusInputs(
    const std::vector<std::string>& inputs);

// Which records a corpus keeps.
struct CorpusFilter {
  std::optional<SplitPart> split;  // request steps only
  int64_t step = -1;               // engine step number, or the global step of a request step
  int32_t rank = -1;
  std::string request;  // request id, or "bundle/request" in a dataset
};

struct CorpusRecordInfo {
  std::string source;
  std::string request;  // empty for an engine step
  int64_t step = 0;
  std::vector<int32_t> ranks;
};

// "SOURCE step S rank R" or "SOURCE request Q step S ranks R,R".
std::string CorpusRecordLabel(const CorpusRecordInfo& info);

// Step records serialized into one symbol table.
struct Corpus {
  CorpusFilter filter;
  tpe::SymbolTable symbols;
  std::vector<tpe::Serialization> serializations;
  std::vector<CorpusRecordInfo> infos;
  // Split keys by dataset folder, read once.
  std::map<std::string, std::unordered_set<std::string>> keys;
  int64_t nodes() const;
};

struct CorpusOptions {
  CorpusUnit unit = CorpusUnit::kRequestStep;
  base::ProgressSink* progress = nullptr;  // stage "tpe: inputs", and the imports
  // After each opened source: its position (1-based), the count and its records.
  std::function<void(const CorpusSource& source, size_t done, size_t total, size_t records)>
      on_source;
};

// Opens every source once (none that no split part needs) and adds its records to
// each corpus, by that corpus's filter.
base::Status LoadCorpora(const std::vector<CorpusSource>& sources, const CorpusOptions& options,
                         const std::vector<Corpus*>& corpora);

// NotFound naming the filter when the corpus has no record.
base::Status CheckCorpusNotEmpty(const Corpus& corpus, CorpusUnit unit,
                                 const std::vector<CorpusSource>& sources);

// "INPUT... (request-step, split request_disjoint:train)".
std::string DescribeCorpus(const std::vector<std::string>& inputs, CorpusUnit unit,
                           const std::optional<SplitPart>& split);

// "the `paper` dataset (seed 20260101)" from each dataset's manifest, else the input;
// joined by " + ".
std::string DescribeDatasets(const std::vector<std::string>& inputs);

}  // namespace teller::step_records
