#include "cause/instance_peers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

#include "base/median.h"
#include "base/robust.h"

namespace teller::cause {
namespace {

using localize::OperatorFamily;

// A robust spread under this is timer resolution, not jitter.
constexpr double kMinInstanceSigmaNs = 1000.0;
// The family that holds this share of a rank's slow calls' excess is the cause; else the GPU.
constexpr double kFamilyShareOfExcess = 2.0 / 3.0;

struct Call {
  uint32_t step = 0;
  OperatorFamily family = OperatorFamily::kUnnamed;
  model::TimeNs start_ns = 0;
  double ns = 0.0;
};

// A kernel's launch shape: its grid and block args (Kineto's "grid;block", nsys' gridX...),
// hashed; 0 without them.
class LaunchShapes {
 public:
  explicit LaunchShapes(const model::Trace& trace) : trace_(trace) {}

  uint64_t Of(model::EventRow event) {
    const model::ArgTable& args = trace_.args;
    const uint32_t begin = trace_.events.args_begin[event.value()];
    const uint32_t end = begin + trace_.events.args_count[event.value()];
    uint64_t hash = 0;
    for (uint32_t a = begin; a < end && a < args.size(); ++a) {
      if (!IsShapeKey(args.key[a])) continue;
      for (uint64_t part :
           {static_cast<uint64_t>(args.key[a].value()), static_cast<uint64_t>(args.int_value[a]),
            static_cast<uint64_t>(args.string_value[a].value())}) {
        hash = (hash ^ part) * 0x100000001b3ull;
      }
    }
    return hash;
  }

 private:
  bool IsShapeKey(base::StringId key) {
    auto [it, inserted] = shape_key_.try_emplace(key.value(), false);
    if (inserted) {
      const std::string_view name = trace_.strings.Get(key);
      it->second = name.starts_with("grid") || name.starts_with("block");
    }
    return it->second;
  }

