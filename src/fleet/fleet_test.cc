#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "base/testing.h"
#include "fleet/fleet_open.h"
#include "fleet/unit_assignment.h"
#include "import/import_inputs.h"
#include "sim/simulated_trace_testing.h"
#include "store/open_trace.h"
#include "store/store_set.h"
#include "store/trace_snapshot.h"
#include "store/trace_store.h"

namespace teller::fleet {
namespace {

TEST(AssignUnits, ContiguousBlocksWhenEveryProcessReadsEverything) {
  std::vector<std::vector<bool>> readable(3, std::vector<bool>(7, true));
  EXPECT_EQ(AssignUnits(readable, 7), (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2}));
}

TEST(AssignUnits, UnitsGoWhereTheirFilesLie) {
  // Node-local disks: process 0 holds units 4-5, process 1 units 0-3.
  std::vector<std::vector<bool>> readable = {{false, false, false, false, true, true},
                                             {true, true, true, true, false, false}};
  EXPECT_EQ(AssignUnits(readable, 6), (std::vector<int32_t>{1, 1, 1, 1, 0, 0}));
}

TEST(AssignUnits, UnreadableUnitsHaveNoOwnerAndTheRestStaysBalanced) {
  std::vector<std::vector<bool>> readable = {
      {false, true, true, false}, {false, true, true, false}, {false, true, true, false}};
  const std::vector<int32_t> owners = AssignUnits(readable, 4);
  EXPECT_EQ(owners[0], -1);
  EXPECT_EQ(owners[3], -1);
  EXPECT_NE(owners[1], owners[2]);  // two units, two different processes
}

TEST(AssignUnits, NoProcessesOwnNothing) {
  EXPECT_EQ(AssignUnits({}, 2), (std::vector<int32_t>{-1, -1}));
}

// A bundle of several processes, written once.
const std::string& SimulatedBundle() {
  static const std::string dir = [] {
    sim::SimConfig config = sim::SmallConfig(sim::EngineKind::kVllmV1Online, 4, 6);
    config.faults = sim::ParseFaults("gpu_throttle:rank=2").value();
    const std::string path = base::TempDir("fleet_test") + "/run.teller";
    EXPECT_TRUE(sim::RunSimulation(config, path).ok());
    return path;
  }();
  return dir;
}

base::StatusOr<model::Trace> ImportedHere(import::UnitImporter* importer, size_t unit) {
  model::Trace part;
  TELLER_RETURN_IF_ERROR(importer->Import(unit, {}, &part));
  return part;
}

TEST(ImportPlanned, UnitsImportedApartJoinToTheTraceOfOneImport) {
  const std::vector<std::string> inputs = {SimulatedBundle()};
  auto plan = import::PlanImport(inputs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_GT(plan->units.size(), 2u);  // a unit per process folder
  for (const import::ImportUnit& unit : plan->units) EXPECT_GE(unit.rank, 0) << unit.path;
  model::Trace direct;
  ASSERT_TRUE(import::ImportInputs(inputs, {}, &direct).ok());
  model::Trace joined;
  std::vector<import::SkippedUnit> skipped;
  import::UnitImporter importer(*plan);
  auto take = [&](size_t unit) { return ImportedHere(&importer, unit); };
  ASSERT_TRUE(import::ImportPlanned(*plan, {}, take, &joined, &skipped).ok());
  EXPECT_TRUE(skipped.empty());
  ASSERT_GT(direct.events.size(), 0u);
  EXPECT_EQ(store::SerializeTraceSnapshot(joined), store::SerializeTraceSnapshot(direct));
}

// A bundle whose processes carry no rank: joined from units imported apart, its
// processes are numbered as one import numbers them.
TEST(ImportPlanned, UnrankedProcessesAreNumberedAsInOneImport) {
  const std::vector<std::string> inputs = {base::SourceDir() +
                                           "/tests/fixtures/bundle/two_unranked"};
  auto plan = import::PlanImport(inputs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->units.size(), 2u);
  model::Trace direct;
  ASSERT_TRUE(import::ImportInputs(inputs, {}, &direct).ok());
  EXPECT_EQ(direct.processes.rank, (std::vector<int32_t>{0, 1}));
  model::Trace joined;
  std::vector<import::SkippedUnit> skipped;
  import::UnitImporter importer(*plan);
  auto take = [&](size_t unit) { return ImportedHere(&importer, unit); };
  ASSERT_TRUE(import::ImportPlanned(*plan, {}, take, &joined, &skipped).ok());
  EXPECT_EQ(store::SerializeTraceSnapshot(joined), store::SerializeTraceSnapshot(direct));
}

// One process folder per part on several threads (import::PartImports), joined in order:
// the trace one thread imports, byte for byte.
model::Trace ImportedOn(const std::string& bundle, int threads) {
  import::ImportOptions options;
  options.threads = threads;
  model::Trace trace;
  EXPECT_TRUE(import::ImportInputs({bundle}, options, &trace).ok());
  return trace;
}

TEST(ImportBundle, FoldersImportedOnSeveralThreadsJoinToTheTraceOfOneThread) {
  const std::string one = store::SerializeTraceSnapshot(ImportedOn(SimulatedBundle(), 1));
  for (int threads : {2, 3, 16}) {
    EXPECT_EQ(store::SerializeTraceSnapshot(ImportedOn(SimulatedBundle(), threads)), one)
        << threads << " threads";
  }
}

// A folder whose events file is damaged is noted, not fatal, the same way on any number
// of threads.
TEST(ImportBundle, ADamagedFolderIsNotedAsOnOneThread) {
  const std::string copy = base::TempDir("fleet_test_damaged") + "/run.teller";
  std::filesystem::copy(SimulatedBundle(), copy, std::filesystem::copy_options::recursive);
  std::vector<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(copy)) {
    if (entry.path().filename().string().rfind("proc-", 0) == 0) folders.push_back(entry.path());
  }
  std::sort(folders.begin(), folders.end());
  ASSERT_GE(folders.size(), 3u);
  for (const auto& entry : std::filesystem::directory_iterator(folders[1])) {
    std::ofstream(entry.path(), std::ios::trunc) << "not an event file";  // no header
  }
  const model::Trace one = ImportedOn(copy, 1);
  EXPECT_EQ(store::SerializeTraceSnapshot(ImportedOn(copy, 3)), store::SerializeTraceSnapshot(one));
  const std::string folder = std::filesystem::path(folders[1]).filename().string();
  bool noted = false;
  for (const std::string& note : one.meta.notes) noted |= note.find(folder) != std::string::npos;
  EXPECT_TRUE(noted) << "no note names " << folder;
}

TEST(ImportPlanned, AUnitThatFailsIsLeftOutAndNamed) {
  const std::vector<std::string> inputs = {SimulatedBundle()};
  auto plan = import::PlanImport(inputs);
  ASSERT_TRUE(plan.ok());
  model::Trace joined;
  std::vector<import::SkippedUnit> skipped;
  import::UnitImporter importer(*plan);
  auto take = [&](size_t unit) -> base::StatusOr<model::Trace> {
    if (unit == 1) return base::IoError("{}: cannot read", plan->units[unit].path);
    return ImportedHere(&importer, unit);
  };
  ASSERT_TRUE(import::ImportPlanned(*plan, {}, take, &joined, &skipped).ok());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].unit, 1u);
  EXPECT_EQ(joined.processes.size(), plan->units.size() - 1);
  // Without a list of skipped units the failure is the join's.
  model::Trace strict;
  EXPECT_FALSE(import::ImportPlanned(*plan, {}, take, &strict, nullptr).ok());

  const std::vector<std::string> notes =
      MissingNotes({{plan->units[1].path, plan->units[1].rank, "cannot read"}});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find(fmt::format("rank {}", plan->units[1].rank)), std::string::npos);
  EXPECT_NE(notes[0].find("cannot read"), std::string::npos);
}

