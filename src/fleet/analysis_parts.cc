#include "fleet/analysis_parts.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "base/byte_io.h"
#include "cause/crash_report_wire.h"
#include "cause/hang_summary_wire.h"
#include "cause/oom_trend_wire.h"
#include "cause/replay_graph_wire.h"
#include "cause/request_causes.h"
#include "cause/step_measurements_wire.h"
#include "cause/step_replay.h"
#include "diagnose/cause_operators_wire.h"
#include "localize/baseline.h"
#include "localize/feature_rows_wire.h"
#include "localize/step_features_wire.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/cross_rank.h"
#include "reconstruct/cross_rank_wire.h"
#include "reconstruct/request_rows_wire.h"

namespace teller::fleet {
namespace {

// Every message and answer: a 4-byte magic and a u32 version (base/byte_io.h), the phase
// (kGiveUp: a give-up), the units it speaks of, ascending, and its payloads: per unit the
// phase's count of encoded buffers, in unit order, or buffers for every unit (the merged
// summaries), or the give-up's reason.
constexpr std::string_view kMagic = "TLFA";
constexpr uint32_t kGiveUp = 0;

struct Envelope {
  uint32_t phase = kGiveUp;
  std::vector<uint32_t> units;
  std::vector<std::string> payloads;
};

std::string Encode(uint32_t phase, const std::vector<uint32_t>& units,
                   const std::vector<std::string>& payloads) {
  base::WireWriter out(kMagic, kAnalysisWireVersion);
  out.Value<uint32_t>(phase);
  out.Column(units);
  out.Strings(payloads);
  return out.Take();
}

std::string Encode(AnalysisPhase phase, const std::vector<uint32_t>& units,
                   const std::vector<std::string>& payloads) {
  return Encode(static_cast<uint32_t>(phase), units, payloads);
}

base::StatusOr<Envelope> DecodeAny(std::string_view bytes, const std::string& what) {
  base::WireReader in(bytes, what);
  Envelope envelope;
  TELLER_RETURN_IF_ERROR(in.Header(kMagic, kAnalysisWireVersion));
  TELLER_RETURN_IF_ERROR(in.Value(&envelope.phase, "the phase"));
  TELLER_RETURN_IF_ERROR(in.Column("units", &envelope.units));
  TELLER_RETURN_IF_ERROR(in.Strings("payloads", &envelope.payloads));
  TELLER_RETURN_IF_ERROR(in.End());
  for (size_t i = 1; i < envelope.units.size(); ++i) {
    if (envelope.units[i] <= envelope.units[i - 1]) {
      return base::DataLoss("{}: units not ascending at unit {}", what, envelope.units[i]);
    }
  }
  return envelope;
}

// The envelope of `phase` with `payloads_per_unit` buffers per unit (0: any number); a
// give-up is an error that gives its reason.
base::StatusOr<Envelope> Decode(std::string_view bytes, AnalysisPhase phase,
                                size_t payloads_per_unit, const std::string& what) {
  TELLER_ASSIGN_OR_RETURN(Envelope envelope, DecodeAny(bytes, what));
  if (envelope.phase == kGiveUp) {
    return base::Internal("{} gave up: {}", what,
                          envelope.payloads.empty() ? "no reason given" : envelope.payloads[0]);
  }
  if (envelope.phase != static_cast<uint32_t>(phase)) {
    return base::DataLoss("{}: phase {} where phase {} was due", what, envelope.phase,
                          static_cast<uint32_t>(phase));
  }
  if (payloads_per_unit > 0 && envelope.payloads.size() != envelope.units.size() * payloads_per_unit) {
    return base::DataLoss("{}: {} payloads for {} units, {} each expected", what,
                          envelope.payloads.size(), envelope.units.size(), payloads_per_unit);
  }
  return envelope;
}

// A failed status with the unit it concerns.
base::Status OfUnit(const base::Status& status, uint32_t unit) {
  return status.WithContext("unit " + std::to_string(unit));
}

// An operator query's rows index the part's steps: a damaged or foreign one is an error.
base::Status CheckQueryFits(const diagnose::OperatorQuery& query, const model::Trace& part,
                            uint32_t unit) {
  for (const diagnose::OperatorCell& cell : query.cells) {
    for (const diagnose::OperatorRow& row : cell.rows) {
      if (row.step >= part.steps.size()) {
        return OfUnit(base::DataLoss("an operator query's row of step {}, the part holds {}",
                                     row.step, part.steps.size()),
                      unit);
      }
    }
  }
  return base::OkStatus();
}

}  // namespace

bool PhaseHasAnswer(AnalysisPhase phase) { return phase != AnalysisPhase::kReplay; }

size_t PayloadsPerUnit(AnalysisPhase phase) {
  switch (phase) {
    case AnalysisPhase::kSummaries:
      return 3;  // the step-feature and the measurement summary, the collectives for the hang
                 // scan
    case AnalysisPhase::kMeasurements:
      return 7;  // the measurement rows, the findings' rows, the request rows, the crash, the
                 // memory samples, the hang's culprits' states and stalled steps
    case AnalysisPhase::kReplay:
      return 2;  // the replay graph, the shown causes' operators
    default:
      return 1;
  }
}

std::string GiveUpMessage(std::string_view why) { return Encode(kGiveUp, {}, {std::string(why)}); }

std::optional<std::string> GiveUpReason(std::string_view message) {
  static const std::string kWhat = "analysis message";
  base::StatusOr<Envelope> envelope = DecodeAny(message, kWhat);
  if (!envelope.ok() || envelope->phase != kGiveUp) return std::nullopt;
  return envelope->payloads.empty() ? "no reason given" : envelope->payloads[0];
}

// ---- Each process -------------------------------------------------------------------

PartsOwner::PartsOwner(std::vector<uint32_t> units, std::vector<model::Trace> parts)
    : units_(std::move(units)), parts_(std::move(parts)) {}

size_t PartsOwner::steps() const {
  size_t steps = 0;
  for (const model::Trace& part : parts_) steps += part.steps.size();
  return steps;
}

std::string PartsOwner::Message(AnalysisPhase phase, std::string_view answer) {
  base::StatusOr<std::string> message = base::Internal("no phase {}", static_cast<uint32_t>(phase));
  switch (phase) {
    case AnalysisPhase::kCollectives:
      message = CollectivesMessage();
      break;
    case AnalysisPhase::kStepOrder:
      message = StepOrderMessage(answer);
      break;
    case AnalysisPhase::kSummaries:
      message = SummariesMessage(answer);
      break;
    case AnalysisPhase::kMeasurements:
      message = MeasurementsMessage(answer);
      break;
    case AnalysisPhase::kReplay:
      message = ReplayMessage(answer);
      break;
  }
  return message.ok() ? *std::move(message) : GiveUpMessage(message.status().message());
}

base::StatusOr<std::string> PartsOwner::CollectivesMessage() {
  if (units_.size() != parts_.size()) {
    return base::Internal("{} units but {} parts", units_.size(), parts_.size());
  }
  std::vector<std::string> payloads;
  for (size_t k = 0; k < parts_.size(); ++k) {
    base::Status prepared = reconstruct::PreparePart(&parts_[k]);
    if (!prepared.ok()) return OfUnit(prepared, units_[k]);
    payloads.push_back(reconstruct::EncodeCollectiveRecords(
        reconstruct::ExtractCollectiveRecords(parts_[k])));
  }
  return Encode(AnalysisPhase::kCollectives, units_, payloads);
}

namespace {

// The first process's answer to the phase: its units must be the process's own.
base::StatusOr<Envelope> DecodeAnswer(std::string_view answer, AnalysisPhase phase,
                                      const std::vector<uint32_t>& units) {
  static const std::string kWhat = "the first process's answer";
  TELLER_ASSIGN_OR_RETURN(Envelope envelope, Decode(answer, phase, 1, kWhat));
  if (envelope.units != units) {
    return base::DataLoss("{}: {} units, not this process's {}", kWhat, envelope.units.size(),
                          units.size());
  }
  return envelope;
}

}  // namespace

base::StatusOr<std::string> PartsOwner::StepOrderMessage(std::string_view answer) {
  TELLER_ASSIGN_OR_RETURN(const Envelope shares,
                          DecodeAnswer(answer, AnalysisPhase::kCollectives, units_));
  std::vector<std::string> payloads;
  for (size_t k = 0; k < parts_.size(); ++k) {
    base::StatusOr<reconstruct::CrossRankPlan::Part> share =
        reconstruct::DecodeCrossRankPart(shares.payloads[k]);
    if (!share.ok()) return OfUnit(share.status(), units_[k]);
    // The first process builds its joined trace with the default options too.
    base::Status built = reconstruct::BuildCallChainsOfPart(&parts_[k], *share);
    if (!built.ok()) return OfUnit(built, units_[k]);
    payloads.push_back(
        reconstruct::EncodeStepOrderRecords(reconstruct::ExtractStepOrderRecords(parts_[k])));
  }
  return Encode(AnalysisPhase::kStepOrder, units_, payloads);
}

base::StatusOr<std::string> PartsOwner::SummariesMessage(std::string_view answer) {
  TELLER_ASSIGN_OR_RETURN(const Envelope shares,
                          DecodeAnswer(answer, AnalysisPhase::kStepOrder, units_));
  std::vector<std::string> payloads;
  local_features_.clear();
  for (size_t k = 0; k < parts_.size(); ++k) {
    base::StatusOr<reconstruct::StepOrderPlan::Part> share =
        reconstruct::DecodeStepOrderPart(shares.payloads[k]);
    if (!share.ok()) return OfUnit(share.status(), units_[k]);
    base::Status applied = reconstruct::ApplyStepOrderMatches(*share, &parts_[k]);
    if (!applied.ok()) return OfUnit(applied, units_[k]);
    local_features_.push_back(localize::ComputeLocalStepFeatures(parts_[k]));
    payloads.push_back(localize::EncodeStepFeatureSummary(local_features_.back().summary));
    payloads.push_back(
        cause::EncodeMeasurementSummary(cause::SummarizeMeasurementInputs(parts_[k])));
    payloads.push_back(cause::EncodeCollectiveSummary(cause::SummarizeCollectives(parts_[k])));
  }
  return Encode(AnalysisPhase::kSummaries, units_, payloads);
}

base::StatusOr<std::string> PartsOwner::MeasurementsMessage(std::string_view answer) {
  static const std::string kWhat = "the first process's merged summaries";
  TELLER_ASSIGN_OR_RETURN(const Envelope merged,
                          Decode(answer, AnalysisPhase::kSummaries, 0, kWhat));
  if (!merged.units.empty() || merged.payloads.size() != 4) {
    return base::DataLoss("{}: {} payloads, 4 expected", kWhat, merged.payloads.size());
  }
  if (local_features_.size() != parts_.size()) {
    return base::Internal("the measurements came before the summaries");
  }
  TELLER_ASSIGN_OR_RETURN(const localize::MergedStepFeatureSummary merged_features,
                          localize::DecodeMergedStepFeatureSummary(merged.payloads[0]));
  TELLER_ASSIGN_OR_RETURN(const cause::MergedMeasurementSummary merged_measurements,
                          cause::DecodeMergedMeasurementSummary(merged.payloads[1]));
  TELLER_ASSIGN_OR_RETURN(const cause::OomSite site, cause::DecodeOomSite(merged.payloads[2]));
  TELLER_ASSIGN_OR_RETURN(const cause::HangQuery hang, cause::DecodeHangQuery(merged.payloads[3]));
  const cause::HangOptions hang_options = cause::OptionsOfQuery(hang);
  std::vector<std::string> payloads;
  replay_inputs_.clear();
  for (size_t k = 0; k < parts_.size(); ++k) {
    base::StatusOr<localize::StepFeatures> features = localize::FinishStepFeatures(
        parts_[k], std::move(local_features_[k]), merged_features);
    if (!features.ok()) return OfUnit(features.status(), units_[k]);
    base::StatusOr<std::vector<int32_t>> matches =
        cause::RunMatchOfEvents(parts_[k], merged_measurements);
    if (!matches.ok()) return OfUnit(matches.status(), units_[k]);
    replay_inputs_.push_back({cause::NodeCells(parts_[k], *features), std::move(*matches)});
    base::StatusOr<cause::StepMeasurements> rows =
        cause::MeasureStepsOfPart(parts_[k], *features, merged_measurements);
    if (!rows.ok()) return OfUnit(rows.status(), units_[k]);
    payloads.push_back(cause::EncodeStepMeasurements(*rows));
    payloads.push_back(
        localize::EncodeFeatureRows(localize::FeatureRowsOfPart(parts_[k], *features)));
    payloads.push_back(reconstruct::EncodeRequestRows(reconstruct::RequestRowsOfPart(parts_[k])));
    payloads.push_back(cause::EncodeCrashReport(cause::FindCrash(parts_[k])));
    payloads.push_back(cause::EncodeMemoryTrendPart(
        site.found ? cause::SummarizeMemoryTrend(parts_[k], site.before_ns)
                   : cause::MemoryTrendPart{}));
    payloads.push_back(cause::EncodeCulpritStatesPart(
        cause::ReadCulpritStates(parts_[k], hang.probes, hang_options)));
    payloads.push_back(
        cause::EncodeStalledSteps(cause::ReadStalledSteps(parts_[k], hang_options)));
  }
  local_features_.clear();
  return Encode(AnalysisPhase::kMeasurements, units_, payloads);
}

base::StatusOr<std::string> PartsOwner::ReplayMessage(std::string_view answer) {
  static const std::string kWhat = "the first process's replay groups";
  TELLER_ASSIGN_OR_RETURN(const Envelope asked,
                          Decode(answer, AnalysisPhase::kMeasurements, 0, kWhat));
  // The groups, then per part the shown causes' operator queries.
  if (!asked.units.empty() || asked.payloads.size() != 1 + parts_.size()) {
    return base::DataLoss("{}: {} payloads, {} expected", kWhat, asked.payloads.size(),
                          1 + parts_.size());
  }
  if (replay_inputs_.size() != parts_.size()) {
    return base::Internal("the replay came before the measurements");
  }
  TELLER_ASSIGN_OR_RETURN(const std::vector<int64_t> groups,
                          cause::DecodeReplayGroups(asked.payloads[0]));
  std::vector<std::string> payloads;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const ReplayInputs& inputs = replay_inputs_[k];
    payloads.push_back(cause::EncodeReplayGraph(
        cause::CutReplayGraph(parts_[k], inputs.node_cells, inputs.match_of_event, groups)));
    TELLER_ASSIGN_OR_RETURN(const std::vector<diagnose::OperatorQuery> queries,
                            diagnose::DecodeOperatorQueries(asked.payloads[1 + k]));
    std::vector<std::vector<diagnose::CauseOperator>> answers;
    for (const diagnose::OperatorQuery& query : queries) {
      TELLER_RETURN_IF_ERROR(CheckQueryFits(query, parts_[k], units_[k]));
      answers.push_back(diagnose::FindOperatorsOfPart(parts_[k], inputs.node_cells, query));
    }
    payloads.push_back(diagnose::EncodeCauseOperators(answers));
  }
  replay_inputs_.clear();
  return Encode(AnalysisPhase::kReplay, units_, payloads);
}