  const model::Trace& trace_;
  std::unordered_map<uint32_t, bool> shape_key_;
};

// Peers: calls of one kernel with one launch shape after the same kernel on their stream, in
// one step of a rank: the same place in each layer. One kernel and grid may serve several
// of a layer's products (an output projection and an MLP's down projection share them and
// differ in depth), and what precedes each tells them apart. Steps are not mixed: their
// batches and contexts differ, and so does the same kernel's work.
struct GroupKey {
  int32_t rank;
  uint32_t step;
  uint32_t name;
  uint64_t shape;
  uint32_t previous;
  auto operator<=>(const GroupKey&) const = default;
};

// Per event, the name of the kernel before it on its stream (thread); empty for the first
// and for events that are not kernels.
std::vector<base::StringId> PreviousKernels(const model::Trace& trace) {
  const model::EventTable& events = trace.events;
  std::vector<uint32_t> kernels;
  for (uint32_t e = 0; e < events.size(); ++e) {
    if (events.layer[e] == model::Layer::kK) kernels.push_back(e);
  }
  std::sort(kernels.begin(), kernels.end(), [&](uint32_t a, uint32_t b) {
    if (events.thread[a] != events.thread[b]) return events.thread[a] < events.thread[b];
    return events.start_ns[a] < events.start_ns[b];
  });
  std::vector<base::StringId> previous(events.size(), base::StringPool::kEmpty);
  for (size_t i = 1; i < kernels.size(); ++i) {
    if (events.thread[kernels[i]] == events.thread[kernels[i - 1]]) {
      previous[kernels[i]] = events.name[kernels[i - 1]];
    }
  }
  return previous;
}

std::map<GroupKey, std::vector<Call>> GroupCalls(const model::Trace& trace,
                                                 const localize::StepFeatures& features) {
  LaunchShapes shapes(trace);
  const std::vector<base::StringId> previous = PreviousKernels(trace);
  std::map<GroupKey, std::vector<Call>> groups;
  for (size_t row = 0; row < features.size(); ++row) {
    if (!localize::IsComputeFamily(features.family[row])) continue;
    const uint32_t step = features.step[row].value();
    for (int64_t i = 0; i < features.count[row]; ++i) {
      const model::NodeIndex node = features.instances[features.instances_begin[row] + i];
      const uint32_t event = trace.nodes.event[node.value()].value();
      if (trace.events.layer[event] != model::Layer::kK) continue;
      const GroupKey key{trace.steps.rank[step], step, trace.events.name[event].value(),
                         shapes.Of(model::EventRow(event)), previous[event].value()};
      groups[key].push_back({step, features.family[row], trace.events.start_ns[event],
                             static_cast<double>(trace.events.dur_ns[event])});
    }
  }
  return groups;
}

// A call compared with its peers.
struct ComparedCall {
  Call call;
  double normal = 0.0;
  double z = 0.0;
  double sigma = 0.0;
  bool slow = false;
};

// One rank's calls against their peers.
struct RankTally {
  double compute_ns = 0.0;
  double excess_ns = 0.0;
  int64_t kernels = 0;
  std::vector<ComparedCall> compared;
};

// The first step of each rank (cold caches, lazy initialization) when the rank has more.
std::vector<bool> WarmUpSteps(const model::Trace& trace) {
  std::map<int32_t, std::vector<uint32_t>> steps_of_rank;
  for (uint32_t s = 0; s < trace.steps.size(); ++s) steps_of_rank[trace.steps.rank[s]].push_back(s);
  std::vector<bool> warm_up(trace.steps.size(), false);
  for (const auto& [rank, steps] : steps_of_rank) {
    if (steps.size() < 2) continue;
    warm_up[*std::min_element(steps.begin(), steps.end(), [&](uint32_t a, uint32_t b) {
      return trace.steps.start_ns[a] < trace.steps.start_ns[b];
    })] = true;
  }
  return warm_up;
}

// What a call of the kernel takes when nothing slows it, and its spread: the lower quartile
// of the calls and the robust spread of the faster half around it. A slowdown only adds
// time, so the fast calls are the normal ones, even where a slowdown reached half the calls,
// which moves a median and its spread.
std::pair<double, double> NormalOfCalls(std::vector<double>* values) {
  std::sort(values->begin(), values->end());
  const double normal = (*values)[values->size() / 4];
  values->resize(values->size() / 2 + 1);
  for (double& v : *values) v = std::abs(v - normal);
  const double mad = base::MedianInPlace(values);
  return {normal,
          std::max({base::SigmaOfMad(mad), kInstanceResolution * normal, kMinInstanceSigmaNs})};
}

// A kernel's place in a rank's steps: its k-th call after the same kernel with the same
// launch shape, in a step with as many such calls, does the k-th call's work in each.
struct Place {
  int32_t rank;
  uint32_t name;
  uint64_t shape;
  uint32_t previous;
  size_t calls;
  auto operator<=>(const Place&) const = default;
};

// A spread from calls' residuals over their normals, relative, floored as a step's.
double RelativeSpread(std::vector<double>* residuals) {
  return std::max(base::SigmaOfMad(base::MedianInPlace(residuals)), kInstanceResolution);
}

// Each call's spread (relative to its normal, floored at a microsecond), z and verdict.
void SetSpread(double relative, const std::vector<bool>& warm_up,
               const std::vector<std::vector<ComparedCall>*>& steps) {
  for (auto* calls : steps) {
    for (ComparedCall& c : *calls) {
      c.sigma = std::max(relative * c.normal, kMinInstanceSigmaNs);
      c.z = (c.call.ns - c.normal) / c.sigma;
      c.slow = c.z >= kSlowInstanceZ && !warm_up[c.call.step];
    }
  }
}

// The k-th calls of a place, one per step: each call's normal becomes its step's normal
// times the least ratio to it that the k-th calls show (a slowdown only adds time); their
// residuals over it (each >= 0, the least ratio's 0) to *residuals.
void NormalsOfPlace(const std::vector<std::vector<ComparedCall>*>& steps, size_t calls,
                    std::vector<double>* residuals) {
  for (size_t k = 0; k < calls; ++k) {
    double ratio = std::numeric_limits<double>::infinity();
    for (const auto* step : steps) {
      ratio = std::min(ratio, (*step)[k].call.ns / std::max((*step)[k].normal, 1.0));
    }
    for (auto* step : steps) {
      ComparedCall& c = (*step)[k];
      c.normal = std::max(c.normal * ratio, 1.0);
      residuals->push_back(c.call.ns / c.normal - 1.0);
    }
  }
}

// Calls compared with their places in the rank's other steps, where a step alone cannot
// tell: without a launch shape, one kernel at one place may do different work in each
// layer (a convolution at several sizes), so its calls are no peers of each other; and a
// kernel called fewer than kMinInstancePeers times in a step has too few peers there. A
// call's normal is its step's normal (1 where the step has too few calls for one) times
// the least ratio to it that its place shows (NormalsOfPlace); its spread that of every
// call of the place, or, for a place of fewer than kMinInstancePeers calls, of every call
// of its rank compared this way. A place in one step alone keeps its step's peers, or none.
void CompareAcrossSteps(const std::vector<bool>& warm_up,
                        const std::map<GroupKey, std::vector<Call>>& groups,
                        std::map<GroupKey, std::vector<ComparedCall>>* compared) {
  std::map<Place, std::vector<GroupKey>> steps_of_place;
  for (const auto& [key, calls] : groups) {
    if (key.shape != 0 && calls.size() >= static_cast<size_t>(kMinInstancePeers)) continue;
    steps_of_place[{key.rank, key.name, key.shape, key.previous, calls.size()}].push_back(key);
  }
  std::vector<double> residuals;
  std::map<int32_t, std::vector<double>> rank_residuals;
  std::vector<std::pair<int32_t, std::vector<std::vector<ComparedCall>*>>> small;
  for (const auto& [place, keys] : steps_of_place) {
    if (keys.size() < 2) continue;
    std::vector<std::vector<ComparedCall>*> steps;
    for (const GroupKey& key : keys) {
      std::vector<ComparedCall>& calls = (*compared)[key];
      if (calls.empty()) {
        for (const Call& call : groups.at(key)) calls.push_back({call, 1.0, 0.0, 1.0, false});
      }
      steps.push_back(&calls);
    }
    residuals.clear();
    NormalsOfPlace(steps, place.calls, &residuals);
    std::vector<double>& of_rank = rank_residuals[place.rank];
    of_rank.insert(of_rank.end(), residuals.begin(), residuals.end());
    if (residuals.size() < static_cast<size_t>(kMinInstancePeers)) {
      small.emplace_back(place.rank, std::move(steps));
      continue;
    }
    SetSpread(RelativeSpread(&residuals), warm_up, steps);
  }
  std::map<int32_t, double> rank_spread;
  for (auto& [rank, values] : rank_residuals) rank_spread[rank] = RelativeSpread(&values);
  for (const auto& [rank, steps] : small) SetSpread(rank_spread[rank], warm_up, steps);
}

std::map<int32_t, RankTally> TallyRanks(const model::Trace& trace,
                                        const localize::StepFeatures& features) {
  const std::vector<bool> warm_up = WarmUpSteps(trace);
  std::map<GroupKey, std::vector<Call>> groups = GroupCalls(trace, features);
  std::map<GroupKey, std::vector<ComparedCall>> compared;
  std::vector<double> values;
  for (auto& [key, calls] : groups) {
    std::sort(calls.begin(), calls.end(),
              [](const Call& a, const Call& b) { return a.start_ns < b.start_ns; });
    if (calls.size() < static_cast<size_t>(kMinInstancePeers)) continue;
    values.clear();
    for (const Call& call : calls) values.push_back(call.ns);
    const auto [normal, sigma] = NormalOfCalls(&values);
    std::vector<ComparedCall>& out = compared[key];
    for (const Call& call : calls) {
      const double z = (call.ns - normal) / sigma;
      out.push_back({call, normal, z, sigma, z >= kSlowInstanceZ && !warm_up[call.step]});
    }
  }
  CompareAcrossSteps(warm_up, groups, &compared);
  std::map<int32_t, RankTally> ranks;
  for (const auto& [key, calls] : groups) {
    RankTally& tally = ranks[key.rank];
    tally.kernels += static_cast<int64_t>(calls.size());
    for (const Call& call : calls) tally.compute_ns += call.ns;
    const auto it = compared.find(key);
    if (it == compared.end()) continue;
    for (const ComparedCall& c : it->second) {
      if (c.slow) tally.excess_ns += c.call.ns - c.normal;
      tally.compared.push_back(c);
    }
  }
  return ranks;
}

// The family holding two thirds of the slow calls' excess, else kUnnamed.
OperatorFamily TopFamily(const RankTally& tally) {
  std::map<OperatorFamily, double> excess;
  for (const ComparedCall& c : tally.compared) {
    if (c.slow) excess[c.call.family] += c.call.ns - c.normal;
  }
  const auto top = std::max_element(excess.begin(), excess.end(), [](const auto& a, const auto& b) {
    return a.second < b.second;
  });
  return top->second >= kFamilyShareOfExcess * tally.excess_ns ? top->first
                                                               : OperatorFamily::kUnnamed;
}

// The slow calls' time and their normal's, of one family (kUnnamed: every family).
struct SlowTime {
  double slow_ns = 0.0;
  double normal_ns = 0.0;
  double Effect() const { return normal_ns > 0.0 ? slow_ns / normal_ns - 1.0 : 0.0; }
};
SlowTime SlowTimeOf(const RankTally& tally, OperatorFamily family) {
  SlowTime time;
  for (const ComparedCall& c : tally.compared) {
    if (!c.slow || (family != OperatorFamily::kUnnamed && c.call.family != family)) continue;
    time.slow_ns += c.call.ns;
    time.normal_ns += c.normal;
  }
  return time;
}

// Whether the family alone slowed: the other families' calls that ran while its slow calls
// did, and would have stood out had they slowed by as much, mostly did not. A slower GPU
// (clocks, a neighbour's kernels) slows every kernel, and one family may merely hold most of
// the time; where too few other calls could tell, the GPU is the likelier cause.
bool FamilyAlone(const RankTally& tally, OperatorFamily family, double effect) {
  model::TimeNs first = std::numeric_limits<model::TimeNs>::max(), last = 0;
  for (const ComparedCall& c : tally.compared) {
    if (!c.slow || c.call.family != family) continue;
    first = std::min(first, c.call.start_ns);
    last = std::max(last, c.call.start_ns);
  }
  int64_t others = 0, slow = 0;
  for (const ComparedCall& c : tally.compared) {
    const bool could_tell = kSlowInstanceZ * c.sigma <= effect * c.normal;
    if (c.call.family == family || !could_tell || c.call.start_ns < first ||
        c.call.start_ns > last) {
      continue;
    }
    ++others;
    slow += c.slow;
  }
  return others >= kMinInstancePeers && 2 * slow < others;
}

// The cause of a rank's slow calls: its GPU, or the family holding most of their excess.
Hypothesis CauseOfRank(const model::Trace& trace, int32_t rank, const RankTally& tally) {
  Hypothesis h;
  h.kind = CauseKind::kGpuSlow;
  h.rank = rank;
  h.by_instance_peers = true;
  const OperatorFamily top = TopFamily(tally);
  if (top != OperatorFamily::kUnnamed && FamilyAlone(tally, top, SlowTimeOf(tally, top).Effect())) {
    h.kind = CauseKind::kFamilySlow;
    h.family = top;
  }
  std::vector<double> z;
  uint32_t first = 0, last = 0;
  for (const ComparedCall& c : tally.compared) {
    if (h.kind == CauseKind::kFamilySlow && c.call.family != h.family) continue;
    ++h.peer_calls;
    if (!c.slow) continue;
    const uint32_t step = c.call.step;
    if (z.empty() || trace.steps.start_ns[step] < trace.steps.start_ns[first]) first = step;
    if (z.empty() || trace.steps.start_ns[step] > trace.steps.start_ns[last]) last = step;
    z.push_back(c.z);
  }
  h.peer_calls_slow = static_cast<int64_t>(z.size());
  h.first_group = GroupOf(trace, first);
  h.last_group = GroupOf(trace, last);
  h.steps = h.last_group - h.first_group + 1;
  h.since_ns = trace.steps.start_ns[first];
  const SlowTime time = SlowTimeOf(tally, h.family);  // kUnnamed for the GPU: every family
  h.effect = time.Effect();
  h.score = base::MedianInPlace(&z);
  h.step_excess_ns = time.slow_ns - time.normal_ns;
  h.explained = tally.excess_ns > 0.0 ? h.step_excess_ns / tally.excess_ns : 0.0;
  h.impact_ns = h.step_excess_ns;
  h.step_baseline_ns = tally.compute_ns - tally.excess_ns;
  return h;
}

}  // namespace

InstancePeerResult CompareInstancePeers(const model::Trace& trace,
                                        const localize::StepFeatures& features) {
  InstancePeerResult result;
  InstancePeerCheck& check = result.check;
  const std::map<int32_t, RankTally> ranks = TallyRanks(trace, features);
  const RankTally* worst = nullptr;
  for (const auto& [rank, tally] : ranks) {
    double covered_ns = 0.0;
    for (const ComparedCall& c : tally.compared) {
      covered_ns += c.call.ns;
      check.calls_slow += c.slow;
    }
    check.kernels += tally.kernels;
    check.calls_compared += static_cast<int64_t>(tally.compared.size());
    check.compute_ns += tally.compute_ns;
    check.covered_ns += covered_ns;
    check.excess_ns += tally.excess_ns;
    if (tally.compute_ns <= 0.0) continue;
    const double share = tally.excess_ns / tally.compute_ns;
    if (worst == nullptr || share > check.worst_excess_share) {
      worst = &tally;
      check.worst_rank = rank;
      check.worst_excess_share = share;
      check.worst_covered_share = covered_ns / tally.compute_ns;
    }
  }
  if (worst != nullptr && check.worst_excess_share >= kMaterialExcessShare) {
    result.cause = CauseOfRank(trace, check.worst_rank, *worst);
  }
  return result;
}

}  // namespace teller::cause
