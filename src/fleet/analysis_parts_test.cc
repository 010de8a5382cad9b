// The analysis in parts (analysis_parts.h) run in memory: a simulated run's units imported
// apart and dealt to P processes as AssignUnits deals them, every message and answer
// encoded and decoded, and the map the first process fits from them equal to the joined
// trace's map (the one a single `teller diagnose` builds), cell for cell and step for step.
#include "fleet/analysis_parts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "base/byte_io_testing.h"
#include "base/file_util.h"
#include "base/testing.h"
#include "cause/oom_report.h"
#include "cause/replay_graph_wire.h"
#include "cause/request_causes.h"
#include "cause/step_measurements_testing.h"
#include "cause/step_measurements_wire.h"
#include "cause/step_replay.h"
#include "diagnose/diagnosis.h"
#include "diagnose/diagnosis_json.h"
#include "fleet/unit_assignment.h"
#include "import/import_inputs.h"
#include "import/importer.h"
#include "localize/feature_rows_wire.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/request_rows_wire.h"
#include "sim/simulated_trace_testing.h"
#include "store/trace_snapshot.h"

namespace teller::fleet {
namespace {

// A run as the fleet sees it: the plan, each unit imported apart (by unit; empty when it
// is left out), and the joined trace of the units not left out, with its logs, reconstructed.
struct FleetRun {
  import::ImportPlan plan;
  std::vector<model::Trace> units;
  std::vector<uint32_t> joined_units;
  model::Trace joined;
  model::LogTable imported_logs;  // the joined trace's before its reconstruction
};

FleetRun ImportRun(const std::vector<std::string>& inputs, const std::set<size_t>& left_out = {}) {
  FleetRun run;
  auto plan = import::PlanImport(inputs);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  if (!plan.ok()) return run;
  run.plan = *plan;
  import::UnitImporter apart(run.plan);
  run.units.resize(run.plan.units.size());
  for (size_t unit = 0; unit < run.plan.units.size(); ++unit) {
    if (left_out.count(unit) > 0) continue;
    EXPECT_TRUE(apart.Import(unit, {}, &run.units[unit]).ok());
    run.joined_units.push_back(static_cast<uint32_t>(unit));
  }
  import::UnitImporter here(run.plan);
  auto take = [&](size_t unit) -> base::StatusOr<model::Trace> {
    if (left_out.count(unit) > 0) return base::NotFound("left out by the test");
    model::Trace part;
    TELLER_RETURN_IF_ERROR(here.Import(unit, {}, &part));
    return part;
  };
  std::vector<import::SkippedUnit> skipped;
  EXPECT_TRUE(import::ImportPlanned(run.plan, {}, take, &run.joined, &skipped).ok());
  import::ParseLogsOfTrace({}, &run.joined);
  run.imported_logs = run.joined.logs;
  EXPECT_TRUE(reconstruct::BuildCallChains(&run.joined).ok());
  return run;
}

// A copy of a trace (traces do not copy): its snapshot read back.
model::Trace CopyOf(const model::Trace& trace) {
  auto copy = store::ParseTraceSnapshot(store::SerializeTraceSnapshot(trace), "copy");
  EXPECT_TRUE(copy.ok()) << copy.status().message();
  return copy.ok() ? std::move(*copy) : model::Trace{};
}

// A simulated run written once per engine and fault.
std::string SimulatedRun(sim::EngineKind engine, const std::string& faults,
                         const std::string& name) {
  sim::SimConfig config = sim::SmallConfig(engine, 4, 6);
  config.faults = sim::ParseFaults(faults).value();
  const std::string path = base::TempDir(name) + "/run.teller";
  EXPECT_TRUE(sim::RunSimulation(config, path).ok());
  return path;
}

const FleetRun& ThrottledVllmRun() {
  static const FleetRun run = ImportRun(
      {SimulatedRun(sim::EngineKind::kVllmV1Online, "gpu_throttle:rank=2", "analysis_parts_vllm")});
  return run;
}

// The throttled vLLM run and an SGLang one, by engine name.
std::vector<std::pair<const char*, const FleetRun*>> ThrottledRuns() {
  static const FleetRun sglang = ImportRun({SimulatedRun(
      sim::EngineKind::kSglang, "gpu_throttle:rank=1", "analysis_parts_throttled_sglang")});
  return {{"vllm", &ThrottledVllmRun()}, {"sglang", &sglang}};
}

// What crossed between the processes: every message and answer of a process other than
// the first.
struct Crossed {
  int64_t bytes = 0;
  int64_t message_bytes[5] = {}, answer_bytes[5] = {};  // by phase
  int64_t give_ups = 0;  // answers that said the first process gave up
};

// The five phases in memory over P processes (up to `last`); `damage` may change a
// message before the first process reads it.
using Damage = std::function<void(AnalysisPhase, size_t process, std::string*)>;

void RunPhases(const FleetRun& run, int processes, PartsMerger* merger, Crossed* crossed,
               const Damage& damage = nullptr, AnalysisPhase last = AnalysisPhase::kReplay) {
  std::vector<std::vector<bool>> readable(static_cast<size_t>(processes),
                                          std::vector<bool>(run.plan.units.size(), false));
  for (uint32_t unit : run.joined_units) {
    for (auto& process : readable) process[unit] = true;
  }
  const std::vector<int32_t> owner_of = AssignUnits(readable, run.plan.units.size());
  std::vector<PartsOwner> owners;
  for (int p = 0; p < processes; ++p) {
    std::vector<uint32_t> units;
    std::vector<model::Trace> parts;
    for (uint32_t unit : run.joined_units) {
      if (owner_of[unit] != p) continue;
      units.push_back(unit);
      parts.push_back(CopyOf(run.units[unit]));
    }
    owners.emplace_back(std::move(units), std::move(parts));
  }
  std::vector<std::string> answers(static_cast<size_t>(processes));
  for (AnalysisPhase phase : kAnalysisPhases) {
    std::vector<std::string> messages;
    for (size_t p = 0; p < owners.size(); ++p) {
      messages.push_back(owners[p].Message(phase, answers[p]));
      if (damage) damage(phase, p, &messages.back());
      if (p > 0) {
        crossed->bytes += static_cast<int64_t>(messages.back().size());
        crossed->message_bytes[static_cast<int>(phase) - 1] +=
            static_cast<int64_t>(messages.back().size());
      }
    }
    answers = merger->Answer(phase, messages);
    if (phase == last) break;
    if (!PhaseHasAnswer(phase)) {
      EXPECT_TRUE(answers.empty());
      break;
    }
    EXPECT_EQ(answers.size(), owners.size());
    for (size_t p = 1; p < answers.size(); ++p) {
      crossed->bytes += static_cast<int64_t>(answers[p].size());
      crossed->answer_bytes[static_cast<int>(phase) - 1] += static_cast<int64_t>(answers[p].size());
    }
    if (GiveUpReason(answers[0]).has_value()) {
      crossed->give_ups += static_cast<int64_t>(answers.size());
      break;
    }
  }
}

// What a throttled run gives when the parts analyse it (ForThrottledRunsInParts).
struct PartsRun {
  const char* name;  // the engine
  const FleetRun& run;
  const localize::StepFeatures& features;  // of the joined trace
  int processes;
  const PartsMerger& merger;  // after every phase
  const Crossed& crossed;
};

// Each throttled run (ThrottledRuns) through every phase on 1, 2 and 4 processes.
void ForThrottledRunsInParts(const std::function<void(const PartsRun&)>& check) {
  for (const auto& [name, run] : ThrottledRuns()) {
    const localize::StepFeatures features = localize::ComputeStepFeatures(run->joined);
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      ASSERT_FALSE(merger.gave_up()) << merger.why();
      check({name, *run, features, processes, merger, crossed});
    }
  }
}

// The fitted map's steps index the joined trace's, as the joined map's do.
void ExpectSameSteps(const cause::DeviationMap& fitted, const cause::DeviationMap& joined) {
  ASSERT_EQ(fitted.steps.size(), joined.steps.size());
  for (size_t i = 0; i < fitted.steps.size(); ++i) {
    EXPECT_EQ(fitted.steps[i].step, joined.steps[i].step) << "map step " << i;
    EXPECT_EQ(fitted.steps[i].node, joined.steps[i].node) << "map step " << i;
  }
  EXPECT_EQ(fitted.node_names, joined.node_names);
}

int64_t RankSteps(const FleetRun& run) { return static_cast<int64_t>(run.joined.steps.size()); }

TEST(AnalysisParts, MapFittedFromTheMessagesEqualsTheJoinedMap) {
  const FleetRun& run = ThrottledVllmRun();
  ASSERT_GE(run.plan.units.size(), 4u);
  ASSERT_GT(RankSteps(run), 0);
  const cause::DeviationMap joined_map = cause::BuildDeviationMap(run.joined);
  ASSERT_GT(joined_map.cells.size(), 0u);
  for (int processes : {1, 2, 4}) {
    SCOPED_TRACE(::testing::Message() << processes << " processes");
    PartsMerger merger(static_cast<size_t>(processes));
    Crossed crossed;
    RunPhases(run, processes, &merger, &crossed);
    ASSERT_FALSE(merger.gave_up()) << merger.why();
    base::StatusOr<cause::DeviationMap> fitted =
        MapFromParts(merger, run.joined, run.joined_units, {});
    ASSERT_TRUE(fitted.ok()) << fitted.status().message();
    cause::ExpectSameMap(*fitted, joined_map);
    ExpectSameSteps(*fitted, joined_map);
    if (processes == 4) {
      // Per rank-step of the units that cross (all but the first process's).
      int64_t crossing_steps = 0;
      const std::vector<int32_t> owner_of =
          AssignUnits(std::vector<std::vector<bool>>(4, std::vector<bool>(run.units.size(), true)),
                      run.units.size());
      size_t crossing_snapshots = 0;
      for (size_t unit = 0; unit < run.units.size(); ++unit) {
        if (owner_of[unit] == 0) continue;
        for (size_t s = 0; s < run.joined.steps.size(); ++s) {
          crossing_steps += run.joined.steps.rank[s] == run.plan.units[unit].rank;
        }
        crossing_snapshots += store::SerializeTraceSnapshot(run.units[unit]).size();
      }
      const double steps = static_cast<double>(crossing_steps);
      std::printf("analysis in parts, 4 processes: %zu units, %lld rank-steps, %zu cells; per "
                  "rank-step that crossed: %.0f bytes of summaries (phase 1 %.0f + %.0f answered, "
                  "2 %.0f + %.0f, 3 %.0f + %.0f, 4 %.0f + %.0f, 5 %.0f), %.0f bytes of unit "
                  "snapshots\n",
                  run.plan.units.size(), static_cast<long long>(RankSteps(run)),
                  joined_map.cells.size(), static_cast<double>(crossed.bytes) / steps,
                  crossed.message_bytes[0] / steps, crossed.answer_bytes[0] / steps,
                  crossed.message_bytes[1] / steps, crossed.answer_bytes[1] / steps,
                  crossed.message_bytes[2] / steps, crossed.answer_bytes[2] / steps,
                  crossed.message_bytes[3] / steps, crossed.answer_bytes[3] / steps,
                  crossed.message_bytes[4] / steps, static_cast<double>(crossing_snapshots) / steps);
    }
  }
}

// A finding from the parts equals the joined trace's, field for field but its slice (cut
// from the joined trace after the scoring).
void ExpectSameFinding(const diagnose::Finding& a, const diagnose::Finding& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.step_number, b.step_number);
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.feature, b.feature);
  EXPECT_EQ(a.score, b.score);
  EXPECT_EQ(a.flag_score, b.flag_score);
  EXPECT_EQ(a.probability, b.probability);
  EXPECT_EQ(a.peak_z, b.peak_z);
  EXPECT_EQ(a.forest_score, b.forest_score);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.median, b.median);
  EXPECT_EQ(a.baseline_samples, b.baseline_samples);
  EXPECT_EQ(a.against_peers, b.against_peers);
  EXPECT_EQ(a.rank_wide, b.rank_wide);
  EXPECT_EQ(a.rank_excess, b.rank_excess);
  EXPECT_EQ(a.persistent, b.persistent);
  EXPECT_EQ(a.also_steps, b.also_steps);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.suspects, b.suspects);
}

