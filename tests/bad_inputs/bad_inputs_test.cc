// The bad-input table of docs/reliability.md (issue 8, item 4): every row is a test
// here (or an importer/reconstruct test the table names). Each input goes through
// what `teller build` runs (format detection, import, reconstruction) and the test
// checks the message (file, offset or row, what was expected) or the named counter,
// and that what was readable was kept.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/import_inputs.h"
#include "model/trace.h"
#include "store/open_trace.h"

namespace teller {
namespace {

namespace fs = std::filesystem;
using model::Layer;
using model::StatSeverity;

std::string WriteFile(const std::string& dir_name, const std::string& file_name,
                      std::string_view contents) {
  std::string path = base::TempDir("bad_inputs_" + dir_name) + "/" + file_name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What `teller build` / `teller stats` do with raw inputs: import and reconstruct.
base::StatusOr<model::Trace> Open(const std::vector<std::string>& paths) {
  return store::OpenTrace(paths, store::OpenOptions{});
}

bool NoteMentions(const model::Trace& trace, std::string_view a, std::string_view b = "") {
  for (const std::string& note : trace.meta.notes) {
    if (note.find(a) != std::string::npos && note.find(b) != std::string::npos) return true;
  }
  return false;
}

size_t CountLayer(const model::Trace& trace, Layer layer) {
  return static_cast<size_t>(
      std::count(trace.events.layer.begin(), trace.events.layer.end(), layer));
}

int64_t FindEvent(const model::Trace& trace, std::string_view name) {
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.str(trace.events.name[i]) == name) return static_cast<int64_t>(i);
  }
  return -1;
}

// A Kineto trace of `steps` profiler steps, each a launch and its kernel (with flows
// left out): 3 events per step. Times in microseconds after baseTimeNanoseconds.
std::string KinetoText(int steps, const std::string& extra_events = "") {
  std::string text =
      "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA "
      "H200\"}],\n  \"traceEvents\": [\n";
  for (int s = 0; s < steps; ++s) {
    int64_t t = 1000 + s * 1000;
    text += "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" +
            std::to_string(s) + "\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(t) +
            ".000, \"dur\": 900.000},\n";
    text +=
        "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
        "\"pid\": 1, \"tid\": 1, \"ts\": " +
        std::to_string(t + 100) +
        ".000, \"dur\": 10.000, \"args\": {\"correlation\": " + std::to_string(100 + s) + "}},\n";
    text += "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm_" + std::to_string(s) +
            "\", \"pid\": 0, \"tid\": 7, \"ts\": " + std::to_string(t + 200) +
            ".000, \"dur\": 50.000, \"args\": {\"correlation\": " + std::to_string(100 + s) +
            ", \"device\": 0, \"stream\": 7}},\n";
  }
  text += extra_events;
  text +=
      "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"end\", \"pid\": 1, "
      "\"tid\": 1, \"ts\": 99999.000, \"s\": \"t\"}\n  ],\n  \"baseTimeNanoseconds\": "
      "1700000000000000000\n}\n";
  return text;
}

// ---- truncated files ---------------------------------------------------------------

TEST(BadInput, KinetoCutMidEventKeepsTheEventsBeforeTheCut) {
  std::string text = KinetoText(10);
  // Cut inside the kernel of step 6: steps 0-5 (18 events) and two events of step 6.
  size_t cut = text.find("\"name\": \"gemm_6\"") + 5;
  std::string path = WriteFile("kineto_cut", "trace.json", text.substr(0, cut));
  auto trace = Open({path});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("kineto_truncated_file"), 1);
  EXPECT_EQ(trace->stats.entries().at("kineto_truncated_file").severity, StatSeverity::kDataLoss);
  EXPECT_EQ(trace->stats.Get("kineto_events_read"), 20);
  EXPECT_EQ(CountLayer(*trace, Layer::kK), 6u);
  EXPECT_GE(FindEvent(*trace, "gemm_5"), 0);
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_bound"), 6);
  // The note names the file, the byte where the JSON ends and what was expected there.
  size_t event_start = text.rfind("  {", cut) + 2;
  EXPECT_TRUE(NoteMentions(*trace, path + ": truncated file",
                           "ends at byte " + std::to_string(event_start)))
      << (trace->meta.notes.empty() ? "" : trace->meta.notes.back());
}

