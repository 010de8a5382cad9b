#include "localize/step_features.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <tuple>

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

// Skew of every matched collective event: max end - min end over its match.
std::vector<int64_t> CollectiveSkewByEvent(const model::Trace& trace) {
  std::vector<int64_t> skew(trace.events.size(), 0);
  const model::CollectiveMatchTable& matches = trace.collective_matches;
  if (matches.size() == 0) return skew;
  uint32_t match_count = 0;
  for (size_t i = 0; i < matches.size(); ++i) {
    match_count = std::max(match_count, matches.match[i].value() + 1);
  }
  std::vector<int64_t> min_end(match_count, std::numeric_limits<int64_t>::max());
  std::vector<int64_t> max_end(match_count, std::numeric_limits<int64_t>::min());
  for (size_t i = 0; i < matches.size(); ++i) {
    const uint32_t m = matches.match[i].value();
    const int64_t end = trace.events.end_ns(matches.event[i]);
    min_end[m] = std::min(min_end[m], end);
    max_end[m] = std::max(max_end[m], end);
  }
  for (size_t i = 0; i < matches.size(); ++i) {
    const uint32_t m = matches.match[i].value();
    skew[matches.event[i].value()] = max_end[m] - min_end[m];
  }
  return skew;
}

struct Instance {
  int64_t start_ns;
  int64_t end_ns;
  model::NodeIndex node;
};

// A step's compute kernels as (family * kOperatorFamilyCount + predecessor family,
// instances) pairs, sorted: each kernel after the one before it on its stream (order
// is program order within a stream; across streams it is timing).
using Bigrams = std::vector<std::pair<uint32_t, int32_t>>;
Bigrams StreamBigrams(std::vector<std::tuple<uint32_t, int64_t, OperatorFamily>>* order) {
  std::sort(order->begin(), order->end());
  std::map<uint32_t, int32_t> counts;
  for (size_t i = 1; i < order->size(); ++i) {
    const auto& [stream, start, family] = (*order)[i];
    const auto& [previous_stream, previous_start, previous_family] = (*order)[i - 1];
    if (stream != previous_stream) continue;
    ++counts[static_cast<uint32_t>(family) * kOperatorFamilyCount +
             static_cast<uint32_t>(previous_family)];
  }
  return Bigrams(counts.begin(), counts.end());
}

// The usual count of each bigram over steps of one composition: its median, a step
// without it counting 0.
std::map<uint32_t, int32_t> UsualBigrams(const std::vector<const Bigrams*>& steps) {
  std::map<uint32_t, std::vector<int32_t>> seen;
  for (const Bigrams* bigrams : steps) {
    for (const auto& [pair, count] : *bigrams) seen[pair].push_back(count);
  }
  std::map<uint32_t, int32_t> usual;
  for (auto& [pair, counts] : seen) {
    counts.resize(steps.size(), 0);
    std::nth_element(counts.begin(), counts.begin() + counts.size() / 2, counts.end());
    usual[pair] = counts[counts.size() / 2];
  }
  return usual;
}

// Order breaks of every row: per step, the bigrams it ran more often than the steps
// that ran the same kernels (its composition) usually do, counted on the later kernel's
// family. Reordering two operators makes new bigrams; a step of another composition
// (one request's prefill, other experts) is judged among its own kind.
void CountOrderBreaks(const std::vector<uint32_t>& composition_of_step,
                      const std::vector<Bigrams>& step_bigrams, StepFeatures* out) {
  std::map<uint32_t, std::vector<const Bigrams*>> by_composition;
  for (size_t s = 0; s < step_bigrams.size(); ++s) {
    by_composition[composition_of_step[s]].push_back(&step_bigrams[s]);
  }
  std::map<uint32_t, std::map<uint32_t, int32_t>> usual;
  for (const auto& [composition, steps] : by_composition) usual[composition] = UsualBigrams(steps);
  for (size_t row = 0; row < out->size(); ++row) {
    if (!IsComputeFamily(out->family[row])) continue;
    const uint32_t s = out->step[row].value();
    const std::map<uint32_t, int32_t>& expected = usual[composition_of_step[s]];
    const uint32_t family = static_cast<uint32_t>(out->family[row]);
    for (const auto& [pair, count] : step_bigrams[s]) {
      if (pair / kOperatorFamilyCount != family) continue;
      auto found = expected.find(pair);
      out->order_breaks[row] += std::max(0, count - (found == expected.end() ? 0 : found->second));
    }
  }
}

}  // namespace

