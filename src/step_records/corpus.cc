#include "step_records/corpus.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/file_util.h"
#include "reconstruct/request_projection.h"
#include "step_records/dataset.h"
#include "step_records/request_steps.h"
#include "store/open_trace.h"
#include "wire/dataset_files.h"

namespace teller::step_records {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kInputsStage = "tpe: inputs";

bool IsDataset(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && IsDatasetFolder(path);
}

bool StepCarries(const model::Trace& trace, size_t step, std::string_view request) {
  const uint32_t begin = trace.steps.requests_begin[step];
  for (uint32_t k = 0; k < trace.steps.requests_count[step]; ++k) {
    model::RequestIndex q = trace.step_requests[begin + k];
    if (trace.str(trace.requests.id[q.value()]) == request) return true;
  }
  return false;
}

base::Status AddEngineSteps(const model::Trace& trace, const CorpusSource& source, Corpus* corpus) {
  tpe::StepSerializer serializer(trace, &corpus->symbols);
  const CorpusFilter& filter = corpus->filter;
  std::string request = filter.request;
  if (!source.bundle.empty() && request.rfind(source.bundle + "/", 0) == 0) {
    request = request.substr(source.bundle.size() + 1);
  }
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    if (filter.step >= 0 && trace.steps.number[s] != filter.step) continue;
    if (filter.rank >= 0 && trace.steps.rank[s] != filter.rank) continue;
    if (!request.empty() && !StepCarries(trace, s, request)) continue;
    TELLER_ASSIGN_OR_RETURN(tpe::Serialization serialization,
                            serializer.SerializeStep(model::StepIndex(static_cast<uint32_t>(s))));
    corpus->serializations.push_back(std::move(serialization));
    corpus->infos.push_back(
        CorpusRecordInfo{source.name, "", trace.steps.number[s], {trace.steps.rank[s]}});
  }
  return base::OkStatus();
}

base::Status AddRequestSteps(const model::Trace& trace, const CorpusSource& source,
                             const std::unordered_set<std::string>* keys, Corpus* corpus) {
  tpe::StepSerializer serializer(trace, &corpus->symbols);
  const CorpusFilter& filter = corpus->filter;
  for (size_t q = 0; q < trace.requests.size(); ++q) {
    const std::string id(trace.str(trace.requests.id[q]));
    const std::string key = source.bundle.empty() ? id : source.bundle + "/" + id;
    if (keys != nullptr && keys->count(key) == 0) continue;
    if (!filter.request.empty() && filter.request != id && filter.request != key) continue;
    const model::RequestIndex request(static_cast<uint32_t>(q));
    for (const auto& [number, steps] : GroupRequestSteps(trace, request, /*vertical=*/false)) {
      if (filter.step >= 0 && number != filter.step) continue;
      tpe::Serialization record;
      CorpusRecordInfo info{source.name, id, number, {}};
      for (model::StepIndex step : steps) {
        const int32_t rank = trace.steps.rank[step.value()];
        if (filter.rank >= 0 && rank != filter.rank) continue;
        std::vector<model::NodeIndex> nodes = reconstruct::ProjectRequest(trace, request, step);
        if (nodes.empty()) continue;
        TELLER_ASSIGN_OR_RETURN(tpe::Serialization part, serializer.SerializeNodes(step, nodes));
        tpe::AppendSerialization(part, &record);
        info.ranks.push_back(rank);
      }
      if (record.size() == 0) continue;
      corpus->serializations.push_back(std::move(record));
      corpus->infos.push_back(std::move(info));
    }
  }
  return base::OkStatus();
}

// The dataset whose splits.json a corpus reads for this source.
const std::string& SplitDataset(const Corpus& corpus, const CorpusSource& source) {
  return corpus.filter.split->dataset.empty() ? source.dataset : corpus.filter.split->dataset;
}

// Reads each corpus's split keys; per corpus, "dataset\nbundle" of the bundles holding
// a wanted request.
base::StatusOr<std::vector<std::unordered_set<std::string>>> WantedBundles(
    const std::vector<CorpusSource>& sources, const std::vector<Corpus*>& corpora) {
  std::vector<std::unordered_set<std::string>> wanted(corpora.size());
  for (size_t c = 0; c < corpora.size(); ++c) {
    Corpus* corpus = corpora[c];
    if (!corpus->filter.split) continue;
    const SplitPart& spec = *corpus->filter.split;
    for (const CorpusSource& source : sources) {
      if (source.dataset.empty()) {
        return base::InvalidArgument(
            "--split {}: {} is not a dataset folder (no manifest.json); "
            "splits name dataset requests",
            spec.Text(), source.path);
      }
      const std::string dataset = SplitDataset(*corpus, source);
      if (corpus->keys.count(dataset) == 0) {
        TELLER_ASSIGN_OR_RETURN(corpus->keys[dataset],
                                ReadSplitKeys(dataset, spec.name, spec.part));
      }
      for (const std::string& key : corpus->keys[dataset]) {
        wanted[c].insert(dataset + "\n" + key.substr(0, key.find('/')));
      }
    }
  }
  return wanted;
}

}  // namespace

std::string_view CorpusUnitName(CorpusUnit unit) {
  return unit == CorpusUnit::kEngineStep ? "engine-step" : "request-step";
}

base::StatusOr<CorpusUnit> ParseCorpusUnit(const std::string& text) {
  if (text == "request-step") return CorpusUnit::kRequestStep;
  if (text == "engine-step") return CorpusUnit::kEngineStep;
  return base::InvalidArgument("--unit '{}': expected request-step or engine-step", text);
}