// Builds an Nsight Systems export from the fixture SQL plus changes run after it.
std::string BuildNsysDb(const std::string& name, const std::string& changes = "") {
  std::string path = base::TempDir("bad_inputs_nsys_" + name) + "/report.sqlite";
  std::string sql = ReadText(base::SourceDir() + "/tests/fixtures/nsys/tiny_export.sql");
  EXPECT_FALSE(sql.empty()) << "fixture not found; set TELLER_SOURCE_DIR";
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sql = "PRAGMA journal_mode = OFF; BEGIN;" + sql + changes + "COMMIT;";
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
  return path;
}

TEST(BadInput, NsysSqliteCutShortNamesTheCut) {
  // SQLite keeps part of its schema at the end of the file (nsys adds indexes last), so a
  // cut export is unreadable at any length: the message names the file, the cut and what
  // the header expected.
  std::string bytes = ReadText(BuildNsysDb("whole"));
  ASSERT_EQ(bytes.size() % 4096, 0u);
  size_t pages = bytes.size() / 4096;
  for (size_t cut = 4096; cut < bytes.size(); cut += 4096) {
    std::string path = WriteFile("nsys_cut", "report_" + std::to_string(cut) + ".sqlite",
                                 std::string_view(bytes).substr(0, cut));
    auto trace = Open({path});
    ASSERT_FALSE(trace.ok()) << "cut at " << cut;
    EXPECT_EQ(trace.status().code(), base::StatusCode::kDataLoss);
    EXPECT_NE(trace.status().message().find(path + ": cut short at byte " + std::to_string(cut) +
                                            ": the SQLite header expects " + std::to_string(pages) +
                                            " pages of 4096 bytes"),
              std::string::npos)
        << trace.status().ToString();
  }
}

TEST(BadInput, NsysDamagedTablePageKeepsTheOtherTables) {
  std::string whole_path = BuildNsysDb("damaged_whole");
  auto whole = Open({whole_path});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  // Zero the kernel table's page, as a crash that lost one page of the file would.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(whole_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* query = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT rootpage FROM sqlite_master WHERE name = "
                               "'CUPTI_ACTIVITY_KIND_KERNEL'",
                               -1, &query, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(query), SQLITE_ROW);
  int64_t page = sqlite3_column_int64(query, 0);
  sqlite3_finalize(query);
  sqlite3_close(db);
  std::string bytes = ReadText(whole_path);
  std::fill_n(bytes.begin() + (page - 1) * 4096, 4096, '\0');
  std::string path = WriteFile("nsys_damaged", "report.sqlite", bytes);
  auto trace = Open({path});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("nsys_table_unreadable"), 1);
  EXPECT_TRUE(NoteMentions(*trace, path + ": reading rows of", "CUPTI_ACTIVITY_KIND_KERNEL"));
  // Every other table is imported: only the kernels are missing.
  size_t kernels = CountLayer(*whole, Layer::kK) + CountLayer(*whole, Layer::kComm);
  EXPECT_GT(kernels, 0u);
  EXPECT_EQ(trace->events.size(), whole->events.size() - kernels);
  EXPECT_EQ(CountLayer(*trace, Layer::kRt), CountLayer(*whole, Layer::kRt));
}

TEST(BadInput, BundleChunkCutMidRecordKeepsTheRecordsBefore) {
  std::string dir = base::TempDir("bad_inputs_bundle_cut");
  fs::copy(base::SourceDir() + "/tests/fixtures/bundle/two_ranks", dir,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto whole = Open({dir});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  std::string file = dir + "/proc-node1-2002/events-000000.bin";
  fs::resize_file(file, fs::file_size(file) * 3 / 4);
  auto cut = Open({dir});
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_GE(cut->stats.Get("bundle_chunk_truncated"), 1);
  EXPECT_GT(cut->stats.Get("bundle_bytes_lost"), 0);
  EXPECT_TRUE(NoteMentions(*cut, file, "bundle_chunk_truncated"));
  // Rank 0's folder is whole; rank 1 kept what came before the cut.
  EXPECT_LT(cut->events.size(), whole->events.size());
  auto rank0_events = [](const model::Trace& trace) {
    size_t count = 0;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      count += trace.processes.rank[trace.events.process[i].value()] == 0;
    }
    return count;
  };
  size_t rank0_whole = rank0_events(*whole), rank0_cut = rank0_events(*cut);
  EXPECT_EQ(rank0_cut, rank0_whole);
  EXPECT_GT(cut->events.size(), rank0_cut);
}