// ---- The first process --------------------------------------------------------------

// Every process's payloads of one phase, by unit ascending.
struct PartsMerger::Received {
  std::vector<uint32_t> units;
  std::vector<std::vector<std::string>> payloads;  // by unit
};

base::StatusOr<PartsMerger::Received> PartsMerger::Receive(AnalysisPhase phase,
                                                           const std::vector<std::string>& messages,
                                                           size_t payloads_per_unit) {
  if (messages.size() != processes_) {
    return base::Internal("{} messages from {} processes", messages.size(), processes_);
  }
  if (phase == AnalysisPhase::kCollectives) {
    owned_.assign(processes_, {});
  } else if (owned_.size() != processes_) {
    return base::Internal("phase {} before the first", static_cast<uint32_t>(phase));
  }
  std::vector<std::pair<uint32_t, std::vector<std::string>>> by_unit;
  for (size_t p = 0; p < processes_; ++p) {
    const std::string what = "the message of process " + std::to_string(p);
    TELLER_ASSIGN_OR_RETURN(Envelope envelope,
                            Decode(messages[p], phase, payloads_per_unit, what));
    if (phase == AnalysisPhase::kCollectives) {
      owned_[p] = envelope.units;
    } else if (envelope.units != owned_[p]) {
      return base::DataLoss("{}: other units than in the first phase", what);
    }
    for (size_t i = 0; i < envelope.units.size(); ++i) {
      auto first = std::make_move_iterator(envelope.payloads.begin() +
                                           static_cast<ptrdiff_t>(i * payloads_per_unit));
      by_unit.emplace_back(envelope.units[i],
                           std::vector<std::string>(first, first + static_cast<ptrdiff_t>(
                                                                       payloads_per_unit)));
    }
  }
  std::sort(by_unit.begin(), by_unit.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Received received;
  for (auto& [unit, payloads] : by_unit) {
    if (!received.units.empty() && received.units.back() == unit) {
      return base::DataLoss("unit {} came from two processes", unit);
    }
    received.units.push_back(unit);
    received.payloads.push_back(std::move(payloads));
  }
  return received;
}

namespace {

// To each process, the payloads of its units (`owned`, by process) made by `payload_of`
// from the unit's place in `units` (the run's, ascending).
std::vector<std::string> SharesByProcess(AnalysisPhase phase,
                                         const std::vector<std::vector<uint32_t>>& owned,
                                         const std::vector<uint32_t>& units,
                                         const std::function<std::string(size_t)>& payload_of) {
  std::vector<std::string> answers;
  for (const std::vector<uint32_t>& own : owned) {
    std::vector<std::string> payloads;
    for (uint32_t unit : own) {
      const auto at = std::lower_bound(units.begin(), units.end(), unit);
      payloads.push_back(payload_of(static_cast<size_t>(at - units.begin())));
    }
    answers.push_back(Encode(phase, own, payloads));
  }
  return answers;
}

// The site of the first out-of-memory line, its time shifted by the run's clock offsets as
// the joined trace's lines are (reconstruct::ShiftLogLines); none without the lines.
cause::OomSite OomSiteOfLogs(const model::LogTable* logs, const base::StringPool* strings,
                             const reconstruct::CrossRankPlan::Part& joined_share) {
  if (logs == nullptr || strings == nullptr) return {};
  cause::OomSite site = cause::FindOomSite(*logs, *strings);
  if (!site.found) return site;
  model::LogTable shifted = *logs;
  reconstruct::ShiftLogLines(joined_share, &shifted);
  return cause::FindOomSite(shifted, *strings);
}

}  // namespace

std::vector<int32_t> UnitBundles(const import::ImportPlan& plan) {
  std::vector<int32_t> bundles;
  for (const import::ImportUnit& unit : plan.units) {
    bundles.push_back(unit.bundle_process >= 0 ? static_cast<int32_t>(unit.file) : -1);
  }
  return bundles;
}

std::vector<int32_t> PartsMerger::BundlesOf(const std::vector<uint32_t>& units) const {
  std::vector<int32_t> bundles;
  for (uint32_t unit : units) {
    bundles.push_back(unit < unit_bundle_.size() ? unit_bundle_[unit] : -1);
  }
  return bundles;
}

base::StatusOr<std::vector<std::string>> PartsMerger::AnswerCollectives(const Received& received) {
  std::vector<reconstruct::CollectiveRecords> records;
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto decoded = reconstruct::DecodeCollectiveRecords(received.payloads[i][0]);
    if (!decoded.ok()) return OfUnit(decoded.status(), received.units[i]);
    records.push_back(std::move(*decoded));
  }
  // As the join numbers a bundle's unranked processes, before reconstruction.
  const std::vector<uint8_t> renumbered =
      reconstruct::NumberUnrankedProcesses(BundlesOf(received.units), &records);
  // As BuildCallChains aligns clocks on the joined trace (BuildOptions' default).
  reconstruct::CrossRankPlan plan =
      reconstruct::MatchCollectiveRecords(records, reconstruct::BuildOptions{}.align_clocks);
  for (size_t i = 0; i < records.size(); ++i) {
    if (renumbered[i]) plan.parts[i].process_rank = records[i].process_rank;
  }
  first_step_order_match_ = reconstruct::FirstStepOrderMatchId(plan);
  units_ = received.units;
  std::vector<std::string> answers =
      SharesByProcess(AnalysisPhase::kCollectives, owned_, received.units,
                      [&](size_t at) { return reconstruct::EncodeCrossRankPart(plan.parts[at]); });
  // Kept for the run: its counters and notes, and the joined trace's clock offsets.
  joined_share_ = reconstruct::JoinedShare(plan);
  plan.parts.clear();
  cross_rank_ = std::move(plan);
  return answers;
}