// What ScoreFindings gives from the parts' rows alone (no trace) against the joined
// trace's diagnosis: findings, abnormal steps (sorted as the diagnosis sorts them), scored
// steps and baseline keys.
void ExpectFindingsOfTheJoinedTrace(const localize::FeatureRows& rows, const model::Trace& joined) {
  const diagnose::DiagnoseOptions options;
  diagnose::Diagnosis from_parts;
  diagnose::ScoreFindings(rows, options, &from_parts);
  auto alone = diagnose::Diagnose(joined, options);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  // The diagnosis keeps the findings of its candidates too, those of its cause first: the
  // best by score are ScoreFindings'.
  std::vector<diagnose::Finding> best = alone->findings;
  std::sort(best.begin(), best.end(), diagnose::FindingBefore);
  ASSERT_EQ(from_parts.findings.size(), std::min(best.size(), options.max_findings));
  for (size_t i = 0; i < from_parts.findings.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "finding " << i);
    ExpectSameFinding(from_parts.findings[i], best[i]);
  }
  std::sort(from_parts.steps.begin(), from_parts.steps.end(),
            [](const diagnose::AbnormalStep& a, const diagnose::AbnormalStep& b) {
              return a.score != b.score ? a.score > b.score : a.step < b.step;
            });
  std::vector<diagnose::AbnormalStep> steps = alone->steps;
  std::sort(steps.begin(), steps.end(),
            [](const diagnose::AbnormalStep& a, const diagnose::AbnormalStep& b) {
              return a.score != b.score ? a.score > b.score : a.step < b.step;
            });
  ASSERT_EQ(from_parts.steps.size(), steps.size());
  for (size_t i = 0; i < from_parts.steps.size(); ++i) {
    EXPECT_EQ(from_parts.steps[i].step, steps[i].step);
    EXPECT_EQ(from_parts.steps[i].rank, steps[i].rank);
    EXPECT_EQ(from_parts.steps[i].number, steps[i].number);
    EXPECT_EQ(from_parts.steps[i].group, steps[i].group);
    EXPECT_EQ(from_parts.steps[i].score, steps[i].score);
    EXPECT_EQ(from_parts.steps[i].family, steps[i].family);
  }
  EXPECT_EQ(from_parts.steps_scored, alone->steps_scored);
  EXPECT_EQ(from_parts.baseline_keys, alone->baseline_keys);
  // And the whole diagnosis given the rows is the one that makes its own.
  diagnose::DiagnoseOptions given_rows;
  given_rows.feature_rows = &rows;
  auto given = diagnose::Diagnose(joined, given_rows);
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(diagnose::DiagnosisToJson(joined, *given), diagnose::DiagnosisToJson(joined, *alone));
}

// vLLM with a throttled GPU, SGLang and FSDP dealt into 1, 2 and 4 processes: the findings
// scored from the rows the processes sent are the joined trace's.
TEST(AnalysisParts, FindingsFromThePartsRowsEqualTheJoinedTracesFindings) {
  const FleetRun sglang = ImportRun({SimulatedRun(sim::EngineKind::kSglang, "gpu_throttle:rank=1",
                                                  "analysis_parts_findings_sglang")});
  const FleetRun fsdp =
      ImportRun({SimulatedRun(sim::EngineKind::kTorchFsdp, "", "analysis_parts_findings_fsdp")});
  const std::pair<const char*, const FleetRun*> runs[] = {
      {"vllm", &ThrottledVllmRun()}, {"sglang", &sglang}, {"fsdp", &fsdp}};
  for (const auto& [name, run] : runs) {
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      base::StatusOr<localize::FeatureRows> rows =
          FeatureRowsFromParts(merger, run->joined, run->joined_units);
      ASSERT_TRUE(rows.ok()) << rows.status().message();
      ExpectFindingsOfTheJoinedTrace(*rows, run->joined);
      if (processes != 4) continue;
      // Bytes per rank-step of every part's rows appended (the parts' own buffers differ by
      // a header and column counts each).
      const double steps = static_cast<double>(RankSteps(*run));
      const localize::FeatureRows& all = merger.feature_rows();
      std::printf(
          "findings' rows of %s: %lld rank-steps, %.1f feature rows and %.1f + %.1f "
          "examples per rank-step; %.0f bytes per rank-step (measurement rows %.0f, request "
          "rows %.0f)\n",
          name, static_cast<long long>(RankSteps(*run)),
          static_cast<double>(all.features.size()) / steps,
          static_cast<double>(all.longest.size()) / steps,
          static_cast<double>(all.delayed.size()) / steps,
          static_cast<double>(localize::EncodeFeatureRows(all).size()) / steps,
          static_cast<double>(cause::EncodeStepMeasurements(merger.rows()).size()) / steps,
          static_cast<double>(reconstruct::EncodeRequestRows(merger.request_rows()).size()) /
              steps);
    }
  }
  EXPECT_FALSE(diagnose::Diagnose(ThrottledVllmRun().joined).value().findings.empty());
}