// ---- wrong formats -----------------------------------------------------------------

TEST(BadInput, PngNamedJsonIsRefusedWithItsFirstBytes) {
  static const char kPng[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0";
  std::string png(kPng, sizeof(kPng) - 1);
  std::string path = WriteFile("png", "trace.json", png);
  auto trace = Open({path});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), base::StatusCode::kInvalidArgument);
  const std::string& message = trace.status().message();
  EXPECT_NE(message.find(path + ": binary data at offset 0 (bytes 89 50 4e 47 0d 0a 1a 0a)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("expected a Kineto JSON trace"), std::string::npos) << message;
}

TEST(BadInput, CsvIsReadAsALogOfUnknownFormatLineByLine) {
  std::string path = WriteFile("csv", "metrics.csv", "step,latency_ms\n1,12.5\n2,13.0\n");
  auto trace = Open({path});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->events.size(), 0u);
  ASSERT_EQ(trace->logs.size(), 3u);
  EXPECT_EQ(trace->stats.Get("log_line_unknown_format"), 3);
  EXPECT_EQ(trace->stats.Get("log_line_no_ts"), 3);
  EXPECT_EQ(trace->str(trace->logs.text[1]), "1,12.5");
}

// ---- missing tables or columns -----------------------------------------------------

TEST(BadInput, NsysWithoutKernelTableKeepsTheHostSide) {
  auto whole = Open({BuildNsysDb("with_kernels")});
  auto trace = Open({BuildNsysDb("no_kernels", "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;")});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("nsys_missing_table_CUPTI_ACTIVITY_KIND_KERNEL"), 1);
  EXPECT_EQ(CountLayer(*trace, Layer::kK) + CountLayer(*trace, Layer::kComm), 0u);
  size_t device_kernels = CountLayer(*whole, Layer::kK) + CountLayer(*whole, Layer::kComm);
  EXPECT_GT(device_kernels, 0u);
  EXPECT_EQ(trace->events.size(), whole->events.size() - device_kernels);
  EXPECT_EQ(CountLayer(*trace, Layer::kRt), CountLayer(*whole, Layer::kRt));
}

TEST(BadInput, NsysWithoutStringIdsKeepsEveryRowWithUnresolvedNames) {
  auto whole = Open({BuildNsysDb("with_strings")});
  auto trace = Open({BuildNsysDb("no_strings", "DROP TABLE StringIds;")});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("nsys_missing_table_StringIds"), 1);
  EXPECT_GT(trace->stats.Get("nsys_unresolved_string_id"), 0);
  EXPECT_EQ(trace->stats.entries().at("nsys_unresolved_string_id").severity, StatSeverity::kError);
  EXPECT_EQ(trace->events.size(), whole->events.size());
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_bound"),
            whole->stats.Get("reconstruct_kernels_bound"));
}

// ---- clock jumps -------------------------------------------------------------------