base::StatusOr<std::vector<std::string>> PartsMerger::AnswerStepOrder(const Received& received) {
  std::vector<reconstruct::StepOrderRecords> records;
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto decoded = reconstruct::DecodeStepOrderRecords(received.payloads[i][0]);
    if (!decoded.ok()) return OfUnit(decoded.status(), received.units[i]);
    records.push_back(std::move(*decoded));
  }
  const reconstruct::StepOrderPlan plan =
      reconstruct::MatchStepOrderRecords(records, first_step_order_match_);
  step_order_.matched = plan.matched;
  step_order_.skipped = plan.skipped;
  return SharesByProcess(AnalysisPhase::kStepOrder, owned_, received.units, [&](size_t at) {
    return reconstruct::EncodeStepOrderPart(plan.parts[at]);
  });
}

base::StatusOr<std::vector<std::string>> PartsMerger::AnswerSummaries(const Received& received) {
  std::vector<localize::StepFeatureSummary> features;
  std::vector<cause::MeasurementSummary> measurements;
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto feature_summary = localize::DecodeStepFeatureSummary(received.payloads[i][0]);
    if (!feature_summary.ok()) return OfUnit(feature_summary.status(), received.units[i]);
    auto measurement_summary = cause::DecodeMeasurementSummary(received.payloads[i][1]);
    if (!measurement_summary.ok()) return OfUnit(measurement_summary.status(), received.units[i]);
    features.push_back(std::move(*feature_summary));
    measurements.push_back(std::move(*measurement_summary));
  }
  collectives_.clear();
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto collectives = cause::DecodeCollectiveSummary(received.payloads[i][2]);
    if (!collectives.ok()) return OfUnit(collectives.status(), received.units[i]);
    cause::MergeCollectiveSummary(std::move(*collectives), &collectives_);
  }
  // The culprits as the trace's collectives show them; none for other evidence (the
  // diagnosis reads those on the joined trace).
  cause::HangReport waits;
  std::vector<cause::CulpritProbe> probes;
  if (cause::FindTraceCulprits(collectives_, hang_options_, &waits)) {
    probes = cause::CulpritProbes(waits);
  }
  hang_query_ = cause::QueryWithOptions(std::move(probes), hang_options_);
  oom_site_ = OomSiteOfLogs(logs_, strings_, joined_share_);
  const std::string merged = Encode(
      AnalysisPhase::kSummaries, {},
      {localize::EncodeMergedStepFeatureSummary(localize::MergeStepFeatureSummaries(features)),
       cause::EncodeMergedMeasurementSummary(cause::MergeMeasurementSummaries(measurements)),
       cause::EncodeOomSite(oom_site_), cause::EncodeHangQuery(hang_query_)});
  return std::vector<std::string>(processes_, merged);
}

