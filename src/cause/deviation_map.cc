#include "cause/deviation_map.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "base/median.h"
#include "cause/baseline_fit.h"
#include "cause/step_measurements.h"
#include "localize/baseline.h"
#include "localize/step_features.h"

namespace teller::cause {

using localize::OperatorFamily;

std::string_view ChannelName(Channel channel) {
  static constexpr std::array<std::string_view, kChannelCount> kNames = {"compute",
                                                                         "device_copy",
                                                                         "collective",
                                                                         "launch",
                                                                         "collective_launch",
                                                                         "host_copy",
                                                                         "sync",
                                                                         "alloc",
                                                                         "runtime_other",
                                                                         "frontend",
                                                                         "backend",
                                                                         "step_gap",
                                                                         "step_time",
                                                                         "order_breaks",
                                                                         "failed_calls",
                                                                         "collective_transfer",
                                                                         "stall"};
  return kNames[static_cast<size_t>(channel)];
}

bool IsCountChannel(Channel channel) {
  return channel == Channel::kOrderBreaks || channel == Channel::kFailedCalls;
}

namespace {

// (channel, family) of one cell; family is kUnnamed except for compute.
using CellKey = std::pair<Channel, OperatorFamily>;

// Steps a fault may be found in: serving has begun (when the trace says which steps
// serve requests), and not the rank's first such step (cold caches, lazy set-up).
std::vector<uint32_t> ScoredSteps(const StepMeasurements& rows) {
  model::TimeNs first_serving_ns = std::numeric_limits<model::TimeNs>::max();
  for (size_t s = 0; s < rows.steps(); ++s) {
    if (rows.serving[s]) first_serving_ns = std::min(first_serving_ns, rows.start_ns[s]);
  }
  std::vector<uint32_t> order;
  for (uint32_t s = 0; s < rows.steps(); ++s) {
    if (rows.has_step_requests && rows.start_ns[s] < first_serving_ns) continue;
    order.push_back(s);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(rows.rank[a], rows.start_ns[a]) < std::tie(rows.rank[b], rows.start_ns[b]);
  });
  std::vector<uint32_t> scored;
  std::set<int32_t> started;
  for (uint32_t s : order) {
    if (started.insert(rows.rank[s]).second) continue;
    scored.push_back(s);
  }
  return scored;
}

// What a channel should measure, and whether it reads the step's padded size.
struct FittedChannel {
  ChannelBaseline baseline;
  bool padded = false;
  double Expected(const StepShape& shape) const {
    return baseline.Expected(padded ? Padded(shape) : shape);
  }
  double sigma() const { return baseline.sigma(); }
  double ContextSlope() const { return baseline.ContextSlope(); }
};

// Whether some step's padded size differs from its own (replicas of different batches).
bool AnyPadded(const std::vector<StepShape>& shapes) {
  return std::any_of(shapes.begin(), shapes.end(),
                     [](const StepShape& shape) { return shape.padded_size != shape.size; });
}

// Channels of the device's work (and what waits for it), which runs on a padded batch.
bool FollowsDeviceWork(Channel channel) {
  switch (channel) {
    case Channel::kCompute:
    case Channel::kDeviceCopy:
    case Channel::kCollective:
    case Channel::kCollectiveTransfer:
    case Channel::kSync:
    case Channel::kStepTime:
      return true;
    default:
      return false;
  }
}

// Device work and the step's time follow the batch: its tokens, its requests and, for
// attention, the KV context they carry (the linear model when the trace says how many
// tokens each step ran). Host work is a fixed cost per step plus a cost per sequence; a
// collective, and a wait for the device, a latency plus what grows with the tokens (the
// bytes moved, the work waited for) (baseline_fit.h).
ShapeModel ShapeModelOf(CellKey cell, bool has_tokens) {
  // Fewer tokens activate fewer experts, each loading its weights: expert kernels
  // saturate with the batch where attention and GEMMs grow along a line.
  if (cell.first == Channel::kCompute && cell.second == OperatorFamily::kMoe && has_tokens) {
    return ShapeModel::kSaturating;
  }
  switch (cell.first) {
    case Channel::kCompute:
      // Only attention reads the KV context and grows with a prefill's square.
      if (!has_tokens) return ShapeModel::kPowerLawInSize;
      return cell.second == OperatorFamily::kAttention ? ShapeModel::kLinearInTokens
                                                       : ShapeModel::kTokenWork;
    case Channel::kStepTime:
      return has_tokens ? ShapeModel::kLinearInTokens : ShapeModel::kPowerLawInSize;
    case Channel::kFrontend:
    case Channel::kBackend:
    case Channel::kStepGap:
    case Channel::kStall:
      return ShapeModel::kAffineInRequests;
    case Channel::kCollective:
    case Channel::kCollectiveTransfer:
      // A gather's bytes may follow the sequences (each sequence's logits, vLLM's and
      // SGLang's tensor-parallel LM head) rather than the tokens; a latency under them.
      return has_tokens && cell.second == OperatorFamily::kAllGather ? ShapeModel::kTokenWork
                                                                      : ShapeModel::kAffineInSize;
    case Channel::kSync:
      return ShapeModel::kAffineInSize;
    default:
      return ShapeModel::kPowerLawInSize;
  }
}

// The smallest sigma of a channel's series: half a count, or the traces' timing resolution;
// a mean over n calls (calls: each step's), each timed to that resolution, is resolved to
// about that over sqrt(n): a launch 4 us longer is no finer than 1 us alone, but 2,000 in
// a step are.
double ResolutionOf(Channel channel, const DeviationOptions& options, std::vector<double>* calls) {
  if (IsCountChannel(channel)) return 0.5;
  if (calls->empty()) return options.time_floor_ns;
  return options.time_floor_ns / std::sqrt(std::max(1.0, base::MedianInPlace(calls)));
}

// Whether a short capture's level shift leaves a channel's baseline (its slow steps out):
// the rank's own work or idleness, not a wait: a collective's time holds the wait for its
// peers, a synchronization the wait for the device, the gap before a step the wait for the
// scheduler. A stall (nothing recorded on host or device) is the rank's own: a rank waiting
// for a peer sits in a collective or a synchronization. The step's time is no evidence,
// only the cost and a stall's noise, both measured against the rank's normal steps.
bool LevelShiftsLeftOut(Channel channel) {
  switch (channel) {
    case Channel::kCollective:
    case Channel::kSync:
    case Channel::kStepGap:
      return false;
    default:
      return true;
  }
}

// Whether what the first fit expects (`expected` per sample) rises over a regime's steps
// by half its step up or more: the batch, not a fault. A fault over half of a short series
// bends the first fit toward itself, so its residuals hide it where the raw series shows it.
bool ShapesExplainStepUp(const std::vector<double>& samples, const std::vector<double>& expected,
                         const std::vector<uint8_t>& slow) {
  std::vector<double> slow_values, normal_values;
  double slow_expected = 0.0, normal_expected = 0.0;
  for (size_t i = 0; i < samples.size(); ++i) {
    (slow[i] ? slow_values : normal_values).push_back(samples[i]);
    (slow[i] ? slow_expected : normal_expected) += expected[i];
  }
  if (slow_values.empty() || normal_values.empty()) return true;
  const double step_up = base::MedianInPlace(&slow_values) - base::MedianInPlace(&normal_values);
  const double expected_up = slow_expected / static_cast<double>(slow_values.size()) -
                             normal_expected / static_cast<double>(normal_values.size());
  return expected_up >= 0.5 * step_up;
}

// Leaves out of a rank's series (numbers: each sample's step number; span: how many
// steps the rank ran) a slower regime over a window of steps (a fault lasting half the
// run), so it does not become its own normal.
void DropSlowRegime(double resolution, const DeviationOptions& options, Channel channel,
                    ShapeModel model, const std::vector<int64_t>& numbers, int64_t span,
                    std::vector<StepShape>* shapes, std::vector<double>* samples) {
  localize::ShiftOptions shift;
  shift.min_scale = resolution;
  shift.relative_floor = options.relative_floor;
  shift.level_shifts = LevelShiftsLeftOut(channel);
  shift.few_normal_regimes = shift.level_shifts;
  shift.min_sustained_z = options.sustained_regime_z;
  shift.min_sustained_t = options.sustained_regime_t;
  // Work that grows with the batch (host work per sequence, bytes per token) is searched
  // in what its first fit leaves unexplained: a decode draining is not a slow regime.
  std::vector<double> unexplained = *samples;
  std::vector<double> expected(samples->size(), 0.0);
  const bool follows_batch =
      model == ShapeModel::kAffineInRequests || model == ShapeModel::kAffineInSize;
  if (follows_batch) {
    const ChannelBaseline first(*shapes, *samples, resolution, model);
    std::vector<double> values = *samples;
    const double median = base::MedianInPlace(&values);
    for (size_t i = 0; i < unexplained.size(); ++i) {
      expected[i] = first.Expected((*shapes)[i]);
      unexplained[i] += median - expected[i];
    }
  }
  localize::SlowRegime regime =
      localize::FindSlowRegime(unexplained, numbers, span, options.max_slow_span, shift);
  if (regime.z <= 0.0 && follows_batch) {
    regime = localize::FindSlowRegime(*samples, numbers, span, options.max_slow_span, shift);
    if (regime.z > 0.0 && ShapesExplainStepUp(*samples, expected, regime.slow)) return;
  }
  if (regime.z <= 0.0) return;
  size_t kept = 0;
  for (size_t i = 0; i < samples->size(); ++i) {
    if (regime.slow[i]) continue;
    (*shapes)[kept] = (*shapes)[i];
    (*samples)[kept] = (*samples)[i];
    ++kept;
  }
  shapes->resize(kept);
  samples->resize(kept);
}

// Leaves out of a role's series (several ranks; groups: each sample's global step) the
// steps of a slower regime common to its ranks (a kernel family or a link slower on
// every rank for half the run), found in the median over the ranks of what a first fit
// leaves unexplained; with every_rank, in their least: a collective's time holds its wait
// for the last rank, so a late rank's peers wait together, but the late rank itself does
// not, where a slower link slows every member's.
void DropCommonSlowRegime(double resolution, const DeviationOptions& options, ShapeModel model,
                          const std::vector<int64_t>& groups, bool every_rank,
                          std::vector<StepShape>* shapes, std::vector<double>* samples) {
  if (samples->empty()) return;
  const ChannelBaseline first(*shapes, *samples, resolution, model);
  std::map<int64_t, std::vector<double>> by_group;
  for (size_t i = 0; i < samples->size(); ++i) {
    by_group[groups[i]].push_back((*samples)[i] - first.Expected((*shapes)[i]));
  }
  std::vector<double> series;
  std::vector<int64_t> positions;
  for (auto& [group, residuals] : by_group) {
    positions.push_back(group);
    series.push_back(every_rank ? *std::min_element(residuals.begin(), residuals.end())
                                : base::MedianInPlace(&residuals));
  }
  localize::ShiftOptions shift;
  shift.min_scale = resolution;
  shift.relative_floor = options.relative_floor;
  shift.level_shifts = false;  // residuals: no level to weigh a step up against
  const int64_t span = positions.back() - positions.front() + 1;
  const localize::SlowRegime regime =
      localize::FindSlowRegime(series, positions, span, options.max_slow_span, shift);
  if (regime.z <= 0.0) return;
  std::set<int64_t> slow;
  for (size_t i = 0; i < positions.size(); ++i) {
    if (regime.slow[i]) slow.insert(positions[i]);
  }
  size_t kept = 0;
  for (size_t i = 0; i < samples->size(); ++i) {
    if (slow.count(groups[i])) continue;
    (*shapes)[kept] = (*shapes)[i];
    (*samples)[kept] = (*samples)[i];
    ++kept;
  }
  shapes->resize(kept);
  samples->resize(kept);
}

// How many steps each rank ran, first to last scored step number.
std::map<int32_t, int64_t> StepSpans(const StepMeasurements& rows,
                                     const std::vector<uint32_t>& scored) {
  std::map<int32_t, std::pair<int64_t, int64_t>> range;
  for (uint32_t s : scored) {
    const int64_t number = rows.number[s];
    auto [it, inserted] = range.try_emplace(rows.rank[s], number, number);
    it->second.first = std::min(it->second.first, number);
    it->second.second = std::max(it->second.second, number);
  }
  std::map<int32_t, int64_t> spans;
  for (const auto& [rank, ends] : range) spans[rank] = ends.second - ends.first + 1;
  return spans;
}

// The rank of each role context that one rank alone plays (-1: several ranks).
std::map<localize::BaselineKey, int32_t> OnlyRanks(
    const StepMeasurements& rows,
    const std::map<localize::BaselineKey, std::vector<uint32_t>>& steps_of) {
  std::map<localize::BaselineKey, int32_t> only;
  for (const auto& [key, steps] : steps_of) {
    if (key.rank >= 0 || steps.empty()) continue;
    int32_t rank = rows.rank[steps.front()];
    for (uint32_t s : steps) {
      if (rows.rank[s] != rank) rank = -1;
    }
    only[key] = rank;
  }
  return only;
}

// Channels of host calls, judged per call.
bool IsCallChannel(Channel channel) {
  return channel == Channel::kLaunch || channel == Channel::kCollectiveLaunch ||
         channel == Channel::kHostCopy || channel == Channel::kSync ||
         channel == Channel::kRuntimeOther;
}

// Baseline contexts of a step (step name and phase): its rank's own steps, and the
// steps of every rank of its role (ranks running the same operator families).
struct Contexts {
  std::vector<localize::BaselineKey> rank;
  std::vector<localize::BaselineKey> role;
};

// Steps whose batch the trace does not say: every step of a trace without token counts,
// and, with them, a data-parallel rank's dummy batch in a global step where another rank
// prefills: run to keep the collectives in step, it does a prefill's work while its
// tokens say none. (Dummy decodes beside decodes look like decodes: left as they are.)
std::vector<bool> BatchUnknown(const StepMeasurements& rows, const std::vector<uint32_t>& scored) {
  std::vector<bool> unknown(rows.steps(), false);
  if (!rows.has_tokens_arg) {
    for (uint32_t s : scored) unknown[s] = true;
    return unknown;
  }
  std::set<int64_t> prefill_groups;
  for (uint32_t s : scored) {
    if (rows.serving[s] && rows.phase[s] == model::StepPhase::kPrefill)
      prefill_groups.insert(rows.group[s]);
  }
  for (uint32_t s : scored) {
    unknown[s] = !rows.serving[s] && prefill_groups.count(rows.group[s]);
  }
  return unknown;
}

// The steps whose batch is unknown split by StructureBucket. A kind with fewer than
// min_samples steps among the ranks of its role has no baseline of its own: it joins the
// steps with a batch when the role has enough of them, else (a capture without requests
// and one heavier step) the role keeps one baseline for all its steps.
void SplitByStructure(const StepMeasurements& rows, const std::vector<uint32_t>& scored,
                      const std::map<int32_t, int32_t>& roles, int64_t min_samples,
                      std::vector<localize::BaselineKey>* keys) {
  auto role_of = [&](int32_t rank) {
    auto role = roles.find(rank);
    return role == roles.end() ? -1 - rank : role->second;
  };
  auto kind_of = [&](uint32_t s) {
    localize::BaselineKey kind = (*keys)[s];
    kind.rank = role_of(rows.rank[s]);
    return kind;
  };
  const std::vector<bool> unknown = BatchUnknown(rows, scored);
  std::map<localize::BaselineKey, int64_t> kinds;  // keyed by role
  for (uint32_t s : scored) {
    if (unknown[s]) (*keys)[s].batch_bucket = rows.structure_bucket[s];
    ++kinds[kind_of(s)];
  }
  std::map<int32_t, int64_t> with_batch;  // per role
  std::set<int32_t> kept_whole;           // roles
  for (const auto& [kind, steps] : kinds) {
    if (kind.batch_bucket == 0) with_batch[kind.rank] += steps;
  }
  for (const auto& [kind, steps] : kinds) {
    if (steps < min_samples && with_batch[kind.rank] < min_samples) kept_whole.insert(kind.rank);
  }
  for (uint32_t s : scored) {
    const auto kind = kinds.find(kind_of(s));
    if (kept_whole.count(kind->first.rank) || kind->second < min_samples)
      (*keys)[s].batch_bucket = 0;
  }
}

// Ranks running the same operator families share a role, numbered in rank order (as
// localize::RankRoles numbers them from every rank's features).
std::map<int32_t, int32_t> RankRoles(const StepMeasurements& rows) {
  std::map<int32_t, uint64_t> families;
  for (size_t s = 0; s < rows.steps(); ++s) {
    if (rows.families[s] != 0) families[rows.rank[s]] |= rows.families[s];
  }
  std::map<uint64_t, int32_t> role_of;
  std::map<int32_t, int32_t> roles;
  for (const auto& [rank, set] : families) {
    roles[rank] = role_of.try_emplace(set, static_cast<int32_t>(role_of.size())).first->second;
  }
  return roles;
}

Contexts ContextKeys(const StepMeasurements& rows, const std::vector<uint32_t>& scored,
                     int64_t min_samples) {
  const std::map<int32_t, int32_t> roles = RankRoles(rows);
  Contexts keys{std::vector<localize::BaselineKey>(rows.steps()),
                std::vector<localize::BaselineKey>(rows.steps())};
  for (uint32_t s : scored) {
    keys.rank[s] = localize::BaselineKey{rows.names[rows.name[s]], rows.phase[s], 0,
                                         OperatorFamily::kUnnamed, rows.rank[s]};
  }
  SplitByStructure(rows, scored, roles, min_samples, &keys.rank);
  for (uint32_t s : scored) {
    auto role = roles.find(rows.rank[s]);
    keys.role[s] = keys.rank[s];
    keys.role[s].rank = -2 - (role == roles.end() ? 0 : role->second);
  }
  return keys;
}

// Device work is judged against the rank's role: tensor-parallel peers run the same
// kernels on the same batch, so a fault on one rank (even one lasting half of its steps)
// stays out of the median; their steps end together. Host work, waits and gaps differ by rank (the
// rank that schedules does more), so each rank is its own baseline for them.
bool JudgedByRole(Channel channel) {
  return channel == Channel::kCompute || channel == Channel::kDeviceCopy ||
         channel == Channel::kStepTime || channel == Channel::kCollective ||
         channel == Channel::kCollectiveTransfer;
}

// The baseline of each (context, channel) of a run, fitted when first asked for.
class ChannelModels {
 public:
  using StepsOf = std::map<localize::BaselineKey, std::vector<uint32_t>>;
  ChannelModels(const StepMeasurements& rows, const StepsOf& steps_of,
                const std::map<localize::BaselineKey, int32_t>& only_rank_of,
                const std::map<int32_t, int64_t>& span_of, bool has_tokens,
                const DeviationOptions& options)
      : rows_(rows), steps_of_(steps_of), only_rank_of_(only_rank_of), span_of_(span_of),
        has_tokens_(has_tokens), options_(options) {}

