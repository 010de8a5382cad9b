#include "diagnose/decider.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "diagnose/log_reading.h"

namespace teller::diagnose {
namespace {

constexpr char kSchema[] = "teller-decider/2";
constexpr size_t kModelColumns = 5;  // model_used .. model_run_p

std::vector<std::string_view> MakeFeatureNames() {
  std::vector<std::string_view> names = {
      "log_score",
      "above_rule_threshold",
      "score_to_top",
      "rules_top",
      "explained",
      "log_ratio_effect",
      "log_added_ms",
      "impact_share",
      "excess_share",
      "cost_negligible",
      "log_window_steps",
      "reached_collectives_last",
      "late_over_chance",
      "victim_share",
      "victim_wait_share",
      "every_rank",
      "by_transfer",
      "by_stall",
      "host_only_job",
      "log_of_its_category",
      "log_of_another_category",
      "model_used",  // the kModelColumns model columns start here
      "model_window_max_p",
      "model_window_mean_p",
      "model_type_agrees",
      "model_run_p",
  };
  static constexpr std::string_view kKindNames[] = {
      "kind_gpu_slow",       "kind_family_slow",  "kind_host_slow", "kind_launch_latency",
      "kind_copy_latency",   "kind_sync_latency", "kind_allocator", "kind_straggler",
      "kind_link_degraded",  "kind_engine_pause", "kind_reorder",   "kind_launch_retry",
      "kind_request_starved", "kind_request_preempted", "kind_request_misrouted"};
  static_assert(std::size(kKindNames) == cause::kCauseKindCount);
  names.insert(names.end(), std::begin(kKindNames), std::end(kKindNames));
  return names;
}

double Log1p(double x) { return std::log1p(std::max(x, 0.0)); }

// Evidence that a candidate is the cause, which may only raise its probability: a higher
// score or share explained, a larger effect, a rank reaching its collectives last, logs of
// its category, the learned model flagging its window. Fitted freely, correlations of the
// development draws gave some of these negative weights, and a clear slow GPU (score 71,
// explaining 85%, last at 99 of 126 collectives) fell below the threshold.
std::vector<bool> NonnegativeFeatures() {
  static constexpr std::string_view kEvidence[] = {
      "log_score",          "above_rule_threshold", "score_to_top",        "rules_top",
      "explained",          "log_ratio_effect",     "log_added_ms",        "impact_share",
      "reached_collectives_last", "late_over_chance", "log_of_its_category",
      "model_window_max_p", "model_window_mean_p",  "model_type_agrees"};
  std::vector<bool> out;
  for (std::string_view name : DeciderFeatureNames()) {
    out.push_back(std::find(std::begin(kEvidence), std::end(kEvidence), name) !=
                  std::end(kEvidence));
  }
  return out;
}

double Clamp(double x, double lo, double hi) {
  return std::isfinite(x) ? std::clamp(x, lo, hi) : lo;
}

// Whether a log event of at least the degrading weight names this category, or another.
std::pair<bool, bool> LogsOfCategory(const Diagnosis& diagnosis, FaultCategory category) {
  bool same = false, other = false;
  for (const LogEvidence& log : diagnosis.logs) {
    if (log.weight < kDegradingLogWeight) continue;
    (log.category == category ? same : other) = true;
  }
  return {same, other};
}

// The learned model's step probabilities inside [first, last]: the largest and the mean.
std::pair<double, double> ModelWindow(const ModelOpinion& model, int64_t first, int64_t last) {
  double largest = 0, sum = 0;
  int64_t count = 0;
  for (const ModelStep& step : model.step_probabilities) {
    if (step.step < first || step.step > last) continue;
    largest = std::max(largest, step.probability);
    sum += step.probability;
    ++count;
  }
  return {largest, count ? sum / count : 0.0};
}

// Runs right at threshold t: a modelled faulty run whose top candidate is its cause and
// reaches t, a fault-free run whose top candidate does not.
int64_t RunsRight(const DeciderSamples& samples, const std::vector<double>& top_p,
                  const std::vector<bool>& top_is_cause, double t) {
  int64_t right = 0;
  for (size_t run = 0; run < samples.run_faulty.size(); ++run) {
    const bool flagged = top_p[run] >= t;
    if (!samples.run_faulty[run])
      right += !flagged;
    else if (samples.run_modelled[run])
      right += flagged && top_is_cause[run];
  }
  return right;
}

// The share of fault-free runs whose top candidate reaches t.
double FalseAlarmShare(const DeciderSamples& samples, const std::vector<double>& top_p, double t) {
  int64_t fault_free = 0, flagged = 0;
  for (size_t run = 0; run < samples.run_faulty.size(); ++run) {
    if (samples.run_faulty[run]) continue;
    ++fault_free;
    flagged += top_p[run] >= t;
  }
  return fault_free > 0 ? static_cast<double>(flagged) / static_cast<double>(fault_free) : 0.0;
}

// Of the sorted cuts that set the most runs right, the middle of their widest contiguous
// stretch: its edges are where one more development run would fall the other way.
double MiddleOfWidestBest(const std::vector<double>& cuts, const std::vector<int64_t>& right) {
  const int64_t best = *std::max_element(right.begin(), right.end());
  double widest = -1.0, middle = 1.0;
  for (size_t begin = 0; begin < cuts.size(); ++begin) {
    if (right[begin] != best || (begin > 0 && right[begin - 1] == best)) continue;
    size_t end = begin;
    while (end + 1 < cuts.size() && right[end + 1] == best) ++end;
    if (cuts[end] - cuts[begin] > widest) {
      widest = cuts[end] - cuts[begin];
      middle = std::min(1.0, 0.5 * (cuts[begin] + cuts[end]));
    }
  }
  return middle;
}

}  // namespace

bool IsDecidable(const cause::Hypothesis& candidate) {
  return candidate.score >= kLeastDecidableScore;
}

const std::vector<std::string_view>& DeciderFeatureNames() {
  static const std::vector<std::string_view> names = MakeFeatureNames();
  return names;
}

std::vector<double> CandidateFeatures(const Diagnosis& diagnosis, size_t candidate) {
  const cause::Hypothesis& h = diagnosis.candidates[candidate].hypothesis;
  const double top_score = std::max(diagnosis.candidates.front().hypothesis.score, 1e-9);
  const double baseline_ns = std::max(h.step_baseline_ns, 1.0);
  const FaultCategory category = diagnosis.candidates[candidate].category;
  const auto [same_logs, other_logs] = LogsOfCategory(diagnosis, category);
  const ModelOpinion& model = diagnosis.model;
  const auto [window_max, window_mean] = ModelWindow(model, h.first_group, h.last_group);
  std::vector<double> x = {
      Log1p(h.score),
      h.score >= diagnosis.cause_threshold ? 1.0 : 0.0,
      Clamp(h.score / top_score, -1.0, 1.0),
      candidate == 0 ? 1.0 : 0.0,
      Clamp(h.explained, 0.0, 1.0),
      h.additive ? 0.0 : Log1p(std::abs(h.effect)),
      h.additive ? Log1p(h.effect / 1e6) : 0.0,
      Clamp(h.impact_ns / baseline_ns, 0.0, 10.0),
      Clamp(h.step_excess_ns / baseline_ns, -1.0, 10.0),
      h.cost_negligible ? 1.0 : 0.0,
      Log1p(static_cast<double>(h.steps)),
      h.reached_collectives_last ? 1.0 : 0.0,
      h.collectives > 0
          ? Clamp((h.collectives_late - h.collectives_late_by_chance) / h.collectives, -1.0, 1.0)
          : 0.0,
      // Victims as a share of the other ranks and their wait as a share of their steps'
      // time: the same cause waits the same on 8 ranks or 64 (counts and sums grow with
      // the job, and a large job's noise finds more ranks that waited a little).
      diagnosis.ranks > 1
          ? static_cast<double>(h.victims.size()) / static_cast<double>(diagnosis.ranks - 1)
          : 0.0,
      h.victims.empty() ? 0.0
                        : Clamp(h.victim_wait_ns / static_cast<double>(h.victims.size()) /
                                    baseline_ns,
                                0.0, 10.0),
      h.rank < 0 ? 1.0 : 0.0,
      h.by_transfer ? 1.0 : 0.0,
      h.by_stall ? 1.0 : 0.0,
      h.host_only_job ? 1.0 : 0.0,
      same_logs ? 1.0 : 0.0,
      other_logs ? 1.0 : 0.0,
      model.used ? 1.0 : 0.0,
      window_max,
      window_mean,
      model.used && model.abnormal && model.category == category ? 1.0 : 0.0,
      model.used ? model.abnormal_probability : 0.0,
  };
  for (int kind = 0; kind < cause::kCauseKindCount; ++kind) {
    x.push_back(static_cast<int>(h.kind) == kind ? 1.0 : 0.0);
  }
  return x;
}

namespace {

// The model's columns zeroed: the candidate as read when the model did not run (a trace
// it cannot read, one over its event budget, `--learned-model none`).
void DropModelColumns(std::vector<double>* features) {
  static const size_t first = static_cast<size_t>(
      std::find(DeciderFeatureNames().begin(), DeciderFeatureNames().end(), "model_used") -
      DeciderFeatureNames().begin());
  std::fill(features->begin() + first, features->begin() + first + kModelColumns, 0.0);
}

void AddRun(const CaseTruth& truth, const Diagnosis& diagnosis, bool with_model,
            DeciderSamples* samples) {
  const int32_t run = static_cast<int32_t>(samples->run_faulty.size());
  samples->run_faulty.push_back(truth.faulty);
  samples->run_modelled.push_back(truth.faulty && !CauseKindsOf(truth.mechanism).empty());
  for (size_t i = 0; i < diagnosis.candidates.size(); ++i) {
    std::vector<double> features = CandidateFeatures(diagnosis, i);
    if (!with_model) DropModelColumns(&features);
    samples->rows.push_back(std::move(features));
    samples->decidable.push_back(IsDecidable(diagnosis.candidates[i].hypothesis));
    samples->is_cause.push_back(truth.faulty &&
                                CauseMatches(truth, diagnosis.candidates[i].hypothesis));
    samples->run.push_back(run);
  }
}

}  // namespace

void AddDeciderSamples(const CaseTruth& truth, const Diagnosis& diagnosis,
                       DeciderSamples* samples) {
  AddRun(truth, diagnosis, true, samples);
  // A run the model read counts twice: as read, and as read without the model, so the
  // decider is fitted for both (one fitted with the model always there reads its absence
  // as the model saying "normal").
  if (diagnosis.model.used) AddRun(truth, diagnosis, false, samples);
}

Decider FitDecider(const DeciderSamples& samples, std::string fitted_on) {
  Decider decider;
  decider.model =
      base::LogisticRegression::Fit(samples.rows, samples.is_cause, 1.0, NonnegativeFeatures());
  decider.candidates = static_cast<int64_t>(samples.rows.size());
  decider.runs = static_cast<int64_t>(samples.run_faulty.size());
  decider.fitted_on = std::move(fitted_on);
  decider.constant.assign(decider.model.width(), !samples.rows.empty());
  for (const std::vector<double>& row : samples.rows) {
    for (size_t j = 0; j < row.size() && j < decider.constant.size(); ++j) {
      if (row[j] != samples.rows.front()[j]) decider.constant[j] = false;
    }
  }
  const size_t runs = samples.run_faulty.size();
  std::vector<double> top_p(runs, 0.0);
  std::vector<bool> top_is_cause(runs, false);
  for (size_t i = 0; i < samples.rows.size(); ++i) {
    if (!samples.decidable[i]) continue;
    const double p = decider.model.Probability(samples.rows[i]);
    const size_t run = static_cast<size_t>(samples.run[i]);
    if (p > top_p[run]) {
      top_p[run] = p;
      top_is_cause[run] = samples.is_cause[i];
    }
  }
  // Candidate thresholds: every run's top probability (and just above the largest).
  std::vector<double> cuts = top_p;
  cuts.push_back(1.0 + 1e-9);
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> right(cuts.size());
  for (size_t i = 0; i < cuts.size(); ++i) {
    right[i] = FalseAlarmShare(samples, top_p, cuts[i]) <= kMaxDevelopmentFalseAlarms
                   ? RunsRight(samples, top_p, top_is_cause, cuts[i])
                   : -1;
  }
  decider.threshold = MiddleOfWidestBest(cuts, right);
  return decider;
}

std::string DeciderJson(const Decider& decider) {
  nlohmann::json features = nlohmann::json::array();
  const auto& names = DeciderFeatureNames();
  for (size_t j = 0; j < decider.model.width() && j < names.size(); ++j) {
    features.push_back({{"name", names[j]},
                        {"mean", decider.model.mean()[j]},
                        {"scale", decider.model.scale()[j]},
                        {"weight", decider.model.weights()[j]}});
    if (j < decider.constant.size() && decider.constant[j]) features.back()["constant"] = true;
  }
  nlohmann::json out = {{"schema", kSchema},
                        {"fitted_on", decider.fitted_on},
                        {"candidates", decider.candidates},
                        {"runs", decider.runs},
                        {"threshold", decider.threshold},
                        {"bias", decider.model.bias()},
                        {"features", std::move(features)}};
  return out.dump(1) + "\n";
}

base::StatusOr<Decider> ParseDecider(std::string_view text, std::string_view source) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return base::InvalidArgument("{}: not a JSON object (expected {})", source, kSchema);
  }
  if (j.value("schema", "") != kSchema) {
    return base::InvalidArgument("{}: schema '{}', expected {}", source, j.value("schema", ""),
                                 kSchema);
  }
  const auto& names = DeciderFeatureNames();
  const nlohmann::json& features = j["features"];
  if (!features.is_array() || features.size() != names.size()) {
    return base::InvalidArgument("{}: {} features, expected {} ({} ... {})", source,
                                 features.is_array() ? features.size() : 0, names.size(),
                                 names.front(), names.back());
  }
  std::vector<double> mean, scale, weights;
  std::vector<bool> constant;
  for (size_t i = 0; i < features.size(); ++i) {
    const nlohmann::json& f = features[i];
    if (!f.is_object() || f.value("name", "") != names[i] || !f["mean"].is_number() ||
        !f["scale"].is_number() || !f["weight"].is_number()) {
      return base::InvalidArgument(
          "{}: features[{}]: expected {{name: \"{}\", mean, scale, weight}}", source, i, names[i]);
    }
    if (f.contains("constant") && !f["constant"].is_boolean()) {
      return base::InvalidArgument("{}: features[{}].constant: expected true or false", source, i);
    }
    mean.push_back(f["mean"].get<double>());
    scale.push_back(f["scale"].get<double>());
    weights.push_back(f["weight"].get<double>());
    constant.push_back(f.value("constant", false));
  }
  if (!j["threshold"].is_number() || !j["bias"].is_number()) {
    return base::InvalidArgument("{}: expected numbers 'threshold' and 'bias'", source);
  }
  Decider decider;
  decider.model = base::LogisticRegression::FromParameters(
      std::move(mean), std::move(scale), std::move(weights), j["bias"].get<double>());
  decider.threshold = j["threshold"].get<double>();
  decider.constant = std::move(constant);
  decider.candidates = j.value("candidates", int64_t{0});
  decider.runs = j.value("runs", int64_t{0});
  decider.fitted_on = j.value("fitted_on", "");
  return decider;
}