// Other engines: a training job (FSDP) and SGLang, each in 3 processes.
TEST(AnalysisParts, MapFittedFromTheMessagesEqualsTheJoinedMapOfOtherEngines) {
  for (sim::EngineKind engine : {sim::EngineKind::kTorchFsdp, sim::EngineKind::kSglang}) {
    SCOPED_TRACE(::testing::Message() << "engine " << static_cast<int>(engine));
    const FleetRun run = ImportRun({SimulatedRun(engine, "", "analysis_parts_engine")});
    PartsMerger merger(3);
    Crossed crossed;
    RunPhases(run, 3, &merger, &crossed);
    base::StatusOr<cause::DeviationMap> fitted =
        MapFromParts(merger, run.joined, run.joined_units, {});
    ASSERT_TRUE(fitted.ok()) << fitted.status().message();
    const cause::DeviationMap joined_map = cause::BuildDeviationMap(run.joined);
    cause::ExpectSameMap(*fitted, joined_map);
    ExpectSameSteps(*fitted, joined_map);
  }
}

void ExpectSameRequestRows(const reconstruct::RequestRows& a, const reconstruct::RequestRows& b) {
  EXPECT_EQ(a.process, b.process);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.requests_begin, b.requests_begin);
  EXPECT_EQ(a.step_requests, b.step_requests);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.first_ns, b.first_ns);
  EXPECT_EQ(a.last_ns, b.last_ns);
  EXPECT_EQ(a.step_count, b.step_count);
  EXPECT_EQ(a.processes, b.processes);
}

// vLLM with a throttled GPU, SGLang and FSDP dealt into 1, 2 and 4 processes: every part's
// request rows merged by id are the joined trace's requests, the log lines as imported
// align on them as on the joined trace, and the run's counters and notes from the plans
// are the joined trace's.
TEST(AnalysisParts, RequestsLogsAndCountersFromThePartsAreTheJoinedTraces) {
  const FleetRun sglang =
      ImportRun({SimulatedRun(sim::EngineKind::kSglang, "", "analysis_parts_requests_sglang")});
  const FleetRun fsdp =
      ImportRun({SimulatedRun(sim::EngineKind::kTorchFsdp, "", "analysis_parts_requests_fsdp")});
  const std::pair<const char*, const FleetRun*> runs[] = {
      {"vllm", &ThrottledVllmRun()}, {"sglang", &sglang}, {"fsdp", &fsdp}};
  size_t requests = 0, log_lines = 0;
  for (const auto& [name, run] : runs) {
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      auto rows = RequestRowsFromParts(merger, run->joined, run->joined_units);
      ASSERT_TRUE(rows.ok()) << rows.status().message();
      ExpectSameRequestRows(*rows, reconstruct::RequestRowsOfPart(run->joined));
      auto logs = LogsAlignedOnParts(merger, run->imported_logs, run->joined.strings,
                                     reconstruct::BuildOptions{}.log_window_ns);
      ASSERT_TRUE(logs.ok()) << logs.status().message();
      const base::Status aligned = CheckLogsAreTheJoinedTrace(*logs, run->joined);
      EXPECT_TRUE(aligned.ok()) << aligned.message();
      const base::Status counted = CheckRunCountersAreTheJoinedTrace(merger, run->joined);
      EXPECT_TRUE(counted.ok()) << counted.message();
      requests += rows->requests();
      log_lines += logs->size();
    }
  }
  EXPECT_GT(requests, 0u);
  EXPECT_GT(log_lines, 0u);
}

// The diagnosis given the map fitted from the parts and their request rows is the one
// that builds its own.
TEST(AnalysisParts, DiagnosisWithTheMapFromThePartsIsTheSame) {
  const FleetRun& run = ThrottledVllmRun();
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed);
  diagnose::DiagnoseOptions options;
  base::StatusOr<cause::DeviationMap> fitted =
      MapFromParts(merger, run.joined, run.joined_units, options.deviation);
  ASSERT_TRUE(fitted.ok()) << fitted.status().message();
  auto requests = RequestRowsFromParts(merger, run.joined, run.joined_units);
  ASSERT_TRUE(requests.ok()) << requests.status().message();
  auto alone = diagnose::Diagnose(run.joined, options);
  options.deviation_map = &*fitted;
  options.request_rows = &*requests;
  // The causes the fourth phase fitted to ask for the replay's groups, with the diagnosis's
  // options; none with others.
  options.cause_analysis = merger.FittedCauses(options.deviation, options.causes);
  ASSERT_NE(options.cause_analysis, nullptr);
  cause::CauseOptions other = options.causes;
  other.min_score += 1.0;
  EXPECT_EQ(merger.FittedCauses(options.deviation, other), nullptr);
  auto given = diagnose::Diagnose(run.joined, options);
  ASSERT_TRUE(alone.ok() && given.ok());
  EXPECT_FALSE(alone->candidates.empty());
  EXPECT_FALSE(alone->requests.empty()) << "the throttled run has abnormal requests";
  EXPECT_EQ(diagnose::DiagnosisToJson(run.joined, *given),
            diagnose::DiagnosisToJson(run.joined, *alone));
}

// A unit left out of the join (no process could read it) is left out of the parts too:
// the map still equals the joined one. A unit the join has but the parts lack does not.
TEST(AnalysisParts, AUnitLeftOutOfBothStillGivesTheJoinedMap) {
  const std::string path = SimulatedRun(sim::EngineKind::kVllmV1Online, "gpu_throttle:rank=2",
                                        "analysis_parts_vllm_left_out");
  const FleetRun run = ImportRun({path}, {1});
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed);
  base::StatusOr<cause::DeviationMap> fitted =
      MapFromParts(merger, run.joined, run.joined_units, {});
  ASSERT_TRUE(fitted.ok()) << fitted.status().message();
  const cause::DeviationMap joined_map = cause::BuildDeviationMap(run.joined);
  cause::ExpectSameMap(*fitted, joined_map);
  ExpectSameSteps(*fitted, joined_map);

  std::vector<uint32_t> more = run.joined_units;
  more.insert(more.begin() + 1, 1);
  const base::Status refused = MapFromParts(merger, run.joined, more, {}).status();
  EXPECT_NE(refused.message().find("units"), std::string::npos) << refused.ToString();
}

