#include "localize/feature_rows.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "localize/baseline.h"

namespace teller::localize {
namespace {

using Ranked = std::vector<std::pair<int64_t, model::NodeIndex>>;

// The row's instances keyed by duration and by launch-to-start delay (start less its
// parent's start; its duration without a parent).
void KeyInstances(const model::Trace& trace, const StepFeatures& features, size_t row,
                  Ranked* by_duration, Ranked* by_delay) {
  by_duration->clear();
  by_delay->clear();
  const uint32_t begin = features.instances_begin[row];
  const uint32_t end = begin + static_cast<uint32_t>(features.count[row]);
  for (uint32_t i = begin; i < end; ++i) {
    const model::NodeIndex node = features.instances[i];
    const model::EventRow event = trace.nodes.event[node.value()];
    const int64_t dur_ns = trace.events.dur_ns[event.value()];
    const model::NodeIndex parent = trace.nodes.parent[node.value()];
    by_duration->emplace_back(dur_ns, node);
    by_delay->emplace_back(
        parent.valid() ? trace.events.start_ns[event.value()] -
                             trace.events.start_ns[trace.nodes.event[parent.value()].value()]
                       : dur_ns,
        node);
  }
}

// The first `keep` of `ranked` by key (largest first, ties by node) as offsets from the
// step's first node.
void AppendTop(Ranked* ranked, size_t keep, uint32_t first_node, std::vector<uint32_t>* out) {
  keep = std::min(ranked->size(), keep);
  std::partial_sort(ranked->begin(), ranked->begin() + static_cast<std::ptrdiff_t>(keep),
                    ranked->end(), [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  for (size_t i = 0; i < keep; ++i) out->push_back((*ranked)[i].second.value() - first_node);
}

// The step columns of a trace's steps.
void AddSteps(const model::Trace& part, FeatureRows* rows) {
  std::map<std::string, uint32_t> name_ids;
  const size_t steps = part.steps.size();
  for (size_t s = 0; s < steps; ++s) {
    const model::StepIndex step(static_cast<uint32_t>(s));
    rows->rank.push_back(part.steps.rank[s]);
    rows->number.push_back(part.steps.number[s]);
    rows->global_step.push_back(part.steps.global_step[s]);
    rows->phase.push_back(part.steps.phase[s]);
    std::string name;
    for (char c : part.str(part.steps.name[s])) {
      if (c < '0' || c > '9') name.push_back(c);
    }
    auto [it, added] = name_ids.try_emplace(name, static_cast<uint32_t>(rows->names.size()));
    if (added) rows->names.push_back(std::move(name));
    rows->name.push_back(it->second);
    rows->batch_bucket.push_back(BatchBucket(part, step));
    rows->requests.push_back(part.steps.requests_count[s]);
    rows->start_ns.push_back(part.steps.start_ns[s]);
    rows->dur_ns.push_back(part.steps.end_ns[s] - part.steps.start_ns[s]);
    rows->first_node.push_back(part.steps.node_begin[s].value());
    rows->has_step_requests |= part.steps.requests_count[s] > 0;
  }
}

// Appends column `from` to `to`.
template <typename T>
void Append(const std::vector<T>& from, std::vector<T>* to) {
  to->insert(to->end(), from.begin(), from.end());
}

// Appends a CSR's offsets (without its leading 0), shifted by `base`.
void AppendOffsets(const std::vector<uint32_t>& from, uint32_t base, std::vector<uint32_t>* to) {
  for (size_t i = 1; i < from.size(); ++i) to->push_back(from[i] + base);
}

void AppendFeatures(const StepFeatures& from, uint32_t step_base, StepFeatures* to) {
  for (model::StepIndex step : from.step)
    to->step.push_back(model::StepIndex(step.value() + step_base));
  Append(from.family, &to->family);
  Append(from.count, &to->count);
  Append(from.total_ns, &to->total_ns);
  Append(from.mean_ns, &to->mean_ns);
  Append(from.max_ns, &to->max_ns);
  Append(from.queue_max_ns, &to->queue_max_ns);
  Append(from.gap_ns, &to->gap_ns);
  Append(from.share, &to->share);
  Append(from.skew_ns, &to->skew_ns);
  Append(from.order_breaks, &to->order_breaks);
}

}  // namespace

std::vector<model::NodeIndex> FeatureRows::Examples(size_t row, Feature feature,
                                                    size_t count) const {
  const bool by_delay =
      feature == Feature::kQueueMaxNs && delayed_begin[row + 1] > delayed_begin[row];
  const std::vector<uint32_t>& offsets = by_delay ? delayed : longest;
  const std::vector<uint32_t>& begin = by_delay ? delayed_begin : longest_begin;
  const uint32_t first = first_node[features.step[row].value()];
  std::vector<model::NodeIndex> nodes;
  for (uint32_t i = begin[row]; i < begin[row + 1] && nodes.size() < count; ++i) {
    nodes.push_back(model::NodeIndex(first + offsets[i]));
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

FeatureRows FeatureRowsOfPart(const model::Trace& part, const StepFeatures& features,
                              uint32_t examples) {
  FeatureRows rows;
  rows.examples = examples;
  rows.nodes = static_cast<uint32_t>(part.nodes.size());
  AddSteps(part, &rows);
  AppendFeatures(features, 0, &rows.features);
  rows.longest_begin.push_back(0);
  rows.delayed_begin.push_back(0);
  Ranked by_duration, by_delay;
  std::vector<uint32_t> delayed;
  for (size_t row = 0; row < features.size(); ++row) {
    const uint32_t first = rows.first_node[features.step[row].value()];
    KeyInstances(part, features, row, &by_duration, &by_delay);
    const size_t longest_begin = rows.longest.size();
    AppendTop(&by_duration, examples, first, &rows.longest);
    delayed.clear();
    AppendTop(&by_delay, examples, first, &delayed);
    if (!std::equal(delayed.begin(), delayed.end(), rows.longest.begin() + longest_begin,
                    rows.longest.end())) {
      Append(delayed, &rows.delayed);
    }
    rows.longest_begin.push_back(static_cast<uint32_t>(rows.longest.size()));
    rows.delayed_begin.push_back(static_cast<uint32_t>(rows.delayed.size()));
  }
  return rows;
}

FeatureRows ConcatFeatureRows(const std::vector<FeatureRows>& parts) {
  FeatureRows rows;
  rows.longest_begin.push_back(0);
  rows.delayed_begin.push_back(0);
  std::map<std::string_view, uint32_t> name_ids;
  std::vector<std::string> names;
  rows.examples = parts.empty() ? 0 : UINT32_MAX;
  for (const FeatureRows& part : parts) {
    rows.examples = std::min(rows.examples, part.examples);
    const uint32_t step_base = static_cast<uint32_t>(rows.steps());
    const uint32_t node_base = rows.nodes;
    Append(part.rank, &rows.rank);
    Append(part.number, &rows.number);
    Append(part.global_step, &rows.global_step);
    Append(part.phase, &rows.phase);
    for (uint32_t id : part.name) {
      auto [it, added] =
          name_ids.try_emplace(part.names[id], static_cast<uint32_t>(name_ids.size()));
      if (added) names.push_back(part.names[id]);
      rows.name.push_back(it->second);
    }
    Append(part.batch_bucket, &rows.batch_bucket);
    Append(part.requests, &rows.requests);
    Append(part.start_ns, &rows.start_ns);
    Append(part.dur_ns, &rows.dur_ns);
    for (uint32_t node : part.first_node) rows.first_node.push_back(node + node_base);
    AppendFeatures(part.features, step_base, &rows.features);
    AppendOffsets(part.longest_begin, static_cast<uint32_t>(rows.longest.size()),
                  &rows.longest_begin);
    Append(part.longest, &rows.longest);
    AppendOffsets(part.delayed_begin, static_cast<uint32_t>(rows.delayed.size()),
                  &rows.delayed_begin);
    Append(part.delayed, &rows.delayed);
    rows.nodes += part.nodes;
    rows.has_step_requests |= part.has_step_requests;
  }
  rows.names = std::move(names);
  return rows;
}

namespace {

base::Status CheckOffsets(const std::vector<uint32_t>& begin, size_t rows, size_t values,
                          std::string_view what) {
  if (begin.size() != rows + 1 || begin.front() != 0 || begin.back() != values ||
      !std::is_sorted(begin.begin(), begin.end())) {
    return base::DataLoss("{}_begin not {} + 1 offsets ascending from 0 to {}", what, rows, values);
  }
  return base::OkStatus();
}

base::Status CheckStepColumns(const FeatureRows& rows) {
  const size_t steps = rows.steps();
  const size_t sizes[] = {rows.number.size(),   rows.global_step.size(),  rows.phase.size(),
                          rows.name.size(),     rows.batch_bucket.size(), rows.requests.size(),
                          rows.start_ns.size(), rows.dur_ns.size(),       rows.first_node.size()};
  for (size_t size : sizes) {
    if (size != steps) return base::DataLoss("{} steps but a step column of {}", steps, size);
  }
  for (size_t s = 0; s < steps; ++s) {
    if (rows.name[s] >= rows.names.size()) return base::DataLoss("step {}: name out of range", s);
    if (rows.phase[s] > model::StepPhase::kMixed)
      return base::DataLoss("step {}: unknown phase", s);
    if (rows.first_node[s] >= rows.nodes ||
        (s > 0 && rows.first_node[s] <= rows.first_node[s - 1])) {
      return base::DataLoss("step {}: first node not ascending below {}", s, rows.nodes);
    }
  }
  return base::OkStatus();
}

base::Status CheckFeatureColumns(const FeatureRows& rows) {
  const StepFeatures& f = rows.features;
  const size_t count = f.size();
  const size_t sizes[] = {f.family.size(),      f.count.size(),  f.total_ns.size(),
                          f.mean_ns.size(),     f.max_ns.size(), f.queue_max_ns.size(),
                          f.gap_ns.size(),      f.share.size(),  f.skew_ns.size(),
                          f.order_breaks.size()};
  for (size_t size : sizes) {
    if (size != count) return base::DataLoss("{} rows but a feature column of {}", count, size);
  }
  for (size_t row = 0; row < count; ++row) {
    if (f.step[row].value() >= rows.steps() || (row > 0 && f.step[row] < f.step[row - 1])) {
      return base::DataLoss("row {}: step not in step order below {}", row, rows.steps());
    }
    if (static_cast<size_t>(f.family[row]) >= kOperatorFamilyCount) {
      return base::DataLoss("row {}: unknown family", row);
    }
    if (!std::isfinite(f.share[row])) return base::DataLoss("row {}: share not a number", row);
  }
  return base::OkStatus();
}

// Each row's examples at most `examples` and inside its step's nodes.
base::Status CheckExamples(const FeatureRows& rows, const std::vector<uint32_t>& begin,
                           const std::vector<uint32_t>& offsets, std::string_view what) {
  for (size_t row = 0; row < rows.features.size(); ++row) {
    const uint32_t s = rows.features.step[row].value();
    const uint32_t span =
        (s + 1 < rows.steps() ? rows.first_node[s + 1] : rows.nodes) - rows.first_node[s];
    if (begin[row + 1] - begin[row] > rows.examples) {
      return base::DataLoss("row {}: more {} examples than {}", row, what, rows.examples);
    }
    for (uint32_t i = begin[row]; i < begin[row + 1]; ++i) {
      if (offsets[i] >= span)
        return base::DataLoss("row {}: a {} example outside its step", row, what);
    }
  }
  return base::OkStatus();
}

}  // namespace

base::Status CheckFeatureRows(const FeatureRows& rows) {
  TELLER_RETURN_IF_ERROR(CheckStepColumns(rows));
  TELLER_RETURN_IF_ERROR(CheckFeatureColumns(rows));
  const size_t count = rows.features.size();
  TELLER_RETURN_IF_ERROR(CheckOffsets(rows.longest_begin, count, rows.longest.size(), "longest"));
  TELLER_RETURN_IF_ERROR(CheckOffsets(rows.delayed_begin, count, rows.delayed.size(), "delayed"));
  TELLER_RETURN_IF_ERROR(CheckExamples(rows, rows.longest_begin, rows.longest, "longest"));
  return CheckExamples(rows, rows.delayed_begin, rows.delayed, "delayed");
}

}  // namespace teller::localize