StepFeatures ComputeStepFeatures(const model::Trace& trace) {
  StepFeatures out;
  FamilyCache families(trace);
  const std::vector<int64_t> skew_by_event = CollectiveSkewByEvent(trace);
  const model::EventTable& events = trace.events;
  const model::NodeTable& nodes = trace.nodes;
  std::vector<std::vector<Instance>> by_family(kOperatorFamilyCount);
  std::vector<int64_t> queue_total(kOperatorFamilyCount), queue_max(kOperatorFamilyCount);
  std::vector<int64_t> skew_max(kOperatorFamilyCount);
  // (stream, start, family) of the step's compute kernels.
  std::vector<std::tuple<uint32_t, int64_t, OperatorFamily>> compute_order;
  // Per step: which compute kernels it ran (instances of each family), and in what order.
  std::map<std::vector<int64_t>, uint32_t> composition_ids;
  std::vector<uint32_t> composition_of_step(trace.steps.size(), 0);
  std::vector<Bigrams> step_bigrams(trace.steps.size());
  std::vector<int64_t> composition(kOperatorFamilyCount, 0);
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    for (auto& list : by_family) list.clear();
    std::fill(queue_total.begin(), queue_total.end(), 0);
    std::fill(queue_max.begin(), queue_max.end(), 0);
    std::fill(skew_max.begin(), skew_max.end(), 0);
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
      if (IsDeviceFamily(family) && nodes.parent[n].valid()) {
        const model::EventRow launch = nodes.event[nodes.parent[n].value()];
        const model::Layer parent_layer = events.layer[launch.value()];
        if (parent_layer == model::Layer::kRt || parent_layer == model::Layer::kDrv) {
          const int64_t queue = std::max<int64_t>(0, start - events.start_ns[launch.value()]);
          queue_total[f] += queue;
          queue_max[f] = std::max(queue_max[f], queue);
        }
      }
      // Matches can include host records; skew belongs to the collective families.
      if (IsCollectiveFamily(family))
        skew_max[f] = std::max(skew_max[f], skew_by_event[row.value()]);
    }
    const int64_t step_ns = std::max<int64_t>(1, trace.steps.end_ns[s] - trace.steps.start_ns[s]);
    for (size_t f = 0; f < by_family.size(); ++f) {
      std::vector<Instance>& list = by_family[f];
      if (list.empty()) continue;
      std::sort(list.begin(), list.end(), [](const Instance& a, const Instance& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.node < b.node;
      });
      int64_t total = 0, max_dur = 0, gap = 0, covered_end = list.front().start_ns;
      out.instances_begin.push_back(static_cast<uint32_t>(out.instances.size()));
      for (const Instance& inst : list) {
        const int64_t dur = inst.end_ns - inst.start_ns;
        total += dur;
        max_dur = std::max(max_dur, dur);
        gap += std::max<int64_t>(0, inst.start_ns - covered_end);
        covered_end = std::max(covered_end, inst.end_ns);
        if (IsComputeFamily(static_cast<OperatorFamily>(f))) {
          const uint32_t stream = events.thread[nodes.event[inst.node.value()].value()].value();
          compute_order.emplace_back(stream, inst.start_ns, static_cast<OperatorFamily>(f));
        }
        out.instances.push_back(inst.node);
      }
      const int64_t count = static_cast<int64_t>(list.size());
      out.step.push_back(model::StepIndex(static_cast<uint32_t>(s)));
      out.family.push_back(static_cast<OperatorFamily>(f));
      out.count.push_back(count);
      out.total_ns.push_back(total);
      out.mean_ns.push_back(total / count);
      out.max_ns.push_back(max_dur);
      out.queue_total_ns.push_back(queue_total[f]);
      out.queue_max_ns.push_back(queue_max[f]);
      out.gap_ns.push_back(gap);
      out.share.push_back(static_cast<double>(total) / static_cast<double>(step_ns));
      out.skew_ns.push_back(skew_max[f]);
      out.order_breaks.push_back(0);
    }
    for (size_t f = 0; f < by_family.size(); ++f) {
      composition[f] = IsComputeFamily(static_cast<OperatorFamily>(f))
                           ? static_cast<int64_t>(by_family[f].size())
                           : 0;
    }
    composition_of_step[s] =
        composition_ids.try_emplace(composition, composition_ids.size()).first->second;
    step_bigrams[s] = StreamBigrams(&compute_order);
    compute_order.clear();
  }
  CountOrderBreaks(composition_of_step, step_bigrams, &out);
  return out;
}

}  // namespace teller::localize
