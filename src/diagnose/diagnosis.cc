#include "diagnose/diagnosis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/parallel_for.h"
#include "cause/cause_text.h"
#include "cause/request_causes.h"
#include "cause/step_replay.h"
#include "diagnose/cause_operators.h"
#include "diagnose/diagnose_tuning.h"
#include "diagnose/fault_rules.h"
#include "diagnose/hook_steps.h"
#include "localize/peer_scores.h"
#include "signatures/built_in_catalog.h"

namespace teller::diagnose {

using localize::Feature;
using localize::OperatorFamily;

namespace {

// Findings whose slice is computed: the ones a reader looks at, first of all and first of
// those that support each candidate.
constexpr size_t kSlicedFindings = 5;

template <typename T>
void SortUnique(std::vector<T>* values) {
  std::sort(values->begin(), values->end());
  values->erase(std::unique(values->begin(), values->end()), values->end());
}

bool StepBefore(const AbnormalStep& a, const AbnormalStep& b) {
  return a.score != b.score ? a.score > b.score : a.step < b.step;
}

bool RequestBefore(const AbnormalRequest& a, const AbnormalRequest& b) {
  return a.score != b.score ? a.score > b.score : a.request < b.request;
}

// By its worst step, the one a report shows: a family abnormal in the cause's steps and worse
// elsewhere is shown at the other step.
bool FindingSupports(const RootCause& cause, const Finding& finding) {
  return SupportsCause(cause, finding.rank, finding.group);
}

// Per finding (in `findings`' order), whether it is among the first `count` of all by
// FindingBefore, or among the first `count` of those that support a candidate.
std::vector<bool> FirstOfEachCandidate(const std::vector<Finding>& findings,
                                       const std::vector<RootCause>& candidates, size_t count) {
  std::vector<size_t> order(findings.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return FindingBefore(findings[a], findings[b]); });
  std::vector<bool> first(findings.size(), false);
  for (size_t i = 0; i < order.size() && i < count; ++i) first[order[i]] = true;
  for (const RootCause& candidate : candidates) {
    size_t taken = 0;
    for (size_t i = 0; i < order.size() && taken < count; ++i) {
      if (!FindingSupports(candidate, findings[order[i]])) continue;
      first[order[i]] = true;
      ++taken;
    }
  }
  return first;
}

// The findings a diagnosis keeps once its candidates are known: the first max_findings, and
// the first max_findings that support each candidate, best first.
std::vector<Finding> FindingsOfCandidates(std::vector<Finding> all,
                                          const std::vector<RootCause>& candidates,
                                          size_t max_findings) {
  const std::vector<bool> kept = FirstOfEachCandidate(all, candidates, max_findings);
  std::vector<Finding> findings;
  for (size_t i = 0; i < all.size(); ++i) {
    if (kept[i]) findings.push_back(std::move(all[i]));
  }
  std::sort(findings.begin(), findings.end(), FindingBefore);
  return findings;
}

std::string_view FeatureWords(Feature feature) {
  switch (feature) {
    case Feature::kCount:
      return "instance count";
    case Feature::kTotalNs:
      return "total time";
    case Feature::kMeanNs:
      return "mean duration";
    case Feature::kMaxNs:
      return "longest instance";
    case Feature::kQueueMaxNs:
      return "launch-to-start delay";
    case Feature::kGapNs:
      return "idle gaps";
    case Feature::kShare:
      return "share of the step";
    case Feature::kSkewNs:
      return "skew across ranks";
    case Feature::kOrderBreaks:
      return "instances out of their usual order";
  }
  return "";
}

void AddNotes(const model::Trace& trace, Diagnosis* diagnosis) {
  if (trace.events.size() == 0 && trace.logs.size() > 0) {
    diagnosis->notes.push_back(
        "logs only, no trace: which step, rank and operator slowed cannot be told. A trace "
        "would add the abnormal engine steps and ranks, the operator family (kernel, "
        "collective, copy, launch) measured against the run's own baseline, and the call "
        "chain from the engine step down to the kernel; record one with `teller record -o "
        "DIR -- CMD`, or pass an nsys or Kineto export with the logs");
    return;
  }
  std::array<int64_t, model::kLayerCount> by_layer{};
  for (model::Layer layer : trace.events.layer) ++by_layer[static_cast<size_t>(layer)];
  auto count = [&](model::Layer layer) { return by_layer[static_cast<size_t>(layer)]; };
  bool device_work = count(model::Layer::kK) > 0;
  for (uint32_t e = 0; e < trace.events.size() && !device_work; ++e) {
    const model::ThreadIndex thread = trace.events.thread[e];
    device_work = thread.valid() && trace.threads.is_device[thread.value()];
  }
  if (!device_work) {
    diagnosis->notes.push_back(
        "no GPU kernels in the trace (a CPU job, or CUPTI off or unavailable): device-side "
        "faults are invisible; slowdowns are told from host ranges and hooked collectives");
  }
  if (count(model::Layer::kRt) == 0 && count(model::Layer::kDrv) == 0) {
    diagnosis->notes.push_back(
        "no CUDA runtime or driver calls: launch, copy and sync latency cannot be measured");
  }
  if (count(model::Layer::kFe) == 0 && count(model::Layer::kBe) == 0) {
    diagnosis->notes.push_back("no engine or framework ranges (NVTX / Python hooks missing)");
  }
  if (trace.logs.size() == 0) {
    diagnosis->notes.push_back("no service logs: the category rests on the trace alone");
  }
  if (std::string hooks = HooksWithoutStepsNote(trace); !hooks.empty()) {
    diagnosis->notes.push_back(std::move(hooks));
  }
  if (trace.steps.size() > 0 && trace.steps.source[0] == model::StepSource::kTopLevelRange) {
    diagnosis->notes.push_back(
        "steps were taken from top-level ranges (no engine step markers): step boundaries "
        "are approximate");
  }
  if (diagnosis->steps_scored == 0) {
    diagnosis->notes.push_back(fmt::format(
        "{} step(s), none with a baseline of 5 or more steps of its kind: nothing to compare "
        "against; record a longer window with normal and slow periods",
        trace.steps.size()));
  }
  if (diagnosis->ranks > 1 && trace.collective_matches.size() == 0) {
    diagnosis->notes.push_back(
        "several ranks but no matched collectives: cross-rank skew is not measured");
  }
}

base::Status CollectLogEvidence(const model::Trace& trace, const DiagnoseOptions& options,
                                Diagnosis* diagnosis) {
  const signatures::SignatureCatalog* catalog = options.signatures;
  if (catalog == nullptr) {
    TELLER_ASSIGN_OR_RETURN(catalog, signatures::BuiltInCatalog());
  }
  LogReadingOptions reading;
  // Lines from the first step on: start-up warnings are configuration, not incidents.
  if (trace.steps.size() > 0) {
    reading.from_ns = *std::min_element(trace.steps.start_ns.begin(), trace.steps.start_ns.end());
  }
  reading.max_events = options.max_log_lines;
  diagnosis->logs = ReadLogEvidence(trace, *catalog, reading);
  for (const LogEvidence& log : diagnosis->logs) {
    if (log.weight <= 0.0) continue;
    diagnosis->votes.push_back(
        {log.category, log.weight, fmt::format("log line matches {}", log.Label())});
  }
  return base::OkStatus();
}

// A fault lasts: the mean z of k steps (missing steps count 0), so one spike weighs
// 1/k and a sustained deviation its full z. contiguous: the best k consecutive steps
// (in step order), so spikes scattered over the run (GC pauses) do not add up;
// else the top k anywhere.
double SustainedScore(std::vector<std::pair<int64_t, double>> scores, size_t k, bool contiguous,
                      double cap, size_t trim) {
  if (cap > 0.0) {
    for (auto& score : scores) score.second = std::min(score.second, cap);
  }
  double best = 0.0;
  if (contiguous && trim > 0 && trim < k) {
    // Each window without its `trim` largest z's: two spikes close together (GC
    // pauses a few steps apart) do not make a window.
    std::sort(scores.begin(), scores.end());
    std::vector<double> window;
    for (size_t i = 0; i < scores.size(); ++i) {
      window.clear();
      for (size_t j = i; j < scores.size() && j < i + k; ++j) window.push_back(scores[j].second);
      std::sort(window.begin(), window.end());
      const size_t kept = window.size() > trim ? window.size() - trim : 0;
      double sum = 0.0;
      for (size_t j = 0; j < kept; ++j) sum += window[j];
      best = std::max(best, sum / static_cast<double>(k - trim));
    }
    return best;
  }
  if (contiguous) {
    std::sort(scores.begin(), scores.end());
    double sum = 0.0;
    for (size_t i = 0; i < scores.size(); ++i) {
      sum += scores[i].second;
      if (i >= k) sum -= scores[i - k].second;
      best = std::max(best, sum);
    }
  } else {
    const size_t top = std::min(scores.size(), k);
    std::partial_sort(scores.begin(), scores.begin() + top, scores.end(),
                      [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t i = 0; i < top; ++i) best += scores[i].second;
  }
  return best / static_cast<double>(k);
}

// Features that say an operator ran long (not that it waited, or ran in another order).
bool IsDurationFeature(Feature feature) {
  return feature == Feature::kTotalNs || feature == Feature::kMeanNs ||
         feature == Feature::kMaxNs || feature == Feature::kShare;
}

void VoteFromFindings(const Diagnosis& diagnosis, const DiagnoseOptions& options,
                      std::vector<CategoryVote>* votes) {
  for (size_t i = 0; i < diagnosis.findings.size() && i < options.voting_findings; ++i) {
    const Finding& finding = diagnosis.findings[i];
    // Findings below the threshold still vote (they are the best evidence there
    // is), with less weight.
    FaultCategory category = CategoryOfFamily(finding.family);
    if (category == FaultCategory::kNone) continue;
    // The same kernels in another order: a software change, not a slow GPU.
    if (finding.feature == Feature::kOrderBreaks) category = FaultCategory::kSchedulingSoftware;
    // Weight: how far past the threshold, capped so one huge z does not drown the logs.
    const double weight = std::min(finding.score / options.finding_threshold, options.vote_cap) /
                          static_cast<double>(i + 1);
    std::string reason =
        fmt::format("{} {} on rank {} (score {:.1f})", localize::OperatorFamilyName(finding.family),
                    FeatureWords(finding.feature), finding.rank, finding.score);
    // Peers waiting in a collective for a rank whose kernels are slow: the slow
    // GPU is the cause, the wait its symptom.
    if (category == FaultCategory::kCommunicationNetwork) {
      for (const Finding& other : diagnosis.findings) {
        if (other.rank == finding.rank || other.score < options.vote_symptom_share * finding.score)
          continue;
        if (CategoryOfFamily(other.family) != FaultCategory::kCudaKernel) continue;
        // Kernels that waited to start (queued behind the slow transfer) are not slow
        // themselves: only their own run time says the GPU is slow.
        if (!IsDurationFeature(other.feature)) continue;
        category = FaultCategory::kCudaKernel;
        reason += fmt::format(", waiting for rank {} whose {} kernels are slow", other.rank,
                              localize::OperatorFamilyName(other.family));
        break;
      }
    }
    // Host work (a backend op, the frontend) slow on a rank where a runtime or
    // memory call is abnormal too: the call runs inside the host op, so it is the
    // cause and the host op's time its symptom.
    if (category == FaultCategory::kSchedulingSoftware &&
        finding.feature != Feature::kOrderBreaks) {
      for (const Finding& other : diagnosis.findings) {
        if (other.rank != finding.rank ||
            other.score <
                std::min(options.vote_symptom_share * finding.score, options.finding_threshold) ||
            !IsDurationFeature(other.feature)) {
          continue;
        }
        const FaultCategory cause = CategoryOfFamily(other.family);
        if (cause != FaultCategory::kRuntimeDriver && cause != FaultCategory::kMemoryResource) {
          continue;
        }
        category = cause;
        reason += fmt::format(", around slow {} calls", localize::OperatorFamilyName(other.family));
        break;
      }
    }
    votes->push_back({category, weight, std::move(reason)});
  }
}

void DecideCategory(Diagnosis* diagnosis) {
  std::array<double, kFaultCategoryCount> total{};
  double sum = 0.0;
  for (const CategoryVote& vote : diagnosis->votes) {
    total[static_cast<size_t>(vote.category)] += vote.weight;
    sum += vote.weight;
  }
  std::stable_sort(
      diagnosis->votes.begin(), diagnosis->votes.end(),
      [](const CategoryVote& a, const CategoryVote& b) { return a.weight > b.weight; });
  if (sum <= 0.0) return;
  const size_t best =
      static_cast<size_t>(std::max_element(total.begin(), total.end()) - total.begin());
  diagnosis->category = static_cast<FaultCategory>(best);
  diagnosis->category_probability = total[best] / sum;
}

}  // namespace

bool DecidedByLearned(const Diagnosis& diagnosis) {
  return diagnosis.decider == "learned" && !diagnosis.candidate_probabilities.empty();
}

bool HealthyByPeers(const Diagnosis& diagnosis) {
  return diagnosis.peer_check.can_tell() && !(diagnosis.model.used && diagnosis.model.abnormal);
}

RunVerdict VerdictOf(const Diagnosis& diagnosis) {
  if (diagnosis.failed) return RunVerdict::kFailed;
  if (diagnosis.degraded) return RunVerdict::kDegraded;
  if (diagnosis.steps_scored == 0 && !diagnosis.logs_only && !HealthyByPeers(diagnosis)) {
    return RunVerdict::kUndetermined;
  }
  return RunVerdict::kHealthy;
}

std::string_view RunVerdictName(RunVerdict verdict) {
  switch (verdict) {
    case RunVerdict::kHealthy:
      return "healthy";
    case RunVerdict::kDegraded:
      return "degraded";
    case RunVerdict::kFailed:
      return "failed";
    case RunVerdict::kUndetermined:
      return "undetermined";
  }
  return "healthy";
}

FaultCategory CategoryOfCause(const cause::Hypothesis& hypothesis) {
  using cause::CauseKind;
  switch (hypothesis.kind) {
    case CauseKind::kGpuSlow:
    case CauseKind::kFamilySlow:
      return FaultCategory::kCudaKernel;
    case CauseKind::kHostSlow:
      // Without a GPU the host's ops are the job's compute: a host running them slower is
      // a slow compute (CPU contention, clocks, threads), and nothing in the trace points
      // at memory (no copies, no allocator calls to move with it).
      return hypothesis.host_only_job ? FaultCategory::kCudaKernel : FaultCategory::kMemoryResource;
    case CauseKind::kAllocator:
    case CauseKind::kRequestPreempted:
      return FaultCategory::kMemoryResource;
    case CauseKind::kLaunchLatency:
    case CauseKind::kCopyLatency:
    case CauseKind::kSyncLatency:
    case CauseKind::kLaunchRetry:
      return FaultCategory::kRuntimeDriver;
    case CauseKind::kStraggler:
    case CauseKind::kLinkDegraded:
      return FaultCategory::kCommunicationNetwork;
    case CauseKind::kEnginePause:
    case CauseKind::kReorder:
    case CauseKind::kRequestMisrouted:
    case CauseKind::kRequestStarved:
      return FaultCategory::kSchedulingSoftware;
  }
  return FaultCategory::kNone;
}

namespace {

// Scores one step's operator families against the run's baseline (shared, per rank or
// both) and against the peer ranks of the same global step, highest first.
class StepScorer {
 public:
  StepScorer(const localize::FeatureRows& rows, const std::vector<model::StepIndex>& all_steps,
             const DiagnoseOptions& options)
      : rows_(rows), features_(rows.features), options_(options) {
    localize::BaselineOptions baseline_options;
    baseline_options.exclude_shifts = options.exclude_shifts;
    baseline_options.by_role = options.baseline_by_role;
    baseline_options.absent_as_zero = options.absent_as_zero;
    baseline_options.score_threads = base::ThreadCount(options.threads);
    baseline_options.relative_floor = options.deviation.relative_floor;
    shared_baseline_ = localize::Baseline::Learn(rows, all_steps, baseline_options);
    // Per-rank baselines only when asked (the default shares keys across ranks).
    baseline_options.per_rank = true;
    if (options.baseline_mode != 0) {
      rank_baseline_ = localize::Baseline::Learn(rows, all_steps, baseline_options);
    }
    peer_scores_ = options.peer_scores ? localize::ScorePeers(rows, options.feature_mask)
                                       : std::vector<localize::PeerScore>(features_.size());
  }