base::Status PartsMerger::TakeMeasurements(const Received& received) {
  std::vector<cause::StepMeasurements> parts;
  std::vector<localize::FeatureRows> feature_parts;
  std::vector<reconstruct::RequestRows> request_parts;
  std::vector<cause::CrashReport> crashes;
  std::vector<cause::MemoryTrendPart> memory;
  culprit_states_.clear();
  stalled_steps_.clear();
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto rows = cause::DecodeStepMeasurements(received.payloads[i][0]);
    if (!rows.ok()) return OfUnit(rows.status(), received.units[i]);
    parts.push_back(std::move(*rows));
    auto feature_rows = localize::DecodeFeatureRows(received.payloads[i][1]);
    if (!feature_rows.ok()) return OfUnit(feature_rows.status(), received.units[i]);
    feature_parts.push_back(std::move(*feature_rows));
    auto request_rows = reconstruct::DecodeRequestRows(received.payloads[i][2]);
    if (!request_rows.ok()) return OfUnit(request_rows.status(), received.units[i]);
    request_parts.push_back(std::move(*request_rows));
    auto crash = cause::DecodeCrashReport(received.payloads[i][3]);
    if (!crash.ok()) return OfUnit(crash.status(), received.units[i]);
    crashes.push_back(std::move(*crash));
    auto samples = cause::DecodeMemoryTrendPart(received.payloads[i][4]);
    if (!samples.ok()) return OfUnit(samples.status(), received.units[i]);
    memory.push_back(std::move(*samples));
    auto states = cause::DecodeCulpritStatesPart(received.payloads[i][5]);
    if (!states.ok()) return OfUnit(states.status(), received.units[i]);
    culprit_states_.push_back(std::move(*states));
    auto stalled = cause::DecodeStalledSteps(received.payloads[i][6]);
    if (!stalled.ok()) return OfUnit(stalled.status(), received.units[i]);
    stalled_steps_.push_back(std::move(*stalled));
  }
  steps_before_.assign(1, 0);
  nodes_before_.assign(1, 0);
  for (size_t k = 0; k < parts.size(); ++k) {
    steps_before_.push_back(steps_before_.back() + static_cast<uint32_t>(parts[k].steps()));
    nodes_before_.push_back(nodes_before_.back() + static_cast<uint32_t>(feature_parts[k].nodes));
  }
  rows_ = cause::ConcatMeasurements(parts);
  feature_rows_ = localize::ConcatFeatureRows(feature_parts);
  request_rows_ = reconstruct::MergeRequestRows(request_parts);
  crash_ = cause::MergeCrashReports(crashes);
  memory_trend_ = oom_site_.found ? cause::MergeMemoryTrends(memory, oom_site_.device)
                                  : cause::MemoryTrend{};
  finished_ = true;
  return base::OkStatus();
}

