#include "localize/step_features_parts.h"

#include <algorithm>
#include <map>
#include <utility>

namespace teller::localize {
namespace {

template <typename T>
size_t Bytes(const std::vector<T>& column) {
  return column.size() * sizeof(T);
}

// Per match of the run, ascending: max end - min end over the members every part saw.
void MergeMatchSkew(const std::vector<StepFeatureSummary>& parts,
                    MergedStepFeatureSummary* merged) {
  std::map<uint32_t, std::pair<int64_t, int64_t>> ends;
  for (const StepFeatureSummary& part : parts) {
    for (size_t i = 0; i < part.match.size(); ++i) {
      const int64_t min_end = part.match_min_end_ns[i], max_end = part.match_max_end_ns[i];
      auto [it, fresh] = ends.try_emplace(part.match[i], min_end, max_end);
      it->second.first = std::min(it->second.first, min_end);
      it->second.second = std::max(it->second.second, max_end);
    }
  }
  for (const auto& [match, extremes] : ends) {
    merged->match.push_back(match);
    merged->match_skew_ns.push_back(extremes.second - extremes.first);
  }
}

std::vector<int32_t> CompositionOf(const std::vector<int32_t>& flattened, size_t c) {
  const auto begin = flattened.begin() + static_cast<std::ptrdiff_t>(c * kOperatorFamilyCount);
  return std::vector<int32_t>(begin, begin + kOperatorFamilyCount);
}

// The median of `steps` counts of which `counted` are listed as (times, steps), the
// others 0: the (steps / 2)-th smallest, as nth_element picks it.
int32_t MedianWithAbsentAsZero(std::vector<std::pair<int32_t, int32_t>>* counted, int64_t steps) {
  int64_t below = steps;  // steps not listed count 0
  for (const auto& [times, listed] : *counted) below -= listed;
  const int64_t rank = steps / 2;
  if (rank < below) return 0;
  std::sort(counted->begin(), counted->end());
  for (const auto& [times, listed] : *counted) {
    below += listed;
    if (rank < below) return times;
  }
  return counted->empty() ? 0 : counted->back().first;
}

// Steps of each composition of the run, keyed by its counts (ascending).
std::map<std::vector<int32_t>, int64_t> MergeCompositions(
    const std::vector<StepFeatureSummary>& parts) {
  std::map<std::vector<int32_t>, int64_t> steps;
  for (const StepFeatureSummary& part : parts) {
    for (size_t c = 0; c < part.compositions(); ++c) {
      steps[CompositionOf(part.composition_family_count, c)] += part.composition_steps[c];
    }
  }
  return steps;
}

// The usual count of every (composition, bigram) of the run from the parts' histograms.
void MergeUsualBigrams(const std::vector<StepFeatureSummary>& parts,
                       MergedStepFeatureSummary* merged) {
  const std::map<std::vector<int32_t>, int64_t> steps = MergeCompositions(parts);
  std::map<std::vector<int32_t>, uint32_t> index;
  for (const auto& [composition, count] : steps) {
    index.emplace(composition, static_cast<uint32_t>(index.size()));
    merged->composition_family_count.insert(merged->composition_family_count.end(),
                                            composition.begin(), composition.end());
  }
  // (run's composition, bigram) -> (times, steps) of every part.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<int32_t, int32_t>>> counted;
  for (const StepFeatureSummary& part : parts) {
    std::vector<uint32_t> run_composition(part.compositions());
    for (size_t c = 0; c < part.compositions(); ++c) {
      run_composition[c] = index.at(CompositionOf(part.composition_family_count, c));
    }
    for (size_t i = 0; i < part.histogram_bigram.size(); ++i) {
      counted[{run_composition[part.histogram_composition[i]], part.histogram_bigram[i]}]
          .emplace_back(part.histogram_times[i], part.histogram_steps[i]);
    }
  }
  std::vector<int64_t> steps_of(index.size());
  for (const auto& [composition, count] : steps) steps_of[index.at(composition)] = count;
  merged->usual_begin.assign(1, 0);
  for (auto& [key, list] : counted) {
    const auto [composition, bigram] = key;
    while (merged->usual_begin.size() <= composition) {
      merged->usual_begin.push_back(static_cast<uint32_t>(merged->usual_bigram.size()));
    }
    const int32_t usual = MedianWithAbsentAsZero(&list, steps_of[composition]);
    if (usual == 0) continue;
    merged->usual_bigram.push_back(bigram);
    merged->usual_times.push_back(usual);
  }
  while (merged->usual_begin.size() <= index.size()) {
    merged->usual_begin.push_back(static_cast<uint32_t>(merged->usual_bigram.size()));
  }
}

// The usual count of `bigram` in composition c of the merge (0 when not listed).
int32_t UsualTimes(const MergedStepFeatureSummary& merged, uint32_t c, uint32_t bigram) {
  const auto begin = merged.usual_bigram.begin() + merged.usual_begin[c];
  const auto end = merged.usual_bigram.begin() + merged.usual_begin[c + 1];
  const auto found = std::lower_bound(begin, end, bigram);
  return found != end && *found == bigram
             ? merged.usual_times[static_cast<size_t>(found - merged.usual_bigram.begin())]
             : 0;
}

// Each composition of the part as the merge's index.
base::StatusOr<std::vector<uint32_t>> FindCompositions(const StepFeatureSummary& part,
                                                       const MergedStepFeatureSummary& merged) {
  std::map<std::vector<int32_t>, uint32_t> index;
  for (size_t c = 0; c < merged.compositions(); ++c) {
    index.emplace(CompositionOf(merged.composition_family_count, c), static_cast<uint32_t>(c));
  }
  std::vector<uint32_t> found(part.compositions());
  for (size_t c = 0; c < part.compositions(); ++c) {
    auto it = index.find(CompositionOf(part.composition_family_count, c));
    if (it == index.end()) {
      return base::NotFound("step features: composition {} of the part is not in the merge", c);
    }
    found[c] = it->second;
  }
  return found;
}

// Order breaks of every compute row: the step's kernel pairs, counted on the later
// kernel's family, beyond the usual count of the step's composition.
void CountOrderBreaks(const LocalStepFeatures& local, const std::vector<uint32_t>& run_composition,
                      const MergedStepFeatureSummary& merged, StepFeatures* out) {
  for (size_t row = 0; row < out->size(); ++row) {
    if (!IsComputeFamily(out->family[row])) continue;
    const uint32_t s = out->step[row].value();
    const uint32_t c = run_composition[local.step_composition[s]];
    const uint32_t family = static_cast<uint32_t>(out->family[row]);
    for (uint32_t i = local.step_bigrams_begin[s]; i < local.step_bigrams_begin[s + 1]; ++i) {
      const uint32_t bigram = local.step_bigram[i];
      if (bigram / kOperatorFamilyCount != family) continue;
      out->order_breaks[row] +=
          std::max(0, local.step_bigram_times[i] - UsualTimes(merged, c, bigram));
    }
  }
}

// Skew of every collective row: the largest skew of a match among its instances. Matches
// can include host records; skew belongs to the collective families.
base::Status SetCollectiveSkew(const model::Trace& part, const MergedStepFeatureSummary& merged,
                               StepFeatures* out) {
  const model::CollectiveMatchTable& matches = part.collective_matches;
  std::vector<int64_t> skew_by_event(part.events.size(), 0);
  for (size_t i = 0; i < matches.size(); ++i) {
    const uint32_t m = matches.match[i].value();
    const auto found = std::lower_bound(merged.match.begin(), merged.match.end(), m);
    if (found == merged.match.end() || *found != m) {
      return base::NotFound("step features: match {} of the part is not in the merge", m);
    }
    skew_by_event[matches.event[i].value()] =
        merged.match_skew_ns[static_cast<size_t>(found - merged.match.begin())];
  }
  for (size_t row = 0; row < out->size(); ++row) {
    if (!IsCollectiveFamily(out->family[row])) continue;
    const uint32_t begin = out->instances_begin[row];
    for (uint32_t i = begin; i < begin + static_cast<uint32_t>(out->count[row]); ++i) {
      const model::EventRow event = part.nodes.event[out->instances[i].value()];
      out->skew_ns[row] = std::max(out->skew_ns[row], skew_by_event[event.value()]);
    }
  }
  return base::OkStatus();
}

}  // namespace

size_t StepFeatureSummary::ColumnBytes() const {
  return Bytes(match) + Bytes(match_min_end_ns) + Bytes(match_max_end_ns) +
         Bytes(composition_family_count) + Bytes(composition_steps) + Bytes(histogram_composition) +
         Bytes(histogram_bigram) + Bytes(histogram_times) + Bytes(histogram_steps);
}

size_t MergedStepFeatureSummary::ColumnBytes() const {
  return Bytes(match) + Bytes(match_skew_ns) + Bytes(composition_family_count) +
         Bytes(usual_begin) + Bytes(usual_bigram) + Bytes(usual_times);
}

base::Status CheckStepFeatureSummary(const StepFeatureSummary& s) {
  const size_t matches = s.match.size(), histogram = s.histogram_bigram.size();
  if (s.match_min_end_ns.size() != matches || s.match_max_end_ns.size() != matches ||
      s.composition_family_count.size() != s.compositions() * kOperatorFamilyCount ||
      s.histogram_composition.size() != histogram || s.histogram_times.size() != histogram ||
      s.histogram_steps.size() != histogram) {
    return base::DataLoss("step feature summary: columns of different lengths");
  }
  if (!std::is_sorted(s.match.begin(), s.match.end()) ||
      std::adjacent_find(s.match.begin(), s.match.end()) != s.match.end()) {
    return base::DataLoss("step feature summary: match ids not distinct and ascending");
  }
  for (size_t i = 0; i < matches; ++i) {
    if (s.match_min_end_ns[i] > s.match_max_end_ns[i]) {
      return base::DataLoss("step feature summary: match {} has min end > max end", s.match[i]);
    }
  }
  constexpr uint32_t kBigrams = kOperatorFamilyCount * kOperatorFamilyCount;
  std::map<std::pair<uint32_t, uint32_t>, int64_t> steps;  // (composition, bigram) -> steps
  for (size_t i = 0; i < histogram; ++i) {
    const uint32_t c = s.histogram_composition[i];
    if (c >= s.compositions() || s.histogram_bigram[i] >= kBigrams || s.histogram_times[i] <= 0 ||
        s.histogram_steps[i] <= 0) {
      return base::DataLoss("step feature summary: histogram row {} out of range", i);
    }
    if ((steps[{c, s.histogram_bigram[i]}] += s.histogram_steps[i]) > s.composition_steps[c]) {
      return base::DataLoss("step feature summary: histogram row {} counts more steps", i);
    }
  }
  return base::OkStatus();
}

MergedStepFeatureSummary MergeStepFeatureSummaries(const std::vector<StepFeatureSummary>& parts) {
  MergedStepFeatureSummary merged;
  MergeMatchSkew(parts, &merged);
  MergeUsualBigrams(parts, &merged);
  return merged;
}

base::StatusOr<StepFeatures> FinishStepFeatures(const model::Trace& part, LocalStepFeatures local,
                                                const MergedStepFeatureSummary& merged) {
  TELLER_ASSIGN_OR_RETURN(const std::vector<uint32_t> run_composition,
                          FindCompositions(local.summary, merged));
  StepFeatures out = std::move(local.features);
  TELLER_RETURN_IF_ERROR(SetCollectiveSkew(part, merged, &out));
  CountOrderBreaks(local, run_composition, merged, &out);
  return out;
}

}  // namespace teller::localize