// A bundle whose processes carry no rank, alone and after a ranked run: the first process
// numbers them in the first phase as the join numbers them, so the map, the findings' rows,
// the request rows and the counters from the parts are the joined trace's, and so is the
// diagnosis given them. A merger not told the units' bundles leaves them unranked, and its
// rows are refused.
TEST(AnalysisParts, UnrankedProcessesAreNumberedAsTheJoinNumbersThem) {
  const std::string unranked = base::SourceDir() + "/tests/fixtures/bundle/two_unranked";
  const FleetRun alone = ImportRun({unranked});
  const FleetRun after =
      ImportRun({SimulatedRun(sim::EngineKind::kVllmV1Online, "", "analysis_parts_before_unranked"),
                 unranked});
  for (const FleetRun* run : {&alone, &after}) {
    ASSERT_GT(run->joined.steps.size(), 0u);
    ASSERT_TRUE(std::any_of(
        run->joined.meta.notes.begin(), run->joined.meta.notes.end(),
        [](const std::string& note) { return note.find("ranks assigned") != std::string::npos; }));
    for (int processes : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << run->plan.files.size() << " inputs, " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes), UnitBundles(run->plan));
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      diagnose::DiagnoseOptions options;
      auto fitted = MapFromParts(merger, run->joined, run->joined_units, options.deviation);
      ASSERT_TRUE(fitted.ok()) << fitted.status().message();
      const cause::DeviationMap joined_map = cause::BuildDeviationMap(run->joined);
      cause::ExpectSameMap(*fitted, joined_map);
      ExpectSameSteps(*fitted, joined_map);
      auto rows = FeatureRowsFromParts(merger, run->joined, run->joined_units);
      ASSERT_TRUE(rows.ok()) << rows.status().message();
      ExpectFindingsOfTheJoinedTrace(*rows, run->joined);
      auto requests = RequestRowsFromParts(merger, run->joined, run->joined_units);
      ASSERT_TRUE(requests.ok()) << requests.status().message();
      ExpectSameRequestRows(*requests, reconstruct::RequestRowsOfPart(run->joined));
      const base::Status counted = CheckRunCountersAreTheJoinedTrace(merger, run->joined);
      EXPECT_TRUE(counted.ok()) << counted.message();
      auto own = diagnose::Diagnose(run->joined, options);
      options.deviation_map = &*fitted;
      options.feature_rows = &*rows;
      options.request_rows = &*requests;
      auto given = diagnose::Diagnose(run->joined, options);
      ASSERT_TRUE(own.ok() && given.ok());
      EXPECT_EQ(diagnose::DiagnosisToJson(run->joined, *given),
                diagnose::DiagnosisToJson(run->joined, *own));
    }
  }
  PartsMerger blind(2);
  Crossed crossed;
  RunPhases(alone, 2, &blind, &crossed);
  ASSERT_TRUE(blind.finished()) << blind.why();
  const base::Status refused = MapFromParts(blind, alone.joined, alone.joined_units, {}).status();
  EXPECT_NE(refused.message().find("rank"), std::string::npos) << refused.ToString();
  EXPECT_FALSE(FeatureRowsFromParts(blind, alone.joined, alone.joined_units).ok());
  EXPECT_FALSE(RequestRowsFromParts(blind, alone.joined, alone.joined_units).ok());
}

// A diagnosis given what the parts found (`give` sets it in the options) is the one that
// finds it in the joined trace itself.
template <typename Give>
void ExpectTheDiagnosisGivenIsItsOwn(const model::Trace& joined, Give give) {
  diagnose::DiagnoseOptions options;
  auto own = diagnose::Diagnose(joined, options);
  give(&options);
  auto given = diagnose::Diagnose(joined, options);
  ASSERT_TRUE(own.ok() && given.ok());
  EXPECT_EQ(diagnose::DiagnosisToJson(joined, *given), diagnose::DiagnosisToJson(joined, *own));
}

// A damage that sets the byte `offset` bytes after each `magic` in the messages of `phase`
// (of process 1 only unless `every_process`), where `when` holds of it (else it must find
// the magic).
Damage SetByteAfter(AnalysisPhase phase, std::string_view magic, size_t offset, char value,
                    bool every_process = false,
                    std::function<bool(const std::string&, size_t at)> when = nullptr) {
  return [=](AnalysisPhase at_phase, size_t process, std::string* m) {
    if (at_phase != phase || (process != 1 && !every_process)) return;
    size_t found = 0;
    for (size_t at = m->find(magic); at != std::string::npos; at = m->find(magic, at + 1)) {
      if (when && !when(*m, at)) continue;
      (*m)[at + offset] = value;
      ++found;
    }
    if (!when) {
      EXPECT_GT(found, 0u) << magic;
    }
  };
}

void ExpectRefusedSaying(const base::Status& status, std::string_view what) {
  EXPECT_NE(status.message().find(what), std::string::npos) << status.ToString();
}

// An illegal memory access on rank 1 of vLLM and SGLang dealt into 1, 2 and 4 processes:
// the crash merged from the parts' scans is the one cause::FindCrash finds on the joined
// trace, and the diagnosis given it is the one that scans its own. A run without one has
// none from the parts either.
TEST(AnalysisParts, TheCrashFromThePartsIsTheJoinedTraces) {
  const FleetRun vllm =
      ImportRun({SimulatedRun(sim::EngineKind::kVllmV1Online, "illegal_memory_access:rank=1",
                              "analysis_parts_crash_vllm")});
  const FleetRun sglang = ImportRun({SimulatedRun(
      sim::EngineKind::kSglang, "illegal_memory_access:rank=1", "analysis_parts_crash_sglang")});
  const std::pair<const char*, const FleetRun*> runs[] = {
      {"vllm", &vllm}, {"sglang", &sglang}, {"healthy", &ThrottledVllmRun()}};
  for (const auto& [name, run] : runs) {
    const cause::CrashReport joined_crash = cause::FindCrash(run->joined);
    EXPECT_EQ(joined_crash.found, std::string(name) != "healthy") << name;
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      auto crash = CrashFromParts(merger, run->joined, run->joined_units);
      ASSERT_TRUE(crash.ok()) << crash.status().message();
      EXPECT_EQ(cause::CrashDifference(*crash, joined_crash), "");
      ExpectTheDiagnosisGivenIsItsOwn(
          run->joined, [&](diagnose::DiagnoseOptions* given) { given->crash = &*crash; });
    }
  }
  // A damaged crash scan gives the analysis up, and the crash is refused with the offset.
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(vllm, 2, &merger, &crossed,
            SetByteAfter(AnalysisPhase::kMeasurements, "TLCK", 8, 7));  // the found flag
  ExpectRefusedSaying(CrashFromParts(merger, vllm.joined, vllm.joined_units).status(),
                      "crash report: offset 9");
}

// Four per-rank Kineto files written during a hang: on each rank 40 steps of 5 ms with an
// all_reduce each, then a step still open 3 s later, ranks 0, 2 and 3 inside an all_reduce,
// rank 1 in time.sleep with a launch whose kernel never came.
FleetRun StalledRanksRun() {
  const std::string dir = base::TempDir("analysis_parts_stalled");
  std::vector<std::string> inputs;
  for (int rank = 0; rank < 4; ++rank) {
    std::string events;
    auto event = [&](std::string_view ph, std::string_view cat, std::string_view name,
                     int64_t ts_us, std::string_view rest) {
      events += fmt::format(
          R"({{"ph":"{}","cat":"{}","name":"{}","pid":{},"tid":101,"ts":{}{}}},)", ph, cat, name,
          100 + rank, ts_us, rest);
    };
    int64_t at_us = 1000;
    for (int step = 0; step < 40; ++step, at_us += 6000) {
      event("X", "user_annotation", fmt::format("ProfilerStep#{}", step), at_us, R"(,"dur":5000)");
      event("X", "user_annotation", "nccl:all_reduce", at_us + 1000, R"(,"dur":3000)");
    }
    event("B", "user_annotation", "ProfilerStep#40", at_us, "");
    event("B", "user_annotation", rank == 1 ? "time.sleep" : "nccl:all_reduce", at_us + 1000, "");
    if (rank == 1) {
      event("X", "cuda_runtime", "cudaLaunchKernel", at_us + 1500,
            R"(,"dur":5,"args":{"correlation":999})");
    }
    event("i", "user_annotation", "written", at_us + 3'000'000, R"(,"s":"t")");
    events.pop_back();  // the last comma
    inputs.push_back(fmt::format("{}/trace_rank{}.json", dir, rank));
    EXPECT_TRUE(base::WriteFileAtomic(
                    inputs.back(),
                    fmt::format(R"({{"schemaVersion":1,"distributedInfo":{{"backend":"nccl",)"
                                R"("rank":{},"world_size":4}},"traceEvents":[{}]}})",
                                rank, events))
                    .ok());
  }
  return ImportRun(inputs);
}

// The hang from the parts of `run` over 2 processes, each message of process 1 changed by
// `damage` first.
base::Status HangOfDamagedParts(const FleetRun& run, const Damage& damage) {
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed, damage);
  return HangFromParts(merger, run.joined, run.joined_units, {}).status();
}