std::vector<std::string> PartsMerger::AnswerReplayGroups() {
  has_replay_graph_ = false;
  cause_operators_.clear();
  const cause::DeviationMap map = cause::FitDeviationMap(rows_, deviation_options_);
  fitted_causes_ = cause::AnalyzeCauses(map, cause_options_);
  replay_groups_ = cause::ReplayGroupsOf(*fitted_causes_, cause_options_.max_alternatives + 1);
  // The causes the diagnosis shows, and what each part needs to name their operators.
  asked_causes_.clear();
  const std::vector<cause::Hypothesis>& ranked = fitted_causes_->ranked;
  for (size_t i = 0; i < ranked.size() && i <= cause_options_.max_alternatives; ++i) {
    asked_causes_.push_back(&ranked[i]);
  }
  if (fitted_causes_->degraded && fitted_causes_->has_second) {
    asked_causes_.push_back(&fitted_causes_->second);
  }
  std::vector<diagnose::OperatorQuery> queries;
  for (const cause::Hypothesis* h : asked_causes_) queries.push_back(diagnose::QueryOfCause(map, *h));
  const std::string groups = cause::EncodeReplayGroups(replay_groups_);
  std::vector<std::string> asked;
  for (size_t p = 0; p < processes_; ++p) {
    std::vector<std::string> payloads = {groups};
    for (uint32_t unit : owned_[p]) {
      const auto k = static_cast<size_t>(std::lower_bound(units_.begin(), units_.end(), unit) -
                                         units_.begin());
      std::vector<diagnose::OperatorQuery> of_part;
      for (const diagnose::OperatorQuery& query : queries) {
        of_part.push_back(diagnose::QueryOfSteps(query, steps_before_[k], steps_before_[k + 1]));
      }
      payloads.push_back(diagnose::EncodeOperatorQueries(of_part));
    }
    asked.push_back(Encode(AnalysisPhase::kMeasurements, {}, payloads));
  }
  return asked;
}

const cause::CauseAnalysis* PartsMerger::FittedCauses(const cause::DeviationOptions& deviation,
                                                      const cause::CauseOptions& causes) const {
  if (!finished_ || !fitted_causes_) return nullptr;
  cause::CauseOptions asked = causes;
  asked.threads = cause_options_.threads;
  return deviation == deviation_options_ && asked == cause_options_ ? &*fitted_causes_ : nullptr;
}