  const FittedChannel& Of(const localize::BaselineKey& key, CellKey cell) {
    auto [it, inserted] = models_.try_emplace({key, cell});
    if (inserted) it->second = Fit(key, cell);
    return it->second;
  }

 private:
  // A context's series of one channel: per step, its value (per call for call channels),
  // shape, number and group.
  struct Series {
    std::vector<StepShape> shapes;
    std::vector<double> samples, calls;
    std::vector<int64_t> numbers, groups;
  };

  Series SeriesOf(const localize::BaselineKey& key, CellKey cell) const {
    Series series;
    auto steps = steps_of_.find(key);
    if (steps == steps_of_.end()) return series;
    for (uint32_t s : steps->second) {
      const int64_t found = rows_.Find(s, cell.first, cell.second);
      const double value = found < 0 ? 0.0 : rows_.value[found];
      if (IsCallChannel(cell.first)) {
        // Per call: a step that makes more calls (eager, not a CUDA graph) is not slower.
        if (found < 0 || rows_.count[found] <= 0) continue;
        series.samples.push_back(value / static_cast<double>(rows_.count[found]));
        series.calls.push_back(static_cast<double>(rows_.count[found]));
      } else {
        series.samples.push_back(value);
      }
      series.shapes.push_back(rows_.Shape(s));
      series.numbers.push_back(rows_.number[s]);
      series.groups.push_back(rows_.group[s]);
    }
    return series;
  }