// A process the first one gave up on: one note naming it, why, and its ranks as ranges;
// one lost after its units says the diagnosis has them all.
TEST(MissingNotes, NameALostProcessAndItsRanks) {
  LostProcess stalled{2, "did not answer within 600 s", {}};
  for (int32_t rank : {9, 8, 10, 14}) {
    stalled.units.push_back({fmt::format("run/proc-{}", rank), rank, "process 2 did not answer"});
  }
  const LostProcess late{3, "did not answer within 600 s", {}};
  const std::vector<std::string> notes =
      MissingNotes({{"trace_rank1.json", 1, "cannot read"}}, {stalled, late});
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_NE(notes[0].find("rank 1 (trace_rank1.json) was left out: cannot read"),
            std::string::npos);
  EXPECT_EQ(notes[1].find("process 2 did not answer within 600 s: ranks 8-10, 14 (4 units: "
                          "run/proc-9 and 3 more) are unknown to this diagnosis"),
            0u)
      << notes[1];
  EXPECT_EQ(notes[2],
            "process 3 did not answer within 600 s after sending its units; the diagnosis has "
            "all of them");
}

// A store set: each unit's store and the plan, as `--store-dir` writes them; opened, it
// is the trace of the inputs; a lost unit store or a damaged manifest is named.
TEST(StoreSet, OpensAsTheTraceOfItsInputs) {
  namespace fs = std::filesystem;
  const std::vector<std::string> inputs = {SimulatedBundle()};
  auto plan = import::PlanImport(inputs);
  ASSERT_TRUE(plan.ok());
  const std::string dir = base::TempDir("fleet_store_set");
  import::UnitImporter importer(*plan);
  for (size_t unit = 0; unit < plan->units.size(); ++unit) {
    auto part = ImportedHere(&importer, unit);
    ASSERT_TRUE(part.ok());
    ASSERT_TRUE(store::SaveTrace(*part, dir + "/" + store::UnitStoreName(unit)).ok());
  }
  ASSERT_TRUE(store::WriteStoreSetManifest(*plan, {}, dir).ok());
  store::OpenOptions open;
  auto direct = store::OpenTrace(inputs, open);
  auto set = store::OpenTrace({dir}, open);
  ASSERT_TRUE(direct.ok() && set.ok()) << set.status().message();
  EXPECT_TRUE(set->reconstructed);
  EXPECT_EQ(store::SerializeTraceSnapshot(*set), store::SerializeTraceSnapshot(*direct));

  // A unit listed as left out stays out; a unit store lost is an error naming it.
  ASSERT_TRUE(store::WriteStoreSetManifest(*plan, {{1, base::IoError("disk gone")}}, dir).ok());
  auto without = store::OpenStoreSet(dir, {});
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_EQ(without->processes.size(), plan->units.size() - 1);
  fs::remove(dir + "/" + store::UnitStoreName(2));
  auto lost = store::OpenStoreSet(dir, {});
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.status().message().find(store::UnitStoreName(2)), std::string::npos)
      << lost.status().message();
  {
    std::ofstream(dir + "/set.json") << R"({"format": "teller-store-set", "format_version": 1,
      "files": ["a"], "formats": ["kineto"], "units": [{"path": "a", "file": 3}]})";
  }
  auto damaged = store::OpenStoreSet(dir, {});
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("set.json"), std::string::npos)
      << damaged.status().message();
}