base::Status PartsMerger::TakeReplayGraphs(const Received& received) {
  std::vector<cause::ReplayGraph> graphs;
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto graph = cause::DecodeReplayGraph(received.payloads[i][0]);
    if (!graph.ok()) return OfUnit(graph.status(), received.units[i]);
    if (graph->groups != replay_groups_) {
      return OfUnit(base::DataLoss("a replay graph of {} groups, {} asked for",
                                   graph->groups.size(), replay_groups_.size()),
                    received.units[i]);
    }
    graphs.push_back(std::move(*graph));
  }
  std::vector<std::vector<std::vector<diagnose::CauseOperator>>> by_cause(asked_causes_.size());
  for (size_t i = 0; i < received.units.size(); ++i) {
    auto answers = diagnose::DecodeCauseOperators(received.payloads[i][1]);
    if (!answers.ok()) return OfUnit(answers.status(), received.units[i]);
    if (answers->size() != asked_causes_.size()) {
      return OfUnit(base::DataLoss("the operators of {} causes, {} asked for", answers->size(),
                                   asked_causes_.size()),
                    received.units[i]);
    }
    for (size_t c = 0; c < answers->size(); ++c) by_cause[c].push_back(std::move((*answers)[c]));
  }
  TELLER_ASSIGN_OR_RETURN(replay_graph_,
                          cause::ConcatReplayGraphs(graphs, steps_before_, nodes_before_));
  for (size_t c = 0; c < asked_causes_.size(); ++c) {
    cause_operators_.push_back({*asked_causes_[c], diagnose::MergeOperators(by_cause[c])});
  }
  replay_graph_.groups = replay_groups_;
  has_replay_graph_ = true;
  return base::OkStatus();
}

std::vector<std::string> PartsMerger::Answer(AnalysisPhase phase,
                                             const std::vector<std::string>& messages) {
  if (!gave_up()) {
    const size_t per_unit = PayloadsPerUnit(phase);
    base::StatusOr<Received> received = Receive(phase, messages, per_unit);
    base::StatusOr<std::vector<std::string>> answers = received.status();
    if (received.ok()) {
      switch (phase) {
        case AnalysisPhase::kCollectives:
          answers = AnswerCollectives(*received);
          break;
        case AnalysisPhase::kStepOrder:
          answers = AnswerStepOrder(*received);
          break;
        case AnalysisPhase::kSummaries:
          answers = AnswerSummaries(*received);
          break;
        case AnalysisPhase::kMeasurements: {
          const base::Status taken = TakeMeasurements(*received);
          answers = taken.ok() ? base::StatusOr<std::vector<std::string>>(AnswerReplayGroups())
                               : taken;
          break;
        }
        case AnalysisPhase::kReplay: {
          const base::Status taken = TakeReplayGraphs(*received);
          answers = taken.ok() ? base::StatusOr<std::vector<std::string>>(std::vector<std::string>{})
                               : taken;
          break;
        }
      }
    }
    if (answers.ok()) return *std::move(answers);
    GiveUp(answers.status().message());
  }
  if (!PhaseHasAnswer(phase)) return {};
  return std::vector<std::string>(processes_, GiveUpMessage(why_));
}

void PartsMerger::RecordRunCounters(model::Trace* trace) const {
  reconstruct::RecordCrossRankCounters(cross_rank_, trace);
  reconstruct::RecordStepOrderCounters(step_order_, trace);
}

void PartsMerger::GiveUp(std::string why) {
  if (why_.empty()) why_ = why.empty() ? "no reason given" : std::move(why);
  finished_ = false;
}

// ---- The map ------------------------------------------------------------------------

base::Status CheckRowsAreTheJoinedSteps(const cause::StepMeasurements& rows,
                                        const model::Trace& joined) {
  const model::StepTable& steps = joined.steps;
  if (rows.steps() != steps.size()) {
    return base::Internal("the parts have {} steps, the joined trace {}", rows.steps(),
                          steps.size());
  }
  if (rows.process_node.size() != joined.processes.size()) {
    return base::Internal("the parts have {} processes, the joined trace {}",
                          rows.process_node.size(), joined.processes.size());
  }
  for (size_t s = 0; s < rows.steps(); ++s) {
    if (rows.process[s] != steps.process[s].value() || rows.rank[s] != steps.rank[s] ||
        rows.number[s] != steps.number[s] || rows.start_ns[s] != steps.start_ns[s] ||
        rows.serving[s] != (steps.requests_count[s] > 0 ? 1 : 0)) {
      return base::Internal(
          "step {} differs: process {} rank {} number {} in the parts, process {} rank {} number "
          "{} in the joined trace",
          s, rows.process[s], rows.rank[s], rows.number[s], steps.process[s].value(),
          steps.rank[s], steps.number[s]);
    }
  }
  if (rows.has_step_requests != !joined.step_requests.empty()) {
    return base::Internal("the parts and the joined trace differ in having step requests");
  }
  if (rows.has_tokens_arg != joined.strings.Find("tokens").valid()) {
    return base::Internal(
        "the parts and the joined trace differ in having the \"tokens\" string (a log line "
        "or template of the joined trace holds it)");
  }
  return base::OkStatus();
}

namespace {

// Whether the merger's rows stand for the joined trace (MapFromParts).
base::Status CheckPartsAreTheJoinedTrace(const PartsMerger& merger, const model::Trace& joined,
                                         const std::vector<uint32_t>& joined_units) {
  if (merger.gave_up()) return base::Internal("the analysis in parts stopped: {}", merger.why());
  if (!merger.finished()) return base::Internal("the analysis in parts did not run");
  if (merger.units() != joined_units) {
    return base::Internal("the parts hold {} units, the joined trace {}", merger.units().size(),
                          joined_units.size());
  }
  return CheckRowsAreTheJoinedSteps(merger.rows(), joined);
}

}  // namespace