TEST(BadInput, BundleClockJumpIsCountedAndTimesStayOrdered) {
  std::string dir = base::TempDir("bad_inputs_clock_jump");
  fs::copy(base::SourceDir() + "/tests/fixtures/bundle/two_ranks", dir,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto before = Open({dir});
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  // A third clock pair where realtime stepped back by 5 s (an NTP step) after the others.
  std::string meta = ReadText(dir + "/meta.json");
  size_t pairs = meta.find("\"clock_pairs\"");
  ASSERT_NE(pairs, std::string::npos);
  size_t last_pair_end = meta.find(']', pairs);
  size_t last_open = meta.rfind('{', last_pair_end);
  std::string last_pair = meta.substr(last_open, meta.rfind('}', last_pair_end) + 1 - last_open);
  auto field = [&](std::string_view key) {
    size_t at = last_pair.find(std::string("\"") + std::string(key) + "\"");
    EXPECT_NE(at, std::string::npos) << key;
    return std::stoll(last_pair.substr(last_pair.find(':', at) + 1));
  };
  int64_t realtime = field("realtime_ns"), monotonic = field("monotonic_ns");
  std::string jump =
      ", {\"realtime_ns\": " + std::to_string(realtime + 1'000'000'000 - 5'000'000'000) +
      ", \"monotonic_ns\": " + std::to_string(monotonic + 1'000'000'000) + "}";
  meta.insert(meta.rfind('}', last_pair_end) + 1, jump);
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/meta.json", meta).ok());
  auto after = Open({dir});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GE(after->stats.Get("bundle_clock_jump"), 1);
  EXPECT_TRUE(NoteMentions(*after, dir + "/meta.json", "realtime clock jumped by -5000000000 ns"));
  ASSERT_EQ(after->events.size(), before->events.size());
  // The times use the clock after the step: all shifted by the same 5 s, none reordered.
  for (size_t i = 0; i < after->events.size(); ++i) {
    ASSERT_GE(after->events.dur_ns[i], 0);
  }
  int64_t shift = after->events.start_ns[0] - before->events.start_ns[0];
  EXPECT_NEAR(static_cast<double>(shift), -5e9, 1e6);
}

TEST(BadInput, KinetoEventsGoingBackInTimeGiveTheSameTrace) {
  // Kineto writes events in buffer order, not time order: reversed, the file must
  // give the same steps, bindings and trees.
  std::string text = KinetoText(8);
  std::string ordered_path = WriteFile("kineto_ordered", "ordered.json", text);
  size_t begin = text.find("[\n") + 2, end = text.find("  {\"ph\": \"i\"");
  std::vector<std::string> lines;
  std::stringstream body(text.substr(begin, end - begin));
  for (std::string line; std::getline(body, line);) lines.push_back(line + "\n");
  std::reverse(lines.begin(), lines.end());
  std::string reversed = text.substr(0, begin);
  for (const std::string& line : lines) reversed += line;
  reversed += text.substr(end);
  std::string reversed_path = WriteFile("kineto_reversed", "reversed.json", reversed);
  auto a = Open({ordered_path});
  auto b = Open({reversed_path});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->events.size(), a->events.size());
  EXPECT_EQ(b->stats.Get("reconstruct_steps"), 8);
  EXPECT_EQ(b->stats.Get("reconstruct_kernels_bound"), 8);
  EXPECT_EQ(b->stats.Get("reconstruct_nodes"), a->stats.Get("reconstruct_nodes"));
  std::vector<int64_t> starts_a(a->events.start_ns.begin(), a->events.start_ns.end());
  std::vector<int64_t> starts_b(b->events.start_ns.begin(), b->events.start_ns.end());
  std::sort(starts_a.begin(), starts_a.end());
  std::sort(starts_b.begin(), starts_b.end());
  EXPECT_EQ(starts_a, starts_b);
}

// ---- ranges, correlations, kernels -------------------------------------------------

TEST(BadInput, KinetoUnmatchedBeginEndAreCountedAndKept) {
  std::string extra =
      "  {\"ph\": \"B\", \"cat\": \"user_annotation\", \"name\": \"never_closed\", \"pid\": 1, "
      "\"tid\": 1, \"ts\": 2950.000},\n"
      "  {\"ph\": \"E\", \"cat\": \"user_annotation\", \"name\": \"stray_end\", \"pid\": 1, "
      "\"tid\": 1, \"ts\": 1050.000},\n";
  std::string path = WriteFile("kineto_push_pop", "trace.json", KinetoText(3, extra));
  auto trace = Open({path});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("reconstruct_unclosed_range"), 1);
  EXPECT_EQ(trace->stats.Get("reconstruct_unmatched_pop"), 1);
  int64_t open = FindEvent(*trace, "never_closed");
  ASSERT_GE(open, 0);
  EXPECT_TRUE(trace->events.flags[open] & model::kFlagTruncated);
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_bound"), 3);
}