  FittedChannel Fit(const localize::BaselineKey& key, CellKey cell) {
    const Series series = SeriesOf(key, cell);
    std::vector<double> calls = series.calls;
    const double resolution = ResolutionOf(cell.first, options_, &calls);
    const ShapeModel model = ShapeModelOf(cell, has_tokens_);
    auto only = only_rank_of_.find(key);
    const int32_t only_rank = key.rank >= 0 ? key.rank : only == only_rank_of_.end() ? -1
                                                                                   : only->second;
    // Replicas that pad their batches to the largest: device work follows the padded size.
    // A role's channel keeps the better fit (the logits' all-gather follows its own
    // sequences where the GEMMs run padded); a rank's own channel, fitted for every rank,
    // follows the run's choice.
    const bool padded_differs = FollowsDeviceWork(cell.first) && AnyPadded(series.shapes);
    const bool rank_key = key.rank >= 0;
    auto fit_padded = [&] {
      std::vector<StepShape> padded;
      for (const StepShape& shape : series.shapes) padded.push_back(Padded(shape));
      return FittedChannel{FitSeries(series, padded, cell, model, resolution, only_rank), true};
    };
    if (padded_differs && rank_key && RunPads()) return fit_padded();
    FittedChannel own{FitSeries(series, series.shapes, cell, model, resolution, only_rank)};
    if (!padded_differs || rank_key) return own;
    FittedChannel alternative = fit_padded();
    return alternative.sigma() < own.sigma() ? alternative : own;
  }