// A collective timeout on rank 1 of vLLM and SGLang and a stalled step on every rank of four
// Kineto files, dealt into 1, 2 and 4 processes: the hang found from the parts' collectives,
// its culprits' states read on their owners, or the stalled steps read on their owners, is
// the one cause::FindHang finds on the joined trace, field for field, and the diagnosis given
// it is the one that scans its own. A run without one has none from the parts either, and
// no culprits or stalled steps are sent.
TEST(AnalysisParts, TheHangFromThePartsIsTheJoinedTraces) {
  const FleetRun vllm = ImportRun({SimulatedRun(
      sim::EngineKind::kVllmV1Online, "nccl_timeout:rank=1", "analysis_parts_hang_vllm")});
  const FleetRun sglang = ImportRun(
      {SimulatedRun(sim::EngineKind::kSglang, "nccl_timeout:rank=1", "analysis_parts_hang_sglang")});
  const FleetRun stalled = StalledRanksRun();
  const std::tuple<const char*, const FleetRun*, cause::HangEvidence> runs[] = {
      {"vllm", &vllm, cause::HangEvidence::kTrace},
      {"sglang", &sglang, cause::HangEvidence::kTrace},
      {"stalled", &stalled, cause::HangEvidence::kStalledStep},
      {"healthy", &ThrottledVllmRun(), cause::HangEvidence::kNone}};
  for (const auto& [name, run, evidence] : runs) {
    const cause::HangReport joined_hang = cause::FindHang(run->joined);
    EXPECT_EQ(joined_hang.evidence, evidence) << name;
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      auto hang = HangFromParts(merger, run->joined, run->joined_units, {});
      ASSERT_TRUE(hang.ok()) << hang.status().message();
      EXPECT_EQ(cause::HangDifference(*hang, joined_hang), "");
      // The states are the parts': one per part, each with a state per culprit sent; so are
      // the stalled steps, a part's own in its list.
      EXPECT_EQ(merger.hang_query().probes, cause::CulpritProbes(joined_hang));
      EXPECT_EQ(merger.culprit_states().size(), run->joined_units.size());
      ASSERT_EQ(merger.stalled_steps().size(), run->joined_units.size());
      size_t stalled_sent = 0;
      for (const auto& part : merger.stalled_steps()) stalled_sent += part.size();
      EXPECT_EQ(stalled_sent, evidence == cause::HangEvidence::kStalledStep ? 4u : 0u);
      EXPECT_EQ(hang->states.size(), joined_hang.culprits.size());
      if (evidence == cause::HangEvidence::kTrace) {
        ASSERT_FALSE(hang->states.empty());
        EXPECT_FALSE(hang->states[0].last_kernel.empty());
      }
      ExpectTheDiagnosisGivenIsItsOwn(
          run->joined, [&](diagnose::DiagnoseOptions* given) { given->hang_report = &*hang; });
    }
  }
  // The stalled run's culprit is the rank outside the collective, with its pending launch.
  const cause::HangReport stalled_hang = cause::FindHang(stalled.joined);
  EXPECT_EQ(stalled_hang.culprits, std::vector<int32_t>{1});
  EXPECT_EQ(stalled_hang.victims, (std::vector<int32_t>{0, 2, 3}));
  ASSERT_EQ(stalled_hang.stalled.size(), 4u);
  EXPECT_EQ(stalled_hang.stalled[1].pending.count, 1u);
  // The owners read the stalled steps with the diagnosis's thresholds (a step open 3 s is
  // not stalled past 10 s), and parts read with others are refused.
  cause::HangOptions strict;
  strict.min_stalled_ns = 10'000'000'000;
  PartsMerger strict_merger(2);
  strict_merger.SetHangOptions(strict);
  Crossed crossed;
  RunPhases(stalled, 2, &strict_merger, &crossed);
  auto strict_hang = HangFromParts(strict_merger, stalled.joined, stalled.joined_units, strict);
  ASSERT_TRUE(strict_hang.ok()) << strict_hang.status().message();
  EXPECT_FALSE(strict_hang->found());
  ExpectRefusedSaying(
      HangFromParts(strict_merger, stalled.joined, stalled.joined_units, {}).status(),
      "the parts read pending launches past 1000000000 ns and stalled steps past 10000000000 ns");
  // A damaged summary, state or stalled step gives the analysis up, and the hang is refused
  // with the offset.
  ExpectRefusedSaying(HangOfDamagedParts(vllm, SetByteAfter(AnalysisPhase::kSummaries, "TLHC",
                                                            15, 1)),  // the communicator count
                      "collective summary: offset 16");
  ExpectRefusedSaying(  // the first state's kernel flag
      HangOfDamagedParts(vllm, SetByteAfter(AnalysisPhase::kMeasurements, "TLHS", 28, 2)),
      "culprits' states: offset 29");
  ExpectRefusedSaying(  // the first step's open time's top byte (its name 15 bytes)
      HangOfDamagedParts(stalled, SetByteAfter(AnalysisPhase::kMeasurements, "TLST", 66,
                                               static_cast<char>(0x80), false,
                                               [](const std::string& m, size_t at) {
                                                 return m[at + 8] != 0;  // a step to damage
                                               })),
      "stalled steps: offset 67");
  // A state or stalled step read otherwise than the joined trace's is a hang that differs
  // from it: every part's last kernel of the culprit renamed (header 8, end 8, count 8,
  // rank 4, flag 1, length 8: the kernel's name at 37), every stalled step's name (header
  // 8, count 8, rank 4, pid 8, length 8: the name at 36).
  ExpectRefusedSaying(
      HangOfDamagedParts(vllm, SetByteAfter(AnalysisPhase::kMeasurements, "TLHS", 37, 'X', true,
                                            [](const std::string& m, size_t at) {
                                              return m[at + 28] == 1;  // a kernel to rename
                                            })),
      "differs from the joined trace's: states 0");
  ExpectRefusedSaying(
      HangOfDamagedParts(stalled, SetByteAfter(AnalysisPhase::kMeasurements, "TLST", 36, 'X', true,
                                               [](const std::string& m, size_t at) {
                                                 return m[at + 8] != 0;
                                               })),
      "differs from the joined trace's: stalled steps 0");
}

// Four per-rank Kineto files (the modern fixture) whose "[memory]" samples lie on GPU
// rank % 2, every 20 s over 80 s, and a log whose out-of-memory message names GPU 1: the
// trend merges samples of two ranks, each cut to its last minute.
FleetRun MemorySamplesRun() {
  const std::string dir = base::TempDir("analysis_parts_oom_kineto");
  auto fixture = base::ReadFile(base::SourceDir() + "/tests/fixtures/kineto/small_modern.json");
  EXPECT_TRUE(fixture.ok());
  if (!fixture.ok()) return {};
  std::vector<std::string> inputs;
  for (int rank = 0; rank < 4; ++rank) {
    std::string text = *fixture;
    const size_t at = text.find("\"rank\": 1");
    text.replace(at, 9, fmt::format("\"rank\": {}", rank));
    std::string samples;
    for (int k = 0; k < 5; ++k) {
      samples += fmt::format(
          R"({{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":100,)"
          R"("tid":101,"ts":{},"args":{{"Device Type":1,"Device Id":{},"Bytes":512,)"
          R"("Total Allocated":{},"Total Reserved":{}}}}},)",
          rank * 1000 + k * 20'000'000, rank % 2, (rank + 1) * 1000 + k, 1 << 20);
    }
    const size_t events = text.find("\"traceEvents\": [") + 16;
    text.insert(events, samples);
    inputs.push_back(fmt::format("{}/trace_rank{}.json", dir, rank));
    EXPECT_TRUE(base::WriteFileAtomic(inputs.back(), text).ok());
  }
  inputs.push_back(dir + "/engine.log");
  EXPECT_TRUE(base::WriteFileAtomic(
                  inputs.back(),
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
                  "has a total capacity of 79.15 GiB of which 1.06 GiB is free. Including "
                  "non-PyTorch memory, this process has 78.08 GiB memory in use.\n")
                  .ok());
  return ImportRun(inputs);
}

// The out-of-memory report of a run from its parts (OomFromParts): the log lines as
// imported aligned on the parts' rows.
base::StatusOr<cause::OomReport> OomOfParts(const PartsMerger& merger, const FleetRun& run) {
  TELLER_ASSIGN_OR_RETURN(const model::LogTable aligned,
                          LogsAlignedOnParts(merger, run.imported_logs, run.joined.strings,
                                             reconstruct::BuildOptions{}.log_window_ns));
  return OomFromParts(merger, aligned, run.joined.strings, run.joined, run.joined_units, {});
}

