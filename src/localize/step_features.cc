#include "localize/step_features.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <utility>

#include "localize/step_features_parts.h"

namespace teller::localize {

std::string_view FeatureName(Feature feature) {
  static constexpr std::array<std::string_view, kFeatureCount> kNames = {
      "count",  "total_ns", "mean_ns", "max_ns",      "queue_max_ns",
      "gap_ns", "share",    "skew_ns", "order_breaks"};
  return kNames[static_cast<size_t>(feature)];
}

double StepFeatures::Value(size_t row, Feature feature) const {
  switch (feature) {
    case Feature::kCount:
      return static_cast<double>(count[row]);
    case Feature::kTotalNs:
      return static_cast<double>(total_ns[row]);
    case Feature::kMeanNs:
      return static_cast<double>(mean_ns[row]);
    case Feature::kMaxNs:
      return static_cast<double>(max_ns[row]);
    case Feature::kQueueMaxNs:
      return static_cast<double>(queue_max_ns[row]);
    case Feature::kGapNs:
      return static_cast<double>(gap_ns[row]);
    case Feature::kShare:
      return share[row];
    case Feature::kSkewNs:
      return static_cast<double>(skew_ns[row]);
    case Feature::kOrderBreaks:
      return static_cast<double>(order_breaks[row]);
  }
  return 0.0;
}

namespace {

struct Instance {
  int64_t start_ns;
  int64_t end_ns;
  model::NodeIndex node;
};

// A step's compute kernels as (family * kOperatorFamilyCount + predecessor family,
// instances) pairs, ascending: each kernel after the one before it on its stream (order
// is program order within a stream; across streams it is timing).
void AppendStreamBigrams(std::vector<std::tuple<uint32_t, int64_t, OperatorFamily>>* order,
                         LocalStepFeatures* local) {
  std::sort(order->begin(), order->end());
  std::map<uint32_t, int32_t> counts;
  for (size_t i = 1; i < order->size(); ++i) {
    const auto& [stream, start, family] = (*order)[i];
    const auto& [previous_stream, previous_start, previous_family] = (*order)[i - 1];
    if (stream != previous_stream) continue;
    ++counts[static_cast<uint32_t>(family) * kOperatorFamilyCount +
             static_cast<uint32_t>(previous_family)];
  }
  for (const auto& [bigram, times] : counts) {
    local->step_bigram.push_back(bigram);
    local->step_bigram_times.push_back(times);
  }
  local->step_bigrams_begin.push_back(static_cast<uint32_t>(local->step_bigram.size()));
}

// The instances of one family in a step, sorted by start, as one row.
void AppendFamilyRow(uint32_t step, size_t f, std::vector<Instance>* list, int64_t step_ns,
                     int64_t queue_total, int64_t queue_max, StepFeatures* out) {
  std::sort(list->begin(), list->end(), [](const Instance& a, const Instance& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.node < b.node;
  });
  int64_t total = 0, max_dur = 0, gap = 0, covered_end = list->front().start_ns;
  out->instances_begin.push_back(static_cast<uint32_t>(out->instances.size()));
  for (const Instance& inst : *list) {
    const int64_t dur = inst.end_ns - inst.start_ns;
    total += dur;
    max_dur = std::max(max_dur, dur);
    gap += std::max<int64_t>(0, inst.start_ns - covered_end);
    covered_end = std::max(covered_end, inst.end_ns);
    out->instances.push_back(inst.node);
  }
  const int64_t count = static_cast<int64_t>(list->size());
  out->step.push_back(model::StepIndex(step));
  out->family.push_back(static_cast<OperatorFamily>(f));
  out->count.push_back(count);
  out->total_ns.push_back(total);
  out->mean_ns.push_back(total / count);
  out->max_ns.push_back(max_dur);
  out->queue_total_ns.push_back(queue_total);
  out->queue_max_ns.push_back(queue_max);
  out->gap_ns.push_back(gap);
  // feature_rows_wire.cc derives it the same way (step_ns: the step's duration, at least 1).
  out->share.push_back(static_cast<double>(total) / static_cast<double>(step_ns));
  out->skew_ns.push_back(0);
  out->order_breaks.push_back(0);
}

// Per match with members in the part: the earliest and latest end of those members.
void SummarizeMatchEnds(const model::Trace& part, StepFeatureSummary* summary) {
  const model::CollectiveMatchTable& matches = part.collective_matches;
  std::map<uint32_t, std::pair<int64_t, int64_t>> ends;
  for (size_t i = 0; i < matches.size(); ++i) {
    const int64_t end = part.events.end_ns(matches.event[i]);
    auto [it, fresh] = ends.try_emplace(matches.match[i].value(), end, end);
    it->second.first = std::min(it->second.first, end);
    it->second.second = std::max(it->second.second, end);
  }
  for (const auto& [match, extremes] : ends) {
    summary->match.push_back(match);
    summary->match_min_end_ns.push_back(extremes.first);
    summary->match_max_end_ns.push_back(extremes.second);
  }
}

// The steps' kernel pairs as a histogram per (composition, bigram, times).
void SummarizeBigrams(LocalStepFeatures* local) {
  std::map<std::tuple<uint32_t, uint32_t, int32_t>, int32_t> steps;
  for (size_t s = 0; s < local->step_composition.size(); ++s) {
    for (uint32_t i = local->step_bigrams_begin[s]; i < local->step_bigrams_begin[s + 1]; ++i) {
      ++steps[{local->step_composition[s], local->step_bigram[i], local->step_bigram_times[i]}];
    }
  }
  StepFeatureSummary& summary = local->summary;
  for (const auto& [key, count] : steps) {
    summary.histogram_composition.push_back(std::get<0>(key));
    summary.histogram_bigram.push_back(std::get<1>(key));
    summary.histogram_times.push_back(std::get<2>(key));
    summary.histogram_steps.push_back(count);
  }
}

}  // namespace

LocalStepFeatures ComputeLocalStepFeatures(const model::Trace& trace) {
  LocalStepFeatures local;
  StepFeatures& out = local.features;
  FamilyCache families(trace);
  const model::EventTable& events = trace.events;
  const model::NodeTable& nodes = trace.nodes;
  std::vector<std::vector<Instance>> by_family(kOperatorFamilyCount);
  std::vector<int64_t> queue_total(kOperatorFamilyCount), queue_max(kOperatorFamilyCount);
  // (stream, start, family) of the step's compute kernels.
  std::vector<std::tuple<uint32_t, int64_t, OperatorFamily>> compute_order;
  // Per step: which compute kernels it ran (instances of each family), and in what order.
  std::map<std::vector<int32_t>, uint32_t> composition_ids;
  std::vector<int32_t> composition(kOperatorFamilyCount, 0);
  local.step_composition.resize(trace.steps.size(), 0);
  local.step_bigrams_begin.push_back(0);
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    for (auto& list : by_family) list.clear();
    std::fill(queue_total.begin(), queue_total.end(), 0);
    std::fill(queue_max.begin(), queue_max.end(), 0);
    const uint32_t begin = trace.steps.node_begin[s].value();
    const uint32_t end = trace.steps.node_end[s].value();
    for (uint32_t n = begin; n < end; ++n) {
      const model::EventRow row = nodes.event[n];
      const model::Layer layer = events.layer[row.value()];
      if (layer == model::Layer::kStep) continue;
      const OperatorFamily family = families.Get(row);
      const size_t f = static_cast<size_t>(family);
      const int64_t start = events.start_ns[row.value()];
      by_family[f].push_back({start, events.end_ns(row), model::NodeIndex(n)});
      if (IsComputeFamily(family)) {
        compute_order.emplace_back(events.thread[row.value()].value(), start, family);
      }
      if (IsDeviceFamily(family) && nodes.parent[n].valid()) {
        const model::EventRow launch = nodes.event[nodes.parent[n].value()];
        const model::Layer parent_layer = events.layer[launch.value()];
        if (parent_layer == model::Layer::kRt || parent_layer == model::Layer::kDrv) {
          const int64_t queue = std::max<int64_t>(0, start - events.start_ns[launch.value()]);
          queue_total[f] += queue;
          queue_max[f] = std::max(queue_max[f], queue);
        }
      }
    }
    const int64_t step_ns = std::max<int64_t>(1, trace.steps.end_ns[s] - trace.steps.start_ns[s]);
    for (size_t f = 0; f < by_family.size(); ++f) {
      if (by_family[f].empty()) continue;
      AppendFamilyRow(static_cast<uint32_t>(s), f, &by_family[f], step_ns, queue_total[f],
                      queue_max[f], &out);
    }
    for (size_t f = 0; f < by_family.size(); ++f) {
      composition[f] = IsComputeFamily(static_cast<OperatorFamily>(f))
                           ? static_cast<int32_t>(by_family[f].size())
                           : 0;
    }
    auto [it, fresh] = composition_ids.try_emplace(composition, composition_ids.size());
    if (fresh) {
      local.summary.composition_family_count.insert(local.summary.composition_family_count.end(),
                                                    composition.begin(), composition.end());
      local.summary.composition_steps.push_back(0);
    }
    local.step_composition[s] = it->second;
    ++local.summary.composition_steps[it->second];
    AppendStreamBigrams(&compute_order, &local);
    compute_order.clear();
  }
  SummarizeMatchEnds(trace, &local.summary);
  SummarizeBigrams(&local);
  return local;
}

StepFeatures ComputeStepFeatures(const model::Trace& trace) {
  LocalStepFeatures local = ComputeLocalStepFeatures(trace);
  const MergedStepFeatureSummary merged = MergeStepFeatureSummaries({local.summary});
  base::StatusOr<StepFeatures> features = FinishStepFeatures(trace, std::move(local), merged);
  // The merge holds the trace's own matches and compositions: it cannot fail.
  return features.ok() ? std::move(features).value() : StepFeatures{};
}

}  // namespace teller::localize