  // Whether the run's replicas pad their batches to the largest (vLLM pads the replicas of
  // an MoE model): their device work follows the padded size. A property of the
  // deployment, so decided once: the roles' compute time per step, fitted on each size,
  // fits better on the padded one over most of the roles' steps.
  bool RunPads() {
    if (pads_) return *pads_;
    pads_ = false;
    size_t padded_better = 0, own_better = 0;
    for (const auto& [key, steps] : steps_of_) {
      if (key.rank >= 0) continue;  // roles only
      std::vector<StepShape> own, padded;
      std::vector<double> compute;
      for (uint32_t s : steps) {
        double total = 0.0;
        for (uint32_t c = rows_.cells_begin[s]; c < rows_.cells_begin[s + 1]; ++c) {
          if (rows_.channel[c] == Channel::kCompute) total += rows_.value[c];
        }
        own.push_back(rows_.Shape(s));
        padded.push_back(Padded(rows_.Shape(s)));
        compute.push_back(total);
      }
      if (!AnyPadded(own)) continue;
      const ShapeModel model = has_tokens_ ? ShapeModel::kTokenWork : ShapeModel::kPowerLawInSize;
      const double floor = options_.time_floor_ns;
      const double own_sigma = ChannelBaseline(own, compute, floor, model).sigma();
      const double padded_sigma = ChannelBaseline(padded, compute, floor, model).sigma();
      (padded_sigma < own_sigma ? padded_better : own_better) += steps.size();
    }
    pads_ = padded_better > own_better;
    return *pads_;
  }