// An out-of-memory error on rank 1 of vLLM and SGLang, and the Kineto run above, dealt
// into 1, 2 and 4 processes: the report from the parts (the message of the lines aligned on
// the parts' rows, its step's number and requests from the merged rows, the memory trend
// merged from the parts' samples) is the one cause::FindOom finds on the joined trace, and
// the diagnosis given it is the one that scans its own. A run without a message sends no
// site and no samples.
TEST(AnalysisParts, TheOomTrendFromThePartsIsTheJoinedTraces) {
  const FleetRun vllm = ImportRun({SimulatedRun(
      sim::EngineKind::kVllmV1Online, "out_of_memory:rank=1", "analysis_parts_oom_vllm")});
  const FleetRun sglang = ImportRun(
      {SimulatedRun(sim::EngineKind::kSglang, "out_of_memory:rank=1", "analysis_parts_oom_sglang")});
  const FleetRun kineto = MemorySamplesRun();
  const cause::OomReport kineto_oom = cause::FindOom(kineto.joined);
  ASSERT_TRUE(kineto_oom.found && kineto_oom.trend.found);
  EXPECT_EQ(kineto_oom.trend.device, 1);
  EXPECT_EQ(kineto_oom.trend.samples, 7u);  // ranks 1 and 3 from 20 s to 80 s
  const std::pair<const char*, const FleetRun*> runs[] = {
      {"vllm", &vllm}, {"sglang", &sglang}, {"kineto", &kineto}, {"healthy", &ThrottledVllmRun()}};
  for (const auto& [name, run] : runs) {
    const cause::OomReport joined_oom = cause::FindOom(run->joined);
    EXPECT_EQ(joined_oom.found, std::string(name) != "healthy") << name;
    if (std::string(name) == "vllm" || std::string(name) == "sglang") {
      EXPECT_GE(joined_oom.step, 0) << name;  // the simulated message lies in a step
      EXPECT_FALSE(joined_oom.requests.empty()) << name;
    }
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      merger.SetLogLines(&run->imported_logs, &run->joined.strings);
      Crossed crossed;
      RunPhases(*run, processes, &merger, &crossed);
      EXPECT_EQ(merger.oom_site().found, joined_oom.found);
      auto oom = OomOfParts(merger, *run);
      ASSERT_TRUE(oom.ok()) << oom.status().message();
      EXPECT_EQ(cause::OomDifference(*oom, joined_oom), "");
      EXPECT_EQ(oom->step, joined_oom.step);
      EXPECT_EQ(oom->requests, joined_oom.requests);
      ExpectTheDiagnosisGivenIsItsOwn(
          run->joined, [&](diagnose::DiagnoseOptions* given) { given->oom_report = &*oom; });
    }
  }
  // Without the log lines no site is sent, and the trend is refused.
  PartsMerger blind(2);
  Crossed crossed;
  RunPhases(kineto, 2, &blind, &crossed);
  const base::Status unseen = OomOfParts(blind, kineto).status();
  EXPECT_NE(unseen.message().find("did not find"), std::string::npos) << unseen.ToString();
  // A damaged part's samples give the analysis up, and the trend is refused with the offset.
  PartsMerger merger(2);
  merger.SetLogLines(&kineto.imported_logs, &kineto.joined.strings);
  RunPhases(kineto, 2, &merger, &crossed,
            SetByteAfter(AnalysisPhase::kMeasurements, "TLOT", 15, 0x7f));  // the GPU count
  ExpectRefusedSaying(OomOfParts(merger, kineto).status(), "memory trend part: offset 16");
}

// A run of `engine` with 4 layers and 12 requests under `faults` (a hybrid model's, every
// fourth layer Mamba, for a misrouted decode).
FleetRun RequestFaultRun(sim::EngineKind engine, const std::string& faults,
                         const std::string& name) {
  sim::SimConfig config = sim::SmallConfig(engine, 4, 12);
  if (faults == "decode_misroute") config.model.mamba_period = 4;
  config.faults = sim::ParseFaults(faults).value();
  const std::string path = base::TempDir(name) + "/run.teller";
  EXPECT_TRUE(sim::RunSimulation(config, path).ok());
  return ImportRun({path});
}

// The request causes found from the parts' rows and the first process's lines aligned on
// them, checked against the joined trace's.
base::StatusOr<std::vector<cause::Hypothesis>> RequestCausesOfParts(const PartsMerger& merger,
                                                                    const FleetRun& run) {
  TELLER_ASSIGN_OR_RETURN(const model::LogTable aligned,
                          LogsAlignedOnParts(merger, run.imported_logs, run.joined.strings,
                                             reconstruct::BuildOptions{}.log_window_ns));
  return RequestCausesFromParts(merger, aligned, run.joined.strings, run.joined, run.joined_units,
                                {});
}

struct RequestFault {
  const char* name;
  sim::EngineKind engine;
  const char* faults;
  cause::CauseKind kind;  // the cause the joined trace shows
};

// A starved request (vLLM, which logs arrivals, and SGLang, which logs its queue counts), a
// KV-cache preemption and a misrouted decode dealt into 1, 2 and 4 processes: the request
// causes found from the merged request rows, the findings' rows and the lines aligned on
// them are the joined trace's, hypothesis for hypothesis, and the diagnosis given them is
// the one that finds its own.
TEST(AnalysisParts, TheRequestCausesFromThePartsAreTheJoinedTraces) {
  const RequestFault faults[] = {{"vllm starved", sim::EngineKind::kVllmV1Online, "starved_request",
                                  cause::CauseKind::kRequestStarved},
                                 {"sglang starved", sim::EngineKind::kSglang, "starved_request",
                                  cause::CauseKind::kRequestStarved},
                                 {"vllm preempted", sim::EngineKind::kVllmV1Online,
                                  "kv_cache_pressure", cause::CauseKind::kRequestPreempted},
                                 {"sglang misrouted", sim::EngineKind::kSglang, "decode_misroute",
                                  cause::CauseKind::kRequestMisrouted}};
  for (const RequestFault& fault : faults) {
    const FleetRun run =
        RequestFaultRun(fault.engine, fault.faults, "analysis_parts_request_causes");
    const std::vector<cause::Hypothesis> joined =
        cause::FindRequestCauses(cause::RequestCauseInputOfTrace(run.joined), {});
    EXPECT_TRUE(std::any_of(joined.begin(), joined.end(), [&](const cause::Hypothesis& h) {
      return h.kind == fault.kind;
    })) << fault.name;
    for (int processes : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << fault.name << ", " << processes << " processes");
      PartsMerger merger(static_cast<size_t>(processes));
      Crossed crossed;
      RunPhases(run, processes, &merger, &crossed);
      auto causes = RequestCausesOfParts(merger, run);
      ASSERT_TRUE(causes.ok()) << causes.status().message();
      EXPECT_EQ(cause::RequestCausesDifference(*causes, joined), "");
      ExpectTheDiagnosisGivenIsItsOwn(run.joined, [&](diagnose::DiagnoseOptions* options) {
        options->request_causes = &*causes;
      });
    }
  }
}

// The diagnosis reads the request causes given (none given: the starved request is not
// among its causes), and rows of other steps make no input.
TEST(AnalysisParts, RequestCausesGivenAreReadAndRowsOfOtherStepsRefused) {
  const FleetRun run = RequestFaultRun(sim::EngineKind::kVllmV1Online, "starved_request",
                                       "analysis_parts_request_causes_given");
  diagnose::DiagnoseOptions options;
  auto own = diagnose::Diagnose(run.joined, options);
  const std::vector<cause::Hypothesis> none;
  options.request_causes = &none;
  auto given = diagnose::Diagnose(run.joined, options);
  ASSERT_TRUE(own.ok() && given.ok());
  const auto starved = [](const diagnose::Diagnosis& d) {
    return std::count_if(d.candidates.begin(), d.candidates.end(), [](const auto& c) {
      return c.hypothesis.kind == cause::CauseKind::kRequestStarved;
    });
  };
  EXPECT_GT(starved(*own), 0);
  EXPECT_EQ(starved(*given), 0);
  // Findings' rows of one step fewer than the request rows.
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed);
  localize::FeatureRows fewer = merger.feature_rows();
  fewer.rank.pop_back();
  const base::Status refused = cause::RequestCauseInputOfRows(merger.request_rows(), fewer,
                                                              run.joined.logs, run.joined.strings)
                                   .status();
  ExpectRefusedSaying(refused, "steps in the request rows");
}

// The impact figures of a hypothesis that the replay sets, equal field for field.
void ExpectSameImpact(const cause::Hypothesis& a, const cause::Hypothesis& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.impact_ns, b.impact_ns);
  EXPECT_EQ(a.impact_replayed, b.impact_replayed);
  EXPECT_EQ(a.cost_negligible, b.cost_negligible);
  EXPECT_EQ(a.collectives, b.collectives);
  EXPECT_EQ(a.collectives_late, b.collectives_late);
  EXPECT_EQ(a.collectives_late_by_chance, b.collectives_late_by_chance);
  EXPECT_EQ(a.reached_collectives_last, b.reached_collectives_last);
}