base::StatusOr<cause::DeviationMap> MapFromParts(const PartsMerger& merger,
                                                 const model::Trace& joined,
                                                 const std::vector<uint32_t>& joined_units,
                                                 const cause::DeviationOptions& options) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  return cause::FitDeviationMap(merger.rows(), options);
}

base::Status CheckFeatureRowsAreTheJoinedSteps(const localize::FeatureRows& rows,
                                               const model::Trace& joined) {
  const model::StepTable& steps = joined.steps;
  if (rows.steps() != steps.size() || rows.nodes != joined.nodes.size()) {
    return base::Internal(
        "the parts' findings rows have {} steps and {} nodes, the joined trace "
        "{} and {}",
        rows.steps(), rows.nodes, steps.size(), joined.nodes.size());
  }
  std::string name;
  for (size_t s = 0; s < rows.steps(); ++s) {
    const model::StepIndex step(static_cast<uint32_t>(s));
    name.clear();
    for (char c : joined.str(steps.name[s])) {
      if (c < '0' || c > '9') name.push_back(c);
    }
    if (rows.rank[s] != steps.rank[s] || rows.number[s] != steps.number[s] ||
        rows.global_step[s] != steps.global_step[s] || rows.phase[s] != steps.phase[s] ||
        rows.names[rows.name[s]] != name || rows.requests[s] != steps.requests_count[s] ||
        rows.start_ns[s] != steps.start_ns[s] ||
        rows.dur_ns[s] != steps.end_ns[s] - steps.start_ns[s] ||
        rows.first_node[s] != steps.node_begin[s].value() ||
        rows.batch_bucket[s] != localize::BatchBucket(joined, step)) {
      return base::Internal(
          "the parts' findings rows and the joined trace differ at step {} "
          "(rank {} number {} in the parts, rank {} number {} joined)",
          s, rows.rank[s], rows.number[s], steps.rank[s], steps.number[s]);
    }
  }
  if (rows.has_step_requests != !joined.step_requests.empty()) {
    return base::Internal("the parts and the joined trace differ in having step requests");
  }
  return base::OkStatus();
}

base::StatusOr<localize::FeatureRows> FeatureRowsFromParts(
    const PartsMerger& merger, const model::Trace& joined,
    const std::vector<uint32_t>& joined_units) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  TELLER_RETURN_IF_ERROR(CheckFeatureRowsAreTheJoinedSteps(merger.feature_rows(), joined));
  return merger.feature_rows();
}

base::StatusOr<reconstruct::RequestRows> RequestRowsFromParts(
    const PartsMerger& merger, const model::Trace& joined,
    const std::vector<uint32_t>& joined_units) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  TELLER_RETURN_IF_ERROR(reconstruct::CheckRequestRowsAreTheTrace(merger.request_rows(), joined));
  return merger.request_rows();
}

base::StatusOr<cause::CrashReport> CrashFromParts(const PartsMerger& merger,
                                                  const model::Trace& joined,
                                                  const std::vector<uint32_t>& joined_units) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  const std::string differs = cause::CrashDifference(merger.crash(), cause::FindCrash(joined));
  if (!differs.empty()) {
    return base::Internal("the parts' crash differs from the joined trace's: {}", differs);
  }
  return merger.crash();
}

namespace {

// The step of a line aligned on the merged rows: its number from the findings' rows, its
// requests' ids from the request rows (an index past them: no step).
cause::StepOfLine StepOfRows(const localize::FeatureRows& features,
                             const reconstruct::RequestRows& requests, model::StepIndex step) {
  cause::StepOfLine of;
  const size_t s = step.value();
  if (s >= features.steps() || s >= requests.steps()) return of;
  of.number = features.number[s];
  for (uint32_t i = requests.requests_begin[s]; i < requests.requests_begin[s + 1]; ++i) {
    of.requests.push_back(requests.id[requests.step_requests[i]]);
  }
  return of;
}

}  // namespace

base::StatusOr<cause::OomReport> OomFromParts(const PartsMerger& merger,
                                              const model::LogTable& aligned,
                                              const base::StringPool& strings,
                                              const model::Trace& joined,
                                              const std::vector<uint32_t>& joined_units,
                                              const cause::OomOptions& options) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  const cause::OomReport oom = cause::FindOom(
      aligned, strings,
      [&](model::StepIndex step) {
        return StepOfRows(merger.feature_rows(), merger.request_rows(), step);
      },
      merger.memory_trend(), options);
  const cause::OomReport joined_oom = cause::FindOom(joined, options);
  if (joined_oom.found != merger.oom_site().found) {
    return base::Internal("the parts' out-of-memory site {} a message, the joined trace {}",
                          merger.oom_site().found ? "found" : "did not find",
                          joined_oom.found ? "has one" : "has none");
  }
  const std::string differs = cause::OomDifference(oom, joined_oom);
  if (!differs.empty()) {
    return base::Internal("the parts' out-of-memory report differs from the joined trace's: {}",
                          differs);
  }
  return oom;
}

base::StatusOr<std::vector<cause::Hypothesis>> RequestCausesFromParts(
    const PartsMerger& merger, const model::LogTable& aligned, const base::StringPool& strings,
    const model::Trace& joined, const std::vector<uint32_t>& joined_units,
    const cause::CauseOptions& options) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  TELLER_ASSIGN_OR_RETURN(const cause::RequestCauseInput input,
                          cause::RequestCauseInputOfRows(merger.request_rows(),
                                                         merger.feature_rows(), aligned, strings));
  std::vector<cause::Hypothesis> causes = cause::FindRequestCauses(input, options);
  const std::string differs = cause::RequestCausesDifference(
      causes, cause::FindRequestCauses(cause::RequestCauseInputOfTrace(joined), options));
  if (!differs.empty()) {
    return base::Internal("the parts' request causes differ from the joined trace's: {}", differs);
  }
  return causes;
}