  ChannelBaseline FitSeries(const Series& series, std::vector<StepShape> shapes, CellKey cell,
                            ShapeModel model, double resolution, int32_t only_rank) const {
    std::vector<double> samples = series.samples;
    if (only_rank >= 0) {
      // One rank's series (its own key, or a role it alone plays): a slower regime over
      // a window of steps is left out, so a fault lasting half the run is not its normal.
      auto span = span_of_.find(only_rank);
      DropSlowRegime(resolution, options_, cell.first, model, series.numbers,
                     span == span_of_.end() ? 0 : span->second, &shapes, &samples);
    } else if (cell.first == Channel::kCompute || cell.first == Channel::kCollectiveTransfer ||
               cell.first == Channel::kCollective) {
      // A family slower on every rank of the role over a window (a kernel slowdown, a
      // link's transfers and collectives) would be the role's normal too. A collective's
      // whole time only when its least moved rank moved: a slow rank's peers wait in them
      // together, and that is the slow rank's cause, not a link's.
      DropCommonSlowRegime(resolution, options_, model, series.groups,
                           cell.first == Channel::kCollective, &shapes, &samples);
    }
    return ChannelBaseline(shapes, samples, resolution, model);
  }

  const StepMeasurements& rows_;
  const StepsOf& steps_of_;
  const std::map<localize::BaselineKey, int32_t>& only_rank_of_;
  const std::map<int32_t, int64_t>& span_of_;
  const bool has_tokens_;
  const DeviationOptions& options_;
  std::optional<bool> pads_;
  std::map<std::pair<localize::BaselineKey, CellKey>, FittedChannel> models_;
};

}  // namespace