// A glob names per-rank files the way a shell would list them, so each MPI process can
// resolve it on its own node's disk.
TEST(SeeInput, APatternPlansAsItsMatchesListed) {
  const std::string dir = base::TempDir("fleet_glob");
  for (const char* name : {"trace_rank10.json", "trace_rank2.json", "trace_rank1.json"}) {
    std::ofstream(dir + "/" + name) << R"({"traceEvents": []})";
  }
  std::ofstream(dir + "/engine.log") << "INFO started\n";
  auto pattern = import::PlanImport({dir + "/trace_rank*.json"});
  auto listed = import::PlanImport(
      {dir + "/trace_rank1.json", dir + "/trace_rank10.json", dir + "/trace_rank2.json"});
  ASSERT_TRUE(pattern.ok() && listed.ok()) << pattern.status().message();
  EXPECT_EQ(pattern->files, listed->files);
  ASSERT_EQ(pattern->units.size(), 3u);
  EXPECT_EQ(pattern->units[1].rank, 10);
  auto none = import::PlanImport({dir + "/trace_rank*.sqlite"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no file matches"), std::string::npos);
  auto elsewhere = import::SeeInput(dir + "/absent_rank*.json");
  ASSERT_TRUE(elsewhere.ok());  // nothing here is no error: another node may see it
  EXPECT_TRUE(elsewhere->files.empty());
}

import::SeenFiles Seen(std::vector<std::string> files){import::SeenFiles seen;
seen.formats.assign(files.size(), import::InputFormat::kKineto);
seen.files = std::move(files);
return seen;
}  // namespace

TEST(MergeSeenInputs, EachInputsFilesFromEveryNodeInImportOrder) {
  // Input 0 a pattern whose files lie on two nodes (r1 on both), input 1 a log only the
  // first sees, input 2 nowhere.
  const std::vector<std::vector<import::SeenFiles>> seen = {
      {Seen({"t/a/r0.json", "t/a/r1.json"}), Seen({"x.log"}), Seen({})},
      {Seen({"t/a-b.json", "t/a/r1.json", "t/a/r2.json"}), Seen({}), Seen({})}};
  std::vector<size_t> unseen;
  const import::SeenFiles merged = MergeSeenInputs(seen, &unseen);
  EXPECT_EQ(merged.files, (std::vector<std::string>{"t/a/r0.json", "t/a/r1.json", "t/a/r2.json",
                                                    "t/a-b.json", "x.log"}));
  EXPECT_EQ(merged.formats.size(), merged.files.size());
  EXPECT_EQ(unseen, (std::vector<size_t>{2}));
}

TEST(ImportPlanned, APlanOfNothingSaysSo) {
  EXPECT_FALSE(import::PlanImport({}).ok());
  EXPECT_FALSE(import::PlanImport({base::TempDir("fleet_empty") + "/absent.json"}).ok());
}

}  // namespace teller::fleet
}  // namespace teller::fleet