  int64_t baseline_keys() const { return static_cast<int64_t>(shared_baseline_.size()); }

  std::vector<localize::FamilyScore> Score(model::StepIndex step) {
    std::vector<localize::FamilyScore> scores;
    if (options_.baseline_mode != 1) {
      scores = shared_baseline_.ScoreStep(rows_, step, options_.feature_mask,
                                          options_.min_baseline_samples);
    }
    if (options_.baseline_mode != 0) {
      for (const localize::FamilyScore& score : rank_baseline_.ScoreStep(
               rows_, step, options_.feature_mask, options_.min_baseline_samples)) {
        auto same = std::find_if(scores.begin(), scores.end(),
                                 [&](const auto& s) { return s.family == score.family; });
        if (same == scores.end()) {
          scores.push_back(score);
        } else if (score.score > same->score) {
          *same = score;
        }
      }
    }
    // A rank slower than its peers in the same global step: the peer z replaces
    // the baseline z when larger.
    auto lo = std::lower_bound(features_.step.begin(), features_.step.end(), step);
    auto hi = std::upper_bound(lo, features_.step.end(), step);
    for (auto it = lo; it != hi; ++it) {
      const size_t row = static_cast<size_t>(it - features_.step.begin());
      const localize::PeerScore& peer = peer_scores_[row];
      if (peer.score <= 0.0) continue;
      auto same = std::find_if(scores.begin(), scores.end(),
                               [&](const auto& s) { return s.family == features_.family[row]; });
      if (same == scores.end()) {
        scores.push_back({features_.family[row], 0.0, peer.feature, row});
        same = scores.end() - 1;
      }
      if (peer.score > same->score) {
        same->score = peer.score;
        same->feature = peer.feature;
        same->row = row;
        same->value = peer.value;
        same->median = peer.median;
        same->baseline_samples = peer.peers;
        from_peers.insert({step.value(), features_.family[row]});
        if (peer.rank_wide) rank_wide[{step.value(), features_.family[row]}] = peer.rank_excess;
      }
    }
    std::sort(scores.begin(), scores.end(), [](const auto& a, const auto& b) {
      return a.score != b.score ? a.score > b.score : a.family < b.family;
    });
    return scores;
  }