TEST(BadInput, KinetoDuplicateCorrelationIdsBindToTheClosestLaunch) {
  // Step 1's launch and kernel reuse step 0's correlation id (100).
  std::string text = KinetoText(2);
  size_t second = text.find("\"correlation\": 101");
  text.replace(second, 18, "\"correlation\": 100");
  second = text.find("\"correlation\": 101");
  text.replace(second, 18, "\"correlation\": 100");
  auto trace = Open({WriteFile("kineto_dup_corr", "trace.json", text)});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("reconstruct_duplicate_correlation"), 1);
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_bound"), 2);
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_unbound"), 0);
  // Each kernel hangs under the launch of its own step.
  const model::NodeTable& nodes = trace->nodes;
  for (std::string_view kernel : {"gemm_0", "gemm_1"}) {
    int64_t row = FindEvent(*trace, kernel);
    ASSERT_GE(row, 0);
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (nodes.event[n].value() != static_cast<uint32_t>(row)) continue;
      int64_t launch = nodes.event[nodes.parent[n].value()].value();
      EXPECT_EQ(trace->str(trace->events.name[launch]), "cudaLaunchKernel");
      EXPECT_LT(trace->events.start_ns[launch], trace->events.start_ns[row]);
      EXPECT_GT(trace->events.start_ns[launch], trace->events.start_ns[row] - 1'000'000);
    }
  }
}

TEST(BadInput, KinetoKernelWithoutLaunchIsCountedAndKept) {
  std::string extra =
      "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"orphan_kernel\", \"pid\": 0, \"tid\": "
      "7, \"ts\": 1500.000, \"dur\": 20.000, \"args\": {\"correlation\": 777, \"device\": 0, "
      "\"stream\": 7}},\n";
  auto trace = Open({WriteFile("kineto_orphan", "trace.json", KinetoText(3, extra))});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_bound"), 3);
  EXPECT_EQ(trace->stats.Get("reconstruct_kernels_unbound"), 1);
  EXPECT_GE(FindEvent(*trace, "orphan_kernel"), 0);
}

// ---- logs, empty inputs ------------------------------------------------------------

TEST(BadInput, LogOfUnknownFormatKeepsEveryLine) {
  std::string text =
      "<<< custom server banner >>>\n"
      "2025-03-01 10:00:00 plain timestamped line\n"
      "\x1b[32mcolored\x1b[0m line without a time\n"
      "last line cut mid-wo";
  auto trace = Open({WriteFile("log_unknown", "server.out", text)});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->logs.size(), 4u);
  EXPECT_GE(trace->stats.Get("log_line_unknown_format"), 2);
  EXPECT_EQ(trace->str(trace->logs.text[3]), "last line cut mid-wo");
}

TEST(BadInput, BundleWithOnlyMetaJsonSaysNothingWasRecorded) {
  std::string dir = base::TempDir("bad_inputs_empty_bundle");
  std::string meta = ReadText(base::SourceDir() + "/tests/fixtures/bundle/two_ranks/meta.json");
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/meta.json", meta).ok());
  auto trace = Open({dir});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->events.size(), 0u);
  EXPECT_EQ(trace->stats.Get("bundle_no_process_data"), 1);
  EXPECT_EQ(trace->stats.entries().at("bundle_no_process_data").severity, StatSeverity::kDataLoss);
  EXPECT_TRUE(NoteMentions(*trace, dir, "no proc-* folder"));
}

TEST(BadInput, EmptyFilesAreRefusedByName) {
  for (const char* name : {"trace.json", "report.sqlite", "server.log", "trace.json.gz"}) {
    std::string path = WriteFile("empty", name, "");
    auto trace = Open({path});
    ASSERT_FALSE(trace.ok()) << name;
    EXPECT_NE(trace.status().message().find(path + ": empty file"), std::string::npos)
        << trace.status().ToString();
  }
}

}  // namespace
}  // namespace teller