base::StatusOr<Decider> LoadDecider(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  TELLER_ASSIGN_OR_RETURN(Decider decider, ParseDecider(text, path));
  decider.source = path;
  return decider;
}

namespace {

// The first feature that some candidate (its evidence vector in `candidates`) moves off the
// value it held over every candidate the decider was fitted on; "" when none.
std::string_view FeatureNeverSeen(const Decider& decider,
                                  const std::vector<std::vector<double>>& candidates) {
  const auto& names = DeciderFeatureNames();
  for (const std::vector<double>& x : candidates) {
    for (size_t j = 0; j < x.size() && j < decider.constant.size() && j < names.size(); ++j) {
      const double held = decider.model.mean()[j];
      if (decider.constant[j] && std::abs(x[j] - held) > 1e-9 * std::max(1.0, std::abs(held))) {
        return names[j];
      }
    }
  }
  return "";
}

}  // namespace

void ApplyDecider(const Decider& decider, Diagnosis* diagnosis) {
  Diagnosis& d = *diagnosis;
  // A capture without a baseline of steps is decided by its kernel calls' peers: the decider
  // was fitted on runs with one.
  if (d.candidates.empty() || d.peer_check.ran()) return;
  std::vector<std::vector<double>> features;
  for (size_t i = 0; i < d.candidates.size(); ++i) features.push_back(CandidateFeatures(d, i));
  if (const std::string_view unseen = FeatureNeverSeen(decider, features); !unseen.empty()) {
    d.notes.push_back(fmt::format(
        "the learned decider was fitted on no run like this one (its candidates' {} was one "
        "value over all it was fitted on): the rules decided",
        unseen));
    return;
  }
  d.decider = "learned";
  d.decider_threshold = decider.threshold;
  d.decider_file = decider.source;
  d.candidate_probabilities.clear();
  for (const std::vector<double>& x : features) {
    d.candidate_probabilities.push_back(decider.model.Probability(x));
  }
  if (d.hang.found() || d.crash.found || d.oom.found) return;  // the failure is the verdict
  std::vector<size_t> order(d.candidates.size());
  std::iota(order.begin(), order.end(), 0);
  auto decidable = [&](size_t i) { return IsDecidable(d.candidates[i].hypothesis); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (decidable(a) != decidable(b)) return decidable(a);
    return d.candidate_probabilities[a] > d.candidate_probabilities[b];
  });
  const double top_p = decidable(order[0]) ? d.candidate_probabilities[order[0]] : 0.0;
  // The rules' second cause explains what their first leaves: kept with that first only.
  std::vector<RootCause> second;
  if (d.causes.size() > 1 && order[0] == 0) second.push_back(d.causes[1]);
  d.degraded_probability = top_p;
  ChooseCause(order, decidable(order[0]) && top_p >= decider.threshold, top_p, std::move(second),
              diagnosis);
}

}  // namespace teller::diagnose