  std::set<std::pair<uint32_t, OperatorFamily>> from_peers;         // (step, family)
  std::map<std::pair<uint32_t, OperatorFamily>, double> rank_wide;  // -> rank_excess

 private:
  const localize::FeatureRows& rows_;
  const localize::StepFeatures& features_;
  const DiagnoseOptions& options_;
  localize::Baseline shared_baseline_;
  localize::Baseline rank_baseline_;
  std::vector<localize::PeerScore> peer_scores_;
};

// Per (rank, family): the worst step and the other abnormal steps.
struct Group {
  localize::FamilyScore best;
  model::StepIndex step;
  std::vector<int64_t> abnormal_steps;
  std::vector<std::pair<int64_t, double>> step_scores;  // (step number, z)
};
using FamilyGroups = std::map<std::pair<int32_t, OperatorFamily>, Group>;

// Scores every step that may hold a finding into groups by (rank, family); counts the
// scored steps and keeps the abnormal ones.
FamilyGroups ScoreSteps(const localize::FeatureRows& rows,
                        const std::vector<model::StepIndex>& all_steps,
                        const DiagnoseOptions& options, StepScorer* scorer,
                        std::map<int32_t, int64_t>* scored_steps_of_rank, Diagnosis* diagnosis) {
  FamilyGroups groups;
  // Steps that serve no request before the first one that does (warm-up,
  // profiling and graph-capture runs with dummy inputs) are part of the baseline
  // but never a finding, when the trace says which steps serve requests at all.
  // Later idle steps are scored when score_idle_steps: a data-parallel rank
  // without requests runs dummy batches to keep its collectives in step, and a
  // fault there stalls the ranks that do serve.
  // The first scored step of each rank is skipped too: cold caches, lazy
  // initialization and first allocations make it slow on every healthy engine.
  const bool has_requests = rows.has_step_requests;
  model::TimeNs first_serving_ns = std::numeric_limits<model::TimeNs>::max();
  for (size_t s = 0; s < rows.steps(); ++s) {
    if (rows.requests[s] > 0) first_serving_ns = std::min(first_serving_ns, rows.start_ns[s]);
  }
  std::set<int32_t> ranks_started;
  for (model::StepIndex step : all_steps) {
    if (has_requests && rows.requests[step.value()] == 0 &&
        (!options.score_idle_steps || rows.start_ns[step.value()] < first_serving_ns)) {
      continue;
    }
    if (ranks_started.insert(rows.rank[step.value()]).second) continue;
    ++(*scored_steps_of_rank)[rows.rank[step.value()]];
    const std::vector<localize::FamilyScore> scores = scorer->Score(step);
    if (scores.empty()) continue;
    ++diagnosis->steps_scored;
    const int32_t rank = rows.rank[step.value()];
    const int64_t number = rows.number[step.value()];
    const int64_t global_step = rows.global_step[step.value()];
    if (scores.front().score >= options.finding_threshold) {
      diagnosis->steps.push_back(
          {step, rank, number, scores.front().score, scores.front().family, global_step});
    }
    for (const localize::FamilyScore& score : scores) {
      auto [it, inserted] =
          groups.try_emplace({rank, score.family}, Group{score, step, {}, {}});
      Group& group = it->second;
      group.step_scores.emplace_back(number, score.score);
      if (!inserted && score.score > group.best.score) {
        group.best = score;
        group.step = step;
      }
      if (score.score >= options.finding_threshold) group.abnormal_steps.push_back(number);
    }
  }
  return groups;
}

// The finding of one (rank, family) group: its worst step, sustained and persistence-
// discounted scores, and its suspects.
Finding FindingOfGroup(const localize::FeatureRows& rows, const DiagnoseOptions& options,
                       const StepScorer& scorer, std::pair<int32_t, OperatorFamily> key,
                       int64_t rank_steps, Group* group) {
  // Abnormal in nearly every step of its rank: that is how this rank always
  // behaves (its role differs from its peers'), not an incident with an onset.
  const bool persistent =
      rank_steps >= options.persistent_min_steps &&
      static_cast<double>(group->abnormal_steps.size()) > options.persistent_share * rank_steps;
  const double peak_z = group->best.score;
  double flag_score = peak_z;
  if (options.sustained_steps > 1) {
    const double cap = options.step_z_cap * options.finding_threshold;
    group->best.score = SustainedScore(group->step_scores, options.sustained_steps,
                                       options.contiguous_steps, cap, 0);
    flag_score = options.flag_trim_steps > 0
                     ? SustainedScore(group->step_scores, options.sustained_steps,
                                      options.contiguous_steps, cap, options.flag_trim_steps)
                     : group->best.score;
  }
  if (persistent) {
    group->best.score *= options.persistent_discount;
    flag_score *= options.persistent_discount;
  }
  Finding finding;
  finding.persistent = persistent;
  finding.step = group->step;
  finding.rank = key.first;
  finding.step_number = rows.number[group->step.value()];
  finding.group = rows.global_step[group->step.value()];
  finding.family = key.second;
  finding.feature = group->best.feature;
  finding.score = group->best.score;
  finding.flag_score = flag_score;
  finding.peak_z = peak_z;
  finding.forest_score = group->best.forest_score;
  finding.value = group->best.value;
  finding.median = group->best.median;
  finding.baseline_samples = group->best.baseline_samples;
  finding.against_peers = scorer.from_peers.count({group->step.value(), key.second}) > 0;
  if (auto wide = scorer.rank_wide.find({group->step.value(), key.second});
      wide != scorer.rank_wide.end()) {
    finding.rank_wide = true;
    finding.rank_excess = wide->second;
  }
  std::sort(group->abnormal_steps.begin(), group->abnormal_steps.end());
  for (int64_t number : group->abnormal_steps) {
    if (number != finding.step_number) finding.also_steps.push_back(number);
  }
  finding.suspects = rows.Examples(group->best.row, group->best.feature, options.max_suspects);
  return finding;
}

}  // namespace

void CollectAbnormalRequests(const reconstruct::RequestRows& rows, Diagnosis* diagnosis) {
  std::sort(diagnosis->steps.begin(), diagnosis->steps.end(), StepBefore);
  diagnosis->first_abnormal_ns = 0;
  std::map<uint32_t, AbnormalRequest> requests;
  for (const AbnormalStep& step : diagnosis->steps) {
    const model::TimeNs start = rows.start_ns[step.step.value()];
    if (diagnosis->first_abnormal_ns == 0 || start < diagnosis->first_abnormal_ns) {
      diagnosis->first_abnormal_ns = start;
    }
    const uint32_t begin = rows.requests_begin[step.step.value()];
    const uint32_t end = rows.requests_begin[step.step.value() + 1];
    for (uint32_t i = begin; i < end; ++i) {
      const model::RequestIndex request(rows.step_requests[i]);
      AbnormalRequest& entry = requests[request.value()];
      entry.request = request;
      entry.score = std::max(entry.score, step.score);
      entry.steps.push_back(step.number);
      entry.places.emplace_back(step.rank, step.group);
    }
  }
  for (auto& [index, request] : requests) {
    SortUnique(&request.steps);
    SortUnique(&request.places);
    diagnosis->requests.push_back(std::move(request));
  }
  std::sort(diagnosis->requests.begin(), diagnosis->requests.end(), RequestBefore);
}

namespace {

constexpr size_t kCulpritEvidence = 8;
constexpr size_t kVictimEvidence = 4;

// A cause's operators: those named elsewhere when given for it, else found on the trace.
std::vector<CauseOperator> OperatorsOf(const cause::Hypothesis& hypothesis,
                                       const DiagnoseOptions& options,
                                       CauseOperatorFinder& operators) {
  if (options.cause_operators != nullptr) {
    for (const OperatorsOfCause& given : *options.cause_operators) {
      if (SameCause(given.hypothesis, hypothesis)) return given.operators;
    }
  }
  return operators.Find(hypothesis);
}

RootCause MakeRootCause(const cause::DeviationMap& map, const DiagnoseOptions& options,
                        CauseOperatorFinder& operators, const cause::Hypothesis& hypothesis) {
  RootCause root;
  root.hypothesis = hypothesis;
  root.operators = OperatorsOf(hypothesis, options, operators);
  root.category = CategoryOfCause(hypothesis);
  size_t culprits = 0, victims = 0;
  for (uint32_t index : hypothesis.evidence) {
    const cause::Cell& cell = map.cells[index];
    const cause::MapStep& step = map.steps[cell.step_row];
    const bool victim = hypothesis.IsVictimRank(step.rank);
    if (victim ? victims++ >= kVictimEvidence : culprits++ >= kCulpritEvidence) continue;
    root.evidence.push_back({step.rank, step.number, cell.channel, cell.family, cell.value,
                             cell.expected, cell.z(), victim});
  }
  return root;
}

// A capture with no step to score against a baseline: its repeated kernel calls are the
// baseline (cause/instance_peers.h). A material slowdown among them is the verdict's cause,
// ahead of what else was found.
void ComparePeersOfShortCapture(const model::Trace& trace, const localize::StepFeatures& features,
                                cause::CauseAnalysis* analysis, Diagnosis* diagnosis) {
  cause::InstancePeerResult peers = cause::CompareInstancePeers(trace, features);
  diagnosis->peer_check = peers.check;
  if (!peers.check.ran()) return;
  diagnosis->notes.push_back(fmt::format(
      "no baseline of steps: {} of {} kernel calls ({:.0f}% of the kernel time) were compared "
      "with the same kernel's other calls in the capture; a slowdown of every call alike "
      "cannot be seen this way",
      peers.check.calls_compared, peers.check.kernels, 100.0 * peers.check.covered_share()));
  if (!peers.cause) return;
  analysis->ranked.insert(analysis->ranked.begin(), std::move(*peers.cause));
  analysis->degraded = true;
  analysis->has_second = false;
}

// The shown causes' impacts replayed on the graph given when it holds every group the
// replay reads, else on the trace.
void ReplayImpacts(const model::Trace& trace, const localize::StepFeatures& features,
                   const cause::DeviationMap& map, const DiagnoseOptions& options,
                   cause::CauseAnalysis* analysis) {
  cause::CauseOptions cause_options = options.causes;
  cause_options.threads = options.threads;
  const size_t shown = options.causes.max_alternatives + 1;
  const cause::ReplayGraph* graph = options.replay_graph;
  if (graph != nullptr) {
    for (int64_t group : cause::ReplayGroupsOf(*analysis, shown)) {
      if (!graph->HoldsGroup(group)) graph = nullptr;
      if (graph == nullptr) break;
    }
  }
  if (graph != nullptr) {
    cause::ReplayImpacts(*graph, map, shown, analysis, cause_options);
  } else {
    cause::ReplayImpacts(trace, features, map, shown, analysis, cause_options);
  }
}

// The verdict's cause: the best hypothesis when it stands above noise, else what the
// logs name; a log line of a crash or a timeout fails the run.
void DecideCause(const model::Trace& trace, const localize::StepFeatures& features,
                 const DiagnoseOptions& options, std::vector<Finding> all_findings,
                 Diagnosis* diagnosis) {
  cause::DeviationMap built;
  if (options.deviation_map == nullptr) {
    built = cause::BuildDeviationMap(trace, features, options.deviation);
  }
  const cause::DeviationMap& map =
      options.deviation_map != nullptr ? *options.deviation_map : built;
  cause::CauseOptions cause_options = options.causes;
  cause_options.threads = options.threads;
  cause::CauseAnalysis analysis = options.deviation_map != nullptr && options.cause_analysis != nullptr
                                      ? *options.cause_analysis
                                      : cause::AnalyzeCauses(map, cause_options);
  ReplayImpacts(trace, features, map, options, &analysis);
  cause::AddRequestCauses(
      options.request_causes != nullptr
          ? *options.request_causes
          : cause::FindRequestCauses(cause::RequestCauseInputOfTrace(trace), cause_options),
      cause_options, &analysis);
  if (map.steps.empty() && diagnosis->steps_scored == 0) {
    ComparePeersOfShortCapture(trace, features, &analysis, diagnosis);
  }
  diagnosis->cause_threshold = options.causes.min_score;
  diagnosis->max_alternatives = options.causes.max_alternatives;
  CauseOperatorFinder operators(trace, features, map);
  for (size_t i = 0; i < analysis.ranked.size() && i <= options.causes.max_alternatives; ++i) {
    diagnosis->candidates.push_back(MakeRootCause(map, options, operators, analysis.ranked[i]));
  }
  diagnosis->findings =
      FindingsOfCandidates(std::move(all_findings), diagnosis->candidates, options.max_findings);
  for (const LogEvidence& log : diagnosis->logs) {
    if (log.weight >= kFailingLogWeight) diagnosis->failed = true;
  }
  std::vector<size_t> order(diagnosis->candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<RootCause> second;
  if (analysis.degraded && analysis.has_second) {
    second.push_back(MakeRootCause(map, options, operators, analysis.second));
  }
  ChooseCause(order, analysis.degraded, analysis.degraded ? analysis.ranked[0].explained : 0.0,
              std::move(second), diagnosis);
}

// A hang fails the run. It is a communication failure unless the logs name a cause of
// another kind first (the culprit's illegal memory access, its OOM).
void DecideHang(const model::Trace& trace, const DiagnoseOptions& options, Diagnosis* diagnosis) {
  diagnosis->hang =
      options.hang_report != nullptr ? *options.hang_report : cause::FindHang(trace, options.hang);
  if (!diagnosis->hang.found()) return;
  diagnosis->failed = true;
  diagnosis->degraded = true;
  const bool log_cause =
      !diagnosis->logs.empty() && diagnosis->logs.front().signature != nullptr &&
      diagnosis->logs.front().signature->entry.role == wire::SignatureRole::kCause &&
      diagnosis->logs.front().weight >= kFailingLogWeight;
  diagnosis->category =
      log_cause ? diagnosis->logs.front().category : FaultCategory::kCommunicationNetwork;
}

// A sticky CUDA error in the trace fails the run; its code names the category (a kernel
// fault, or a launch failure of the driver) and outranks a hang it set off.
void DecideCrash(const model::Trace& trace, const DiagnoseOptions& options, Diagnosis* diagnosis) {
  diagnosis->crash = options.crash != nullptr ? *options.crash : cause::FindCrash(trace);
  if (!diagnosis->crash.found) return;
  diagnosis->failed = true;
  diagnosis->degraded = true;
  diagnosis->category = diagnosis->crash.category;
}

// An out-of-memory message fails the run: the process that raised it is gone (or its
// request was), whatever the trace shows before it.
// The slices of the findings a reader looks at, whichever candidate the decider takes.
base::Status SliceFindings(const model::Trace& trace, const DiagnoseOptions& options,
                           Diagnosis* diagnosis) {
  base::ScopedStage stage(options.progress, "slices");
  const std::vector<bool> sliced =
      FirstOfEachCandidate(diagnosis->findings, diagnosis->candidates, kSlicedFindings);
  for (size_t i = 0; i < diagnosis->findings.size(); ++i) {
    if (!sliced[i]) continue;
    Finding& finding = diagnosis->findings[i];
    auto slice = slice::SliceStep(trace, finding.step, finding.suspects, {}, options.slice);
    if (!slice.ok()) return slice.status();
    finding.slice = std::move(*slice);
  }
  return base::OkStatus();
}

void DecideOom(const model::Trace& trace, const DiagnoseOptions& options, Diagnosis* diagnosis) {
  diagnosis->oom =
      options.oom_report != nullptr ? *options.oom_report : cause::FindOom(trace, options.oom);
  if (!diagnosis->oom.found || diagnosis->crash.found) return;
  diagnosis->failed = true;
  diagnosis->degraded = true;
  diagnosis->category = FaultCategory::kMemoryResource;
}

}  // namespace

bool FindingBefore(const Finding& a, const Finding& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.peak_z != b.peak_z) return a.peak_z > b.peak_z;
  if (a.rank != b.rank) return a.rank < b.rank;
  return a.family < b.family;
}

void ScoreFindings(const localize::FeatureRows& rows, const DiagnoseOptions& options,
                   Diagnosis* diagnosis) {
  diagnosis->findings = ScoreAllFindings(rows, options, diagnosis);
  if (diagnosis->findings.size() > options.max_findings) {
    diagnosis->findings.resize(options.max_findings);
  }
}

std::vector<Finding> ScoreAllFindings(const localize::FeatureRows& rows,
                                      const DiagnoseOptions& options, Diagnosis* diagnosis) {
  base::ScopedStage stage(options.progress, "baselines");
  std::vector<model::StepIndex> all_steps;
  all_steps.reserve(rows.steps());
  for (uint32_t s = 0; s < rows.steps(); ++s) all_steps.push_back(model::StepIndex(s));
  StepScorer scorer(rows, all_steps, options);
  diagnosis->baseline_keys = scorer.baseline_keys();
  std::map<int32_t, int64_t> scored_steps_of_rank;
  FamilyGroups groups =
      ScoreSteps(rows, all_steps, options, &scorer, &scored_steps_of_rank, diagnosis);
  std::vector<Finding> findings;
  findings.reserve(groups.size());
  for (auto& [key, group] : groups) {
    findings.push_back(
        FindingOfGroup(rows, options, scorer, key, scored_steps_of_rank[key.first], &group));
  }
  std::sort(findings.begin(), findings.end(), FindingBefore);
  return findings;
}

namespace {

// A candidate below the threshold that the logs' first cause confirms: its category, the
// line within a step of its window. The engine's own line reports what the trace shows
// (SGLang's "Decode out of memory happened" where a request left the batch). Its place
// in `order`.
std::optional<size_t> ConfirmedByLogs(const Diagnosis& d, const std::vector<size_t>& order) {
  if (d.logs.empty() || d.logs.front().weight < kDegradingLogWeight) return std::nullopt;
  const LogEvidence& log = d.logs.front();
  if (log.step < 0) return std::nullopt;
  for (size_t i = 0; i < order.size(); ++i) {
    const cause::Hypothesis& h = d.candidates[order[i]].hypothesis;
    if (d.candidates[order[i]].category == log.category && log.step >= h.first_group - 1 &&
        log.step <= h.last_group + 1) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace

void ChooseCause(const std::vector<size_t>& ranked, bool degraded, double confidence,
                 std::vector<RootCause> second, Diagnosis* diagnosis) {
  Diagnosis& d = *diagnosis;
  d.causes.clear();
  d.alternatives.clear();
  d.alternative_probabilities.clear();
  std::vector<size_t> order = ranked;
  std::string confirmation;
  if (!(degraded && !order.empty())) {
    if (const std::optional<size_t> i = ConfirmedByLogs(d, order)) {
      const size_t confirmed = order[*i];
      std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(*i),
                  order.begin() + static_cast<std::ptrdiff_t>(*i) + 1);
      degraded = true;
      confidence = d.candidate_probabilities.empty() ? d.candidates[confirmed].hypothesis.explained
                                                     : d.candidate_probabilities[confirmed];
      second.clear();
      confirmation = fmt::format("{} at step {}", d.logs.front().Label(), d.logs.front().step);
    }
  }
  d.degraded = degraded && !order.empty();
  if (d.degraded) {
    d.causes.push_back(d.candidates[order[0]]);
    d.causes[0].confirmed_by_log = confirmation;
    d.causes.insert(d.causes.end(), second.begin(), second.end());
    d.category = d.causes[0].category;
    d.category_probability = confidence;
  }
  for (size_t i = d.degraded ? 1 : 0;
       i < order.size() && d.alternatives.size() < d.max_alternatives; ++i) {
    d.alternatives.push_back(d.candidates[order[i]].hypothesis);
    if (!d.candidate_probabilities.empty()) {
      d.alternative_probabilities.push_back(d.candidate_probabilities[order[i]]);
    }
  }
  // Without a cause in the trace, the logs' first cause names the category (not a vote:
  // the consequences it set off would outnumber it).
  if (!d.degraded && !d.logs.empty() && d.logs.front().weight >= kDegradingLogWeight) {
    d.degraded = true;
    d.category = d.logs.front().category;
  }
  if (!d.degraded && !d.failed) d.category = FaultCategory::kNone;
  OrderBySupportOfCause(&d);
}

bool SupportsCause(const RootCause& cause, int32_t rank, int64_t group) {
  const cause::Hypothesis& h = cause.hypothesis;
  if (!h.ShowsIn(group)) return false;
  if ((h.rank < 0 && h.node < 0) || rank == h.rank || h.IsVictimRank(rank)) return true;
  return std::any_of(cause.evidence.begin(), cause.evidence.end(),
                     [&](const CauseEvidence& cell) { return cell.rank == rank; });
}

void OrderBySupportOfCause(Diagnosis* diagnosis) {
  Diagnosis& d = *diagnosis;
  const RootCause* cause = d.degraded && !d.causes.empty() ? &d.causes.front() : nullptr;
  for (Finding& finding : d.findings) {
    finding.supports_cause = cause != nullptr && FindingSupports(*cause, finding);
  }
  for (AbnormalStep& step : d.steps) {
    step.supports_cause = cause != nullptr && SupportsCause(*cause, step.rank, step.group);
  }
  for (AbnormalRequest& request : d.requests) {
    request.supports_cause =
        cause != nullptr &&
        std::any_of(request.places.begin(), request.places.end(), [&](const auto& place) {
          return SupportsCause(*cause, place.first, place.second);
        });
  }
  // Each part in its own order, a previous cause's undone.
  std::sort(d.findings.begin(), d.findings.end(), FindingBefore);
  std::sort(d.steps.begin(), d.steps.end(), StepBefore);
  std::sort(d.requests.begin(), d.requests.end(), RequestBefore);
  const auto supports = [](const auto& item) { return item.supports_cause; };
  std::stable_partition(d.findings.begin(), d.findings.end(), supports);
  std::stable_partition(d.steps.begin(), d.steps.end(), supports);
  std::stable_partition(d.requests.begin(), d.requests.end(), supports);
}

base::StatusOr<Diagnosis> Diagnose(const model::Trace& trace, const DiagnoseOptions& options) {
  if (!trace.reconstructed) {
    return base::InvalidArgument("diagnose: the trace has not been reconstructed");
  }
  Diagnosis diagnosis;
  diagnosis.tuning = TuningOf(options);
  diagnosis.threshold = options.finding_threshold;
  diagnosis.logs_only = trace.events.size() == 0 && trace.logs.size() > 0;
  diagnosis.ranks = static_cast<int32_t>(
      std::set<int32_t>(trace.steps.rank.begin(), trace.steps.rank.end()).size());
  const localize::StepFeatures features = [&] {
    base::ScopedStage stage(options.progress, "features");
    return localize::ComputeStepFeatures(trace);
  }();
  diagnosis.max_findings = options.max_findings;
  std::vector<Finding> all_findings;
  {
    // The rows made elsewhere (every part's) when they carry the examples asked for.
    localize::FeatureRows own;
    const localize::FeatureRows* rows = options.feature_rows;
    if (rows == nullptr || rows->examples < options.max_suspects) {
      base::ScopedStage stage(options.progress, "feature rows");
      own =
          localize::FeatureRowsOfPart(trace, features, static_cast<uint32_t>(options.max_suspects));
      rows = &own;
    }
    all_findings = ScoreAllFindings(*rows, options, &diagnosis);
    // The rules' category votes read the best findings, whatever the cause.
    diagnosis.findings.assign(
        all_findings.begin(),
        all_findings.begin() + static_cast<std::ptrdiff_t>(
                                   std::min(all_findings.size(), options.max_findings)));
  }
  {
    // The rows made elsewhere (every part's, merged) when given.
    reconstruct::RequestRows own;
    const reconstruct::RequestRows* requests = options.request_rows;
    if (requests == nullptr) {
      own = reconstruct::RequestRowsOfPart(trace);
      requests = &own;
    }
    CollectAbnormalRequests(*requests, &diagnosis);
  }
  TELLER_RETURN_IF_ERROR(CollectLogEvidence(trace, options, &diagnosis));
  base::ScopedStage hypotheses(options.progress, "hypotheses");
  VoteFromFindings(diagnosis, options, &diagnosis.votes);
  DecideCategory(&diagnosis);
  DecideCause(trace, features, options, std::move(all_findings), &diagnosis);
  DecideHang(trace, options, &diagnosis);
  DecideCrash(trace, options, &diagnosis);
  DecideOom(trace, options, &diagnosis);
  AddNotes(trace, &diagnosis);
  TELLER_RETURN_IF_ERROR(SliceFindings(trace, options, &diagnosis));
  return diagnosis;
}

}  // namespace teller::diagnose