// The shown causes' impacts replayed on the parts' graph and on the joined trace: the
// same, and replayed (the window holds work the cause moved).
void ExpectTheJoinedTracesImpacts(const cause::ReplayGraph& graph, const model::Trace& joined,
                                  const localize::StepFeatures& features) {
  const cause::CauseOptions options;
  const size_t shown = options.max_alternatives + 1;
  const cause::DeviationMap map = cause::BuildDeviationMap(joined, features, {});
  cause::CauseAnalysis from_parts = cause::AnalyzeCauses(map, options);
  cause::CauseAnalysis own = from_parts;
  ASSERT_FALSE(own.ranked.empty());
  cause::ReplayImpacts(graph, map, shown, &from_parts, options);
  cause::ReplayImpacts(joined, features, map, shown, &own, options);
  for (size_t i = 0; i < own.ranked.size() && i < shown; ++i) {
    SCOPED_TRACE(::testing::Message() << "hypothesis " << i);
    ExpectSameImpact(from_parts.ranked[i], own.ranked[i]);
  }
  EXPECT_TRUE(own.ranked[0].impact_replayed);
  EXPECT_GT(own.ranked[0].impact_ns, 0.0);
  if (own.has_second) ExpectSameImpact(from_parts.second, own.second);
}

// The shown causes' operators named by the processes that hold their ranks and merged on
// the first are the joined trace's, field for field, and the diagnosis given them is its
// own: vLLM and SGLang with a throttled GPU, 1, 2 and 4 processes.
TEST(AnalysisParts, TheCausesOperatorsFromThePartsAreTheJoinedTraces) {
  ForThrottledRunsInParts([](const PartsRun& parts) {
    const FleetRun* run = &parts.run;
    const PartsMerger& merger = parts.merger;
    auto map = MapFromParts(merger, run->joined, run->joined_units, {});
    ASSERT_TRUE(map.ok()) << map.status().message();
    diagnose::CauseOperatorFinder finder(run->joined, parts.features, *map);
    ASSERT_FALSE(merger.cause_operators().empty());
    size_t named = 0;
    for (const diagnose::OperatorsOfCause& cause : merger.cause_operators()) {
      const std::vector<diagnose::CauseOperator> joined = finder.Find(cause.hypothesis);
      ASSERT_EQ(cause.operators.size(), joined.size());
      named += joined.size();
      for (size_t i = 0; i < joined.size(); ++i) {
        EXPECT_EQ(cause.operators[i].name, joined[i].name) << i;
        EXPECT_EQ(cause.operators[i].layer, joined[i].layer) << joined[i].name;
        EXPECT_EQ(cause.operators[i].victim, joined[i].victim) << joined[i].name;
        EXPECT_EQ(cause.operators[i].holds_moved, joined[i].holds_moved) << joined[i].name;
        EXPECT_EQ(cause.operators[i].started_later, joined[i].started_later) << joined[i].name;
        EXPECT_EQ(cause.operators[i].groups, joined[i].groups) << joined[i].name;
      }
    }
    EXPECT_GT(named, 0u);
    ExpectTheDiagnosisGivenIsItsOwn(run->joined, [&](diagnose::DiagnoseOptions* options) {
      options->cause_operators = &merger.cause_operators();
    });
    // The diagnosis takes them: a marked copy shows its mark.
    std::vector<diagnose::OperatorsOfCause> marked = merger.cause_operators();
    for (diagnose::OperatorsOfCause& cause : marked) {
      cause.operators.push_back({model::Layer::kK, "marked", false, false, false, {}});
    }
    diagnose::DiagnoseOptions options;
    options.cause_operators = &marked;
    auto diagnosis = diagnose::Diagnose(run->joined, options);
    ASSERT_TRUE(diagnosis.ok() && !diagnosis->candidates.empty());
    ASSERT_FALSE(diagnosis->candidates[0].operators.empty());
    EXPECT_EQ(diagnosis->candidates[0].operators.back().name, "marked");
  });
}

// A throttled GPU on vLLM and SGLang dealt into 1, 2 and 4 processes: the replay graph the
// parts cut for the groups the first process asked (the shown causes' windows) is the one
// cut from the joined trace, column for column; the impacts replayed on it are the joined
// trace's, and the diagnosis given it is the one that replays its own.
TEST(AnalysisParts, TheImpactReplayFromThePartsIsTheJoinedTraces) {
  ForThrottledRunsInParts([](const PartsRun& parts) {
    const FleetRun* run = &parts.run;
    const PartsMerger& merger = parts.merger;
    const localize::StepFeatures& features = parts.features;
    ASSERT_FALSE(merger.replay_groups().empty());
    auto graph = ReplayGraphFromParts(merger, run->joined, run->joined_units, features);
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    EXPECT_EQ(graph->groups, merger.replay_groups());
    ExpectTheJoinedTracesImpacts(*graph, run->joined, features);
    ExpectTheDiagnosisGivenIsItsOwn(run->joined, [&](diagnose::DiagnoseOptions* options) {
      options->replay_graph = &*graph;
    });
    if (parts.processes != 4) return;
    // Per rank-step of the replayed groups: the graph's bytes, and the fifth phase's
    // messages of the processes other than the first over their rank-steps there.
    const std::vector<int32_t> owner_of =
        AssignUnits(std::vector<std::vector<bool>>(4, std::vector<bool>(run->units.size(), true)),
                    run->units.size());
    std::set<int32_t> crossing_ranks;
    for (size_t unit = 0; unit < run->units.size(); ++unit) {
      if (owner_of[unit] != 0) crossing_ranks.insert(run->plan.units[unit].rank);
    }
    int64_t crossing_steps = 0;
    for (int32_t rank : graph->steps.rank) crossing_steps += crossing_ranks.count(rank);
    const double steps = static_cast<double>(graph->steps.size());
    std::printf("replay graph of %s: %zu groups, %.0f rank-steps, %.1f nodes per rank-step; "
                "%.0f bytes per rank-step; the fifth phase's messages %.0f bytes per rank-step "
                "that crossed (%lld)\n",
                parts.name, graph->groups.size(), steps,
                static_cast<double>(graph->nodes.size()) / steps,
                static_cast<double>(cause::EncodeReplayGraph(*graph).size()) / steps,
                static_cast<double>(parts.crossed.message_bytes[4]) /
                    static_cast<double>(crossing_steps),
                static_cast<long long>(crossing_steps));
  });
}

// A diagnosis whose graph lacks a group the replay reads replays on its trace: the same
// diagnosis; one given a graph that holds them replays on it. A graph not received, or
// that differs from the joined trace's, is refused, naming the column.
TEST(AnalysisParts, AReplayGraphThatIsNotTheJoinedTracesIsNotUsed) {
  const FleetRun& run = ThrottledVllmRun();
  const localize::StepFeatures features = localize::ComputeStepFeatures(run.joined);
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed);
  ASSERT_TRUE(ReplayGraphFromParts(merger, run.joined, run.joined_units, features).ok());
  cause::ReplayGraph lacking = merger.replay_graph();
  lacking.groups.pop_back();
  ExpectTheDiagnosisGivenIsItsOwn(run.joined, [&](diagnose::DiagnoseOptions* options) {
    options->replay_graph = &lacking;
  });
  // The diagnosis replays on the graph it is given: one whose nodes all count in no cell
  // (nothing to cut) gives other impacts, so another diagnosis.
  cause::ReplayGraph uncut = merger.replay_graph();
  std::fill(uncut.nodes.cell.begin(), uncut.nodes.cell.end(), cause::NodeCell{});
  diagnose::DiagnoseOptions given_uncut;
  given_uncut.replay_graph = &uncut;
  auto own = diagnose::Diagnose(run.joined, {});
  auto with_uncut = diagnose::Diagnose(run.joined, given_uncut);
  ASSERT_TRUE(own.ok() && with_uncut.ok());
  EXPECT_NE(diagnose::DiagnosisToJson(run.joined, *with_uncut),
            diagnose::DiagnosisToJson(run.joined, *own));
  // The phases stopped after the fourth: the map, but no graph.
  PartsMerger before_replay(2);
  RunPhases(run, 2, &before_replay, &crossed, nullptr, AnalysisPhase::kMeasurements);
  EXPECT_TRUE(MapFromParts(before_replay, run.joined, run.joined_units, {}).ok());
  const base::Status not_received =
      ReplayGraphFromParts(before_replay, run.joined, run.joined_units, features).status();
  EXPECT_NE(not_received.message().find("not received"), std::string::npos)
      << not_received.ToString();
  // Other features (none: every node a step's own time) cut another graph.
  const base::Status refused =
      ReplayGraphFromParts(merger, run.joined, run.joined_units, localize::StepFeatures{}).status();
  EXPECT_NE(refused.message().find("replay graph differs from the joined trace's: cell"),
            std::string::npos)
      << refused.ToString();
}