namespace {

// The node of each process of the rows (NodeOfProcesses) and each node's host name.
std::vector<int32_t> NodesOfRows(const StepMeasurements& rows,
                                 std::vector<std::string>* node_names) {
  std::vector<int32_t> nodes(rows.process_node.size(), -1);
  std::map<uint32_t, int32_t> by_host;
  for (size_t p = 0; p < nodes.size(); ++p) {
    nodes[p] = rows.process_node[p];
    const uint32_t host = rows.process_host[p];
    if (nodes[p] >= 0 || host == StepMeasurements::kNoHost) continue;
    nodes[p] = by_host.try_emplace(host, static_cast<int32_t>(by_host.size())).first->second;
  }
  for (size_t p = 0; p < nodes.size(); ++p) {
    const uint32_t host = rows.process_host[p];
    if (nodes[p] < 0 || host == StepMeasurements::kNoHost) continue;
    if (node_names->size() <= static_cast<size_t>(nodes[p])) node_names->resize(nodes[p] + 1);
    if ((*node_names)[nodes[p]].empty()) (*node_names)[nodes[p]] = rows.names[host];
  }
  return nodes;
}

// The scored steps' baseline contexts and what the cells are fitted from.
struct FitContext {
  const StepMeasurements& rows;
  const DeviationOptions& options;
  Contexts keys;
  std::map<localize::BaselineKey, std::vector<uint32_t>> steps_of;
  // Channels present in any step of a context: absent ones count as zeros.
  std::map<localize::BaselineKey, std::set<CellKey>> channels_of;

