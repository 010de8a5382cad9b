// Localization + slicing + TPE per request at paper scale, on every bundle of a
// `teller synth dataset --preset paper` folder. Per bundle (shared by its requests):
// phi(x) and the robust baseline. Per request: for each of its steps, score the
// families, take the top family's 8 longest instances, slice around them, close the
// slice under parents, serialize and TPE-encode it (a vocabulary of 512 trained on
// the bundle beforehand, not timed). Also times the whole `diagnose::Diagnose`.
// Usage: diagnose_bench DATASET_DIR. Prints one JSON line.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "diagnose/diagnosis.h"
#include "localize/baseline.h"
#include "localize/step_features.h"
#include "reconstruct/request_projection.h"
#include "slice/causal_slice.h"
#include "store/open_trace.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

using namespace teller;

namespace {

int Fail(const base::Status& status) {
  std::fprintf(stderr, "diagnose_bench: %s\n", status.ToString().c_str());
  return 1;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * (values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: diagnose_bench DATASET_DIR\n");
    return 2;
  }
  std::vector<std::string> bundles;
  for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
    if (std::filesystem::exists(entry.path() / "meta.json")) bundles.push_back(entry.path());
  }
  std::sort(bundles.begin(), bundles.end());
  std::vector<double> request_ms, baseline_ms, diagnose_ms;
  int64_t nodes = 0, requests = 0, slice_nodes = 0, tokens = 0;
  for (const std::string& path : bundles) {
    auto trace = store::OpenTrace({path}, {});
    if (!trace.ok()) return Fail(trace.status());
    nodes += static_cast<int64_t>(trace->nodes.size());

    double start = bench::NowSeconds();
    auto diagnosis = diagnose::Diagnose(*trace);
    if (!diagnosis.ok()) return Fail(diagnosis.status());
    diagnose_ms.push_back(1e3 * (bench::NowSeconds() - start));

    tpe::SymbolTable symbols;
    tpe::StepSerializer serializer(*trace, &symbols);
    std::vector<tpe::Serialization> corpus;
    for (uint32_t s = 0; s < trace->steps.size(); ++s) {
      auto serialized = serializer.SerializeStep(model::StepIndex(s));
      if (!serialized.ok()) return Fail(serialized.status());
      corpus.push_back(std::move(*serialized));
    }
    tpe::TpeTrainConfig config;
    config.vocab_size = 512;
    auto vocab = tpe::TpeVocabulary::Train(corpus, symbols, config);
    if (!vocab.ok()) return Fail(vocab.status());
    tpe::TpeEncoder encoder(*vocab, symbols);

    start = bench::NowSeconds();
    const localize::StepFeatures features = localize::ComputeStepFeatures(*trace);
    const localize::FeatureRows rows = localize::FeatureRowsOfPart(*trace, features);
    std::vector<model::StepIndex> all;
    for (uint32_t s = 0; s < trace->steps.size(); ++s) all.push_back(model::StepIndex(s));
    const localize::Baseline baseline = localize::Baseline::Learn(rows, all);
    slice::Slicer slicer(*trace);
    baseline_ms.push_back(1e3 * (bench::NowSeconds() - start));

    for (uint32_t q = 0; q < trace->requests.size(); ++q) {
      start = bench::NowSeconds();
      for (model::StepIndex step : reconstruct::StepsOfRequest(*trace, model::RequestIndex(q))) {
        const auto scores = baseline.ScoreStep(rows, step);
        if (scores.empty()) continue;
        const size_t row = scores.front().row;
        std::vector<std::pair<int64_t, model::NodeIndex>> instances;
        for (int64_t i = 0; i < features.count[row]; ++i) {
          const model::NodeIndex node = features.instances[features.instances_begin[row] + i];
          instances.emplace_back(trace->events.dur_ns[trace->nodes.event[node.value()].value()],
                                 node);
        }
        const size_t keep = std::min<size_t>(8, instances.size());
        std::partial_sort(instances.begin(), instances.begin() + keep, instances.end(),
                          std::greater<>());
        std::vector<model::NodeIndex> suspects;
        for (size_t i = 0; i < keep; ++i) suspects.push_back(instances[i].second);
        std::sort(suspects.begin(), suspects.end());
        auto slice = slicer.SliceStep(step, suspects, {}, {});
        if (!slice.ok()) return Fail(slice.status());
        slice_nodes += static_cast<int64_t>(slice->nodes.size());
        auto serialized = serializer.SerializeNodes(step, slice::ParentClosure(*trace, *slice));
        if (!serialized.ok()) return Fail(serialized.status());
        auto encoded = encoder.Encode(*serialized);
        if (!encoded.ok()) return Fail(encoded.status());
        tokens += static_cast<int64_t>(encoded->size());
      }
      request_ms.push_back(1e3 * (bench::NowSeconds() - start));
      ++requests;
    }
  }
  double diagnose_total = 0;
  for (double ms : diagnose_ms) diagnose_total += ms;
  std::printf(
      "{\"bundles\":%zu,\"requests\":%lld,\"nodes\":%lld,\"slice_nodes\":%lld,\"tpe_tokens\":%lld,"
      "\"request_ms_median\":%.3f,\"request_ms_p90\":%.3f,\"request_ms_max\":%.3f,"
      "\"baseline_ms_median\":%.3f,\"baseline_ms_max\":%.3f,"
      "\"diagnose_ms_median\":%.3f,\"diagnose_ms_max\":%.3f,\"diagnose_ms_total\":%.3f,"
      "\"peak_rss_bytes\":%lld}\n",
      bundles.size(), static_cast<long long>(requests), static_cast<long long>(nodes),
      static_cast<long long>(slice_nodes), static_cast<long long>(tokens),
      Percentile(request_ms, 0.5), Percentile(request_ms, 0.9), Percentile(request_ms, 1.0),
      Percentile(baseline_ms, 0.5), Percentile(baseline_ms, 1.0), Percentile(diagnose_ms, 0.5),
      Percentile(diagnose_ms, 1.0), diagnose_total, static_cast<long long>(bench::PeakRssBytes()));
  return 0;
}