// A process's replay graph damaged (its version): the first process gives up naming the
// unit and the offset, and the graph is refused.
TEST(AnalysisParts, ADamagedReplayGraphIsGivenUpWithItsOffset) {
  const FleetRun& run = ThrottledVllmRun();
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed,
            [](AnalysisPhase phase, size_t process, std::string* message) {
              if (phase != AnalysisPhase::kReplay || process != 1) return;
              const size_t graph = message->rfind("TLRG");
              ASSERT_NE(graph, std::string::npos);
              (*message)[graph + 4] ^= 0x40;
            });
  ASSERT_TRUE(merger.gave_up());
  EXPECT_NE(merger.why().find("replay graph: offset 4: expected version 2"), std::string::npos)
      << merger.why();
  EXPECT_NE(merger.why().find("unit "), std::string::npos) << merger.why();
  EXPECT_FALSE(ReplayGraphFromParts(merger, run.joined, run.joined_units,
                                    localize::ComputeStepFeatures(run.joined))
                   .ok());
}

// The first process gives up (a process lost after the first phase): every later answer
// is a give-up, so every process stops, and the map is refused with the reason.
TEST(AnalysisParts, AGiveUpStopsEveryProcessAndNamesTheReason) {
  const FleetRun& run = ThrottledVllmRun();
  PartsMerger merger(4);
  Crossed crossed;
  RunPhases(run, 4, &merger, &crossed, [&](AnalysisPhase phase, size_t process, std::string*) {
    if (phase == AnalysisPhase::kStepOrder && process == 3) merger.GiveUp("process 2 was lost");
  });
  EXPECT_EQ(crossed.give_ups, 4);
  const base::Status refused = MapFromParts(merger, run.joined, run.joined_units, {}).status();
  EXPECT_NE(refused.message().find("process 2 was lost"), std::string::npos) << refused.ToString();
  const base::Status rows_refused =
      FeatureRowsFromParts(merger, run.joined, run.joined_units).status();
  EXPECT_NE(rows_refused.message().find("process 2 was lost"), std::string::npos)
      << rows_refused.ToString();
  for (const base::Status& refused_too :
       {RequestRowsFromParts(merger, run.joined, run.joined_units).status(),
        ReplayGraphFromParts(merger, run.joined, run.joined_units, {}).status(),
        LogsAlignedOnParts(merger, run.imported_logs, run.joined.strings, 0).status(),
        CheckRunCountersAreTheJoinedTrace(merger, run.joined)}) {
    EXPECT_NE(refused_too.message().find("process 2 was lost"), std::string::npos)
        << refused_too.ToString();
  }

  // A process whose part fails sends a give-up, and the first process passes it on.
  PartsMerger second(2);
  Crossed crossed_second;
  RunPhases(run, 2, &second, &crossed_second, [](AnalysisPhase phase, size_t process, std::string* message) {
    if (phase == AnalysisPhase::kSummaries && process == 1) *message = GiveUpMessage("unit 4: broken");
  });
  EXPECT_EQ(crossed_second.give_ups, 2);

  // A phase out of order is a give-up, not a crash.
  PartsMerger third(1);
  EXPECT_TRUE(GiveUpReason(third.Answer(AnalysisPhase::kStepOrder, {""})[0]).has_value());
  EXPECT_NE(third.why().find("before the first"), std::string::npos) << third.why();
  EXPECT_NE(second.why().find("process 1 gave up: unit 4: broken"), std::string::npos)
      << second.why();
}

// Where the last unit's request rows begin in a process's last message (their magic).
size_t LastRequestRows(const std::string& message) {
  const size_t at = message.rfind("TLRQ");
  EXPECT_NE(at, std::string::npos);
  return at == std::string::npos ? message.size() : at;
}

// A process's findings' rows damaged (the byte before its last unit's request rows and
// their length is that unit's has_step_requests flag): the first process gives up naming
// the unit and the offset, and the rows are refused, so the diagnosis makes its own.
TEST(AnalysisParts, DamagedFindingsRowsAreGivenUpWithTheirOffset) {
  const FleetRun& run = ThrottledVllmRun();
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed,
            [](AnalysisPhase phase, size_t process, std::string* message) {
              if (phase != AnalysisPhase::kMeasurements || process != 1) return;
              (*message)[LastRequestRows(*message) - sizeof(uint64_t) - 1] ^= 0x7f;
            });
  ASSERT_TRUE(merger.gave_up());
  EXPECT_NE(merger.why().find("feature rows: offset"), std::string::npos) << merger.why();
  EXPECT_NE(merger.why().find("unit "), std::string::npos) << merger.why();
  EXPECT_FALSE(FeatureRowsFromParts(merger, run.joined, run.joined_units).ok());
}

// A process's request rows damaged (their last 4 bytes, the process count, zeroed: every
// step's process out of range): the first process gives up naming the unit and what is
// wrong, and the requests are refused.
TEST(AnalysisParts, DamagedRequestRowsAreGivenUpWithTheirOffset) {
  const FleetRun& run = ThrottledVllmRun();
  PartsMerger merger(2);
  Crossed crossed;
  RunPhases(run, 2, &merger, &crossed,
            [](AnalysisPhase phase, size_t process, std::string* message) {
              if (phase != AnalysisPhase::kMeasurements || process != 1) return;
              // The last unit's request rows end before its crash scan and that one's length.
              const size_t crash = message->rfind("TLCK");
              ASSERT_NE(crash, std::string::npos);
              const auto end = message->begin() + static_cast<ptrdiff_t>(crash - sizeof(uint64_t));
              std::fill(end - 4, end, '\0');
            });
  ASSERT_TRUE(merger.gave_up());
  EXPECT_NE(merger.why().find("request rows: offset"), std::string::npos) << merger.why();
  EXPECT_NE(merger.why().find("process 0 of 0"), std::string::npos) << merger.why();
  EXPECT_NE(merger.why().find("unit "), std::string::npos) << merger.why();
  EXPECT_FALSE(RequestRowsFromParts(merger, run.joined, run.joined_units).ok());
}

// Any one byte of a process's message flipped: the first process answers or gives up,
// never crashes, and a process given a damaged answer gives up.
TEST(AnalysisParts, FlippedBytesAreAnsweredOrGivenUp) {
  const FleetRun run = ImportRun({base::SourceDir() + "/tests/fixtures/bundle/two_unranked"});
  std::vector<model::Trace> parts;
  parts.push_back(CopyOf(run.units[0]));
  parts.push_back(CopyOf(run.units[1]));
  PartsOwner owner({0, 1}, std::move(parts));
  const std::string message = owner.Message(AnalysisPhase::kCollectives, "");
  ASSERT_FALSE(GiveUpReason(message).has_value());
  PartsMerger merger(1);
  const std::string answer = merger.Answer(AnalysisPhase::kCollectives, {message})[0];
  ASSERT_FALSE(GiveUpReason(answer).has_value()) << merger.why();
  base::ExpectFlippedBytesDecodeOrFail({&message, &answer}, [&](const std::string& bytes) {
    PartsMerger fresh(1);
    const bool refused = GiveUpReason(fresh.Answer(AnalysisPhase::kCollectives, {bytes})[0]).has_value();
    std::vector<model::Trace> copies;
    copies.push_back(CopyOf(run.units[0]));
    copies.push_back(CopyOf(run.units[1]));
    PartsOwner again({0, 1}, std::move(copies));
    again.Message(AnalysisPhase::kCollectives, "");
    return int{refused} + int{GiveUpReason(again.Message(AnalysisPhase::kStepOrder, bytes)).has_value()};
  });
}

}  // namespace
}  // namespace teller::fleet