  const std::set<CellKey>& ChannelsOf(const localize::BaselineKey& key) const {
    static const std::set<CellKey> kNone;
    auto found = channels_of.find(key);
    return found == channels_of.end() ? kNone : found->second;
  }
  int64_t StepsOf(const localize::BaselineKey& key) const {
    auto found = steps_of.find(key);
    return found == steps_of.end() ? 0 : static_cast<int64_t>(found->second.size());
  }
  // The rank's own steps when it has enough of them, else its role's.
  const localize::BaselineKey& KeyOf(uint32_t s, Channel channel) const {
    const bool own = !JudgedByRole(channel) && StepsOf(keys.rank[s]) >= options.min_samples;
    return own ? keys.rank[s] : keys.role[s];
  }
};

FitContext MakeFitContext(const StepMeasurements& rows, const std::vector<uint32_t>& scored,
                          const DeviationOptions& options) {
  FitContext fit{rows, options, ContextKeys(rows, scored, options.min_samples), {}, {}};
  for (uint32_t s : scored) {
    fit.steps_of[fit.keys.rank[s]].push_back(s);
    fit.steps_of[fit.keys.role[s]].push_back(s);
  }
  for (const auto& [key, steps] : fit.steps_of) {
    for (uint32_t s : steps) {
      for (uint32_t c = rows.cells_begin[s]; c < rows.cells_begin[s + 1]; ++c) {
        fit.channels_of[key].insert({rows.channel[c], rows.family[c]});
      }
    }
  }
  return fit;
}

// The cells of scored step s, appended to the map (its row: map->steps.size()).
void AppendCells(const FitContext& fit, ChannelModels* models, uint32_t s, DeviationMap* map) {
  const StepMeasurements& rows = fit.rows;
  const DeviationOptions& options = fit.options;
  const CellKey step_time{Channel::kStepTime, OperatorFamily::kUnnamed};
  const FittedChannel& step_baseline = models->Of(fit.KeyOf(s, Channel::kStepTime), step_time);
  const double step_floor = options.step_floor * step_baseline.Expected(rows.Shape(s));
  std::set<CellKey> channels = fit.ChannelsOf(fit.keys.rank[s]);
  for (const CellKey& cell_key : fit.ChannelsOf(fit.keys.role[s])) {
    if (JudgedByRole(cell_key.first)) channels.insert(cell_key);
  }
  for (const CellKey& cell_key : channels) {
    const FittedChannel& baseline = models->Of(fit.KeyOf(s, cell_key.first), cell_key);
    Cell cell;
    cell.step_row = static_cast<uint32_t>(map->steps.size());
    cell.channel = cell_key.first;
    cell.family = cell_key.second;
    const int64_t found = rows.Find(s, cell_key.first, cell_key.second);
    if (found >= 0) {
      cell.value = rows.value[found];
      cell.count = rows.count[found];
    }
    // Calls: what one call takes, times the calls the step made.
    const double calls = IsCallChannel(cell.channel) ? static_cast<double>(cell.count) : 1.0;
    const StepShape shape = rows.Shape(s);
    cell.expected = calls * baseline.Expected(shape);
    const double relative_floor = cell.channel == Channel::kCollectiveTransfer
                                      ? options.transfer_relative_floor
                                      : options.relative_floor;
    // What the step's unknown prompt lengths leave open of a baseline that reads context.
    const double context_sigma = baseline.ContextSlope() * shape.context_spread;
    cell.sigma = std::max(calls * std::hypot(baseline.sigma(), context_sigma),
                          relative_floor * std::abs(cell.expected));
    // A healthy run's calls do not fail, however many steps of this one saw failures.
    if (cell.channel == Channel::kFailedCalls) cell.expected = 0.0, cell.sigma = 0.25;
    // A stall is judged no finer than the step it lies in: idle stretches that take
    // two or three set lengths (a data loader's wait) tie most steps at one length,
    // and their spread reads as none. The step of its own rank, in its normal (its slow
    // regime left out): its role's series holds every rank's steps of a fault's window,
    // which one rank's stall makes its peers wait through too.
    if (cell.channel == Channel::kStall) {
      const bool own = fit.StepsOf(fit.keys.rank[s]) >= options.min_samples;
      const FittedChannel& own_step =
          models->Of(own ? fit.keys.rank[s] : fit.keys.role[s], step_time);
      cell.sigma = std::max(cell.sigma, own_step.sigma());
    }
    // A channel usually absent is judged on the step's scale.
    if (!IsCountChannel(cell.channel) && cell.expected <= 0.0) {
      cell.sigma = std::max(cell.sigma, step_floor);
    }
    map->cells.push_back(cell);
  }
}

}  // namespace