namespace {

// Whether the parts read the hang with the diagnosis's thresholds.
base::Status CheckPartsReadWith(const cause::HangQuery& query, const cause::HangOptions& options) {
  const cause::HangOptions read = cause::OptionsOfQuery(query);
  if (read.min_pending_launch_ns != options.min_pending_launch_ns ||
      read.min_stalled_ns != options.min_stalled_ns ||
      read.min_stalled_ratio != options.min_stalled_ratio ||
      read.min_steps_before != options.min_steps_before) {
    return base::Internal(
        "the parts read pending launches past {} ns and stalled steps past {} ns, {} times their "
        "thread's longest after {} steps; the diagnosis past {} ns, {} ns, {} times, {} steps",
        read.min_pending_launch_ns, read.min_stalled_ns, read.min_stalled_ratio,
        read.min_steps_before, options.min_pending_launch_ns, options.min_stalled_ns,
        options.min_stalled_ratio, options.min_steps_before);
  }
  return base::OkStatus();
}

}  // namespace

base::StatusOr<cause::HangReport> HangFromParts(const PartsMerger& merger,
                                                const model::Trace& joined,
                                                const std::vector<uint32_t>& joined_units,
                                                const cause::HangOptions& options) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  TELLER_ASSIGN_OR_RETURN(
      cause::HangReport hang,
      cause::FindHang(joined, merger.collectives(), merger.hang_query().probes,
                      merger.culprit_states(), merger.stalled_steps(), options));
  TELLER_RETURN_IF_ERROR(CheckPartsReadWith(merger.hang_query(), options));
  const std::string differs = cause::HangDifference(hang, cause::FindHang(joined, options));
  if (!differs.empty()) {
    return base::Internal("the parts' hang differs from the joined trace's: {}", differs);
  }
  return hang;
}

base::StatusOr<cause::ReplayGraph> ReplayGraphFromParts(const PartsMerger& merger,
                                                        const model::Trace& joined,
                                                        const std::vector<uint32_t>& joined_units,
                                                        const localize::StepFeatures& features) {
  TELLER_RETURN_IF_ERROR(CheckPartsAreTheJoinedTrace(merger, joined, joined_units));
  if (!merger.has_replay_graph()) return base::Internal("the replay graphs were not received");
  const cause::ReplayGraph own =
      cause::CutReplayGraph(joined, cause::NodeCells(joined, features),
                            cause::CollectiveMatchOfEvents(joined), merger.replay_groups());
  const std::string differs = cause::ReplayGraphDifference(merger.replay_graph(), own);
  if (!differs.empty()) {
    return base::Internal("the parts' replay graph differs from the joined trace's: {}", differs);
  }
  return merger.replay_graph();
}

base::StatusOr<model::LogTable> LogsAlignedOnParts(const PartsMerger& merger, model::LogTable logs,
                                                   const base::StringPool& strings,
                                                   int64_t log_window_ns) {
  if (merger.gave_up()) return base::Internal("the analysis in parts stopped: {}", merger.why());
  if (!merger.finished()) return base::Internal("the analysis in parts did not run");
  reconstruct::ShiftLogLines(merger.joined_share(), &logs);
  reconstruct::AlignLogsToRows(merger.request_rows(), strings, log_window_ns, &logs);
  return logs;
}

base::Status CheckLogsAreTheJoinedTrace(const model::LogTable& logs, const model::Trace& joined) {
  const model::LogTable& own = joined.logs;
  if (logs.size() != own.size()) {
    return base::Internal("{} log lines aligned on the parts, {} in the joined trace", logs.size(),
                          own.size());
  }
  for (size_t i = 0; i < logs.size(); ++i) {
    if (logs.ts_ns[i] != own.ts_ns[i] || logs.step[i] != own.step[i] ||
        logs.alignment[i] != own.alignment[i]) {
      return base::Internal(
          "log line {} aligned on the parts at {} ns to step {}, in the joined trace at {} ns to "
          "step {}",
          i, logs.ts_ns[i], logs.step[i].value(), own.ts_ns[i], own.step[i].value());
    }
  }
  return base::OkStatus();
}

base::Status CheckRunCountersAreTheJoinedTrace(const PartsMerger& merger,
                                               const model::Trace& joined) {
  if (merger.gave_up()) return base::Internal("the analysis in parts stopped: {}", merger.why());
  if (!merger.finished()) return base::Internal("the analysis in parts did not run");
  model::Trace report;
  merger.RecordRunCounters(&report);
  for (const model::StatDef* stat :
       {&model::stat::kReconstructCollectiveMatches, &model::stat::kReconstructCollectivesUnmatched,
        &model::stat::kReconstructCollectivesMatchedByOrder,
        &model::stat::kReconstructCollectiveOrderOpMismatch,
        &model::stat::kReconstructClockUnalignedHosts,
        &model::stat::kReconstructCollectivesMatchedByStepOrder,
        &model::stat::kReconstructCollectivesStepOrderSkipped}) {
    if (report.stats.Get(*stat) != joined.stats.Get(*stat)) {
      return base::Internal("{} is {} from the parts' plans, {} in the joined trace", stat->name,
                            report.stats.Get(*stat), joined.stats.Get(*stat));
    }
  }
  const std::vector<std::string>& notes = joined.meta.notes;
  for (const std::string& note : report.meta.notes) {
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) {
      return base::Internal("the joined trace lacks the plans' note \"{}\"", note);
    }
  }
  return base::OkStatus();
}

}  // namespace teller::fleet