base::StatusOr<SplitPart> ParseSplitPart(const std::string& text) {
  size_t last = text.rfind(':');
  size_t middle =
      last == std::string::npos || last == 0 ? std::string::npos : text.rfind(':', last - 1);
  SplitPart spec;
  if (last == std::string::npos) {
    return base::InvalidArgument(
        "--split '{}': expected [DATASET_DIR:]SPLIT:PART, e.g. "
        "request_disjoint:train",
        text);
  }
  spec.part = text.substr(last + 1);
  if (middle == std::string::npos) {
    spec.name = text.substr(0, last);
  } else {
    spec.name = text.substr(middle + 1, last - middle - 1);
    spec.dataset = text.substr(0, middle);
  }
  if (spec.name.empty() || spec.part.empty()) {
    return base::InvalidArgument(
        "--split '{}': expected [DATASET_DIR:]SPLIT:PART, e.g. "
        "request_disjoint:train",
        text);
  }
  return spec;
}

base::StatusOr<std::vector<CorpusSource>> ExpandCorpusInputs(
    const std::vector<std::string>& inputs) {
  std::vector<CorpusSource> sources;
  for (const std::string& input : inputs) {
    if (!IsDataset(input)) {
      sources.push_back(CorpusSource{input, input, "", ""});
      continue;
    }
    TELLER_ASSIGN_OR_RETURN(Dataset dataset, ReadDataset(input));
    for (const DatasetBundle& bundle : dataset.bundles) {
      sources.push_back(CorpusSource{bundle.path, bundle.name, bundle.name, input});
    }
  }
  return sources;
}

std::string CorpusRecordLabel(const CorpusRecordInfo& info) {
  if (info.request.empty()) {
    return fmt::format("{} step {} rank {}", info.source, info.step, fmt::join(info.ranks, ","));
  }
  return fmt::format("{} request {} step {} ranks {}", info.source, info.request, info.step,
                     fmt::join(info.ranks, ","));
}

int64_t Corpus::nodes() const {
  int64_t n = 0;
  for (const tpe::Serialization& s : serializations) n += static_cast<int64_t>(s.node_count());
  return n;
}

base::Status LoadCorpora(const std::vector<CorpusSource>& sources, const CorpusOptions& options,
                         const std::vector<Corpus*>& corpora) {
  // Sources outside every split part are not opened.
  TELLER_ASSIGN_OR_RETURN(auto wanted_bundles, WantedBundles(sources, corpora));
  store::OpenOptions open;
  open.import.progress = options.progress;
  size_t done = 0;
  base::ReportProgress(options.progress, kInputsStage, 0, sources.size());
  for (const CorpusSource& source : sources) {
    base::ReportProgress(options.progress, kInputsStage, done, sources.size());
    ++done;
    std::vector<size_t> users;
    for (size_t c = 0; c < corpora.size(); ++c) {
      const Corpus* corpus = corpora[c];
      if (corpus->filter.split &&
          wanted_bundles[c].count(SplitDataset(*corpus, source) + "\n" + source.bundle) == 0) {
        continue;
      }
      users.push_back(c);
    }
    if (users.empty()) continue;
    TELLER_ASSIGN_OR_RETURN(model::Trace trace, store::OpenTrace({source.path}, open));
    size_t records = 0;
    for (size_t c : users) {
      Corpus* corpus = corpora[c];
      const size_t before = corpus->infos.size();
      if (options.unit == CorpusUnit::kEngineStep) {
        TELLER_RETURN_IF_ERROR(AddEngineSteps(trace, source, corpus));
      } else {
        const std::unordered_set<std::string>* keys =
            corpus->filter.split ? &corpus->keys[SplitDataset(*corpus, source)] : nullptr;
        TELLER_RETURN_IF_ERROR(AddRequestSteps(trace, source, keys, corpus));
      }
      records += corpus->infos.size() - before;
    }
    if (options.on_source) options.on_source(source, done, sources.size(), records);
  }
  if (options.progress != nullptr) options.progress->Finish(kInputsStage);
  return base::OkStatus();
}

base::Status CheckCorpusNotEmpty(const Corpus& corpus, CorpusUnit unit,
                                 const std::vector<CorpusSource>& sources) {
  if (!corpus.serializations.empty()) return base::OkStatus();
  std::string what =
      sources.size() == 1 ? sources[0].path : fmt::format("{} inputs", sources.size());
  std::string selection;
  if (corpus.filter.split) selection += " in split " + corpus.filter.split->Text();
  if (!corpus.filter.request.empty()) selection += " of request " + corpus.filter.request;
  if (corpus.filter.step >= 0) selection += fmt::format(" at step {}", corpus.filter.step);
  if (corpus.filter.rank >= 0) selection += fmt::format(" on rank {}", corpus.filter.rank);
  if (unit == CorpusUnit::kRequestStep && selection.empty()) {
    return base::NotFound(
        "no request steps in {}: its steps name no requests (use --unit "
        "engine-step for traces without request ids)",
        what);
  }
  return base::NotFound("no {}s{} in {}", CorpusUnitName(unit), selection, what);
}

std::string DescribeCorpus(const std::vector<std::string>& inputs, CorpusUnit unit,
                           const std::optional<SplitPart>& split) {
  std::string text = fmt::format("{} ({}", fmt::join(inputs, " "), CorpusUnitName(unit));
  if (split) text += ", split " + split->Text();
  return text + ")";
}

std::string DescribeDatasets(const std::vector<std::string>& inputs) {
  std::vector<std::string> parts;
  for (const std::string& input : inputs) {
    auto manifest = wire::ReadManifest(input);
    if (manifest.ok() && manifest->preset && manifest->seed) {
      parts.push_back(
          fmt::format("the `{}` dataset (seed {})", *manifest->preset, *manifest->seed));
    } else {
      parts.push_back(input);
    }
  }
  return fmt::format("{}", fmt::join(parts, " + "));
}

}  // namespace teller::step_records