DeviationMap BuildDeviationMap(const model::Trace& trace, const DeviationOptions& options) {
  return BuildDeviationMap(trace, localize::ComputeStepFeatures(trace), options);
}

DeviationMap BuildDeviationMap(const model::Trace& trace, const localize::StepFeatures& features,
                               const DeviationOptions& options) {
  if (trace.steps.size() == 0) return {};
  return FitDeviationMap(MeasureSteps(trace, features), options);
}

DeviationMap FitDeviationMap(const std::vector<StepMeasurements>& parts,
                             const DeviationOptions& options) {
  return FitDeviationMap(ConcatMeasurements(parts), options);
}

DeviationMap FitDeviationMap(const StepMeasurements& rows, const DeviationOptions& options) {
  DeviationMap map;
  if (rows.steps() == 0) return map;
  const std::vector<uint32_t> scored = ScoredSteps(rows);
  map.skipped_steps = static_cast<int64_t>(rows.steps() - scored.size());
  const FitContext fit = MakeFitContext(rows, scored, options);
  const std::map<int32_t, int64_t> span_of = StepSpans(rows, scored);
  const std::map<localize::BaselineKey, int32_t> only_rank_of = OnlyRanks(rows, fit.steps_of);
  const bool has_tokens = std::any_of(rows.context.begin(), rows.context.end(),
                                      [](double context) { return context > 0.0; });
  ChannelModels models(rows, fit.steps_of, only_rank_of, span_of, has_tokens, options);
  const std::vector<int32_t> nodes = NodesOfRows(rows, &map.node_names);
  std::set<int32_t> ranks;
  for (uint32_t s : scored) {
    if (fit.StepsOf(fit.keys.role[s]) < options.min_samples) {
      ++map.skipped_steps;
      continue;
    }
    MapStep step;
    step.step = model::StepIndex(s);
    step.rank = rows.rank[s];
    step.node = nodes[rows.process[s]];
    step.number = rows.number[s];
    step.group = rows.group[s];
    step.phase = rows.phase[s];
    step.start_ns = rows.start_ns[s];
    step.cells_begin = static_cast<uint32_t>(map.cells.size());
    AppendCells(fit, &models, s, &map);
    step.cells_end = static_cast<uint32_t>(map.cells.size());
    map.steps.push_back(step);
    ranks.insert(step.rank);
    map.device_work = map.device_work || rows.device_work[s] != 0;
  }
  map.ranks.assign(ranks.begin(), ranks.end());
  return map;
}

std::vector<int32_t> NodeOfProcesses(const model::Trace& trace) {
  std::vector<int32_t> nodes(trace.processes.size(), -1);
  std::map<model::StringId, int32_t> by_host;
  for (size_t p = 0; p < nodes.size(); ++p) {
    nodes[p] = trace.processes.node[p];
    if (nodes[p] >= 0 || !trace.processes.host[p].valid()) continue;
    nodes[p] = by_host.try_emplace(trace.processes.host[p], static_cast<int32_t>(by_host.size()))
                   .first->second;
  }
  return nodes;
}

}  // namespace teller::cause
