#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/importer.h"
#include "import/log_line_parser.h"
#include "import/log_testing.h"

namespace teller::import {
namespace {

using model::LogLevel;

constexpr int64_t kSecond = 1'000'000'000;

std::string FixturePath(const std::string& name) {
  return base::SourceDir() + "/tests/fixtures/logs/" + name;
}

std::string WriteTemp(const std::string& test, const std::string& name, std::string_view text) {
  std::string path = base::TempDir(test) + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  return path;
}

// The rows of a trace's logs as the golden .expected TSV.
std::string LogsAsTsv(const model::Trace& trace) {
  std::ostringstream out;
  out << "line\tts_ns\tlevel\tpid\trank\trequest\n";
  const model::LogTable& logs = trace.logs;
  for (size_t i = 0; i < logs.size(); ++i) {
    out << logs.line_number[i] << '\t' << logs.ts_ns[i] << '\t' << LogLevelName(logs.level[i])
        << '\t' << logs.os_pid[i] << '\t' << logs.rank[i] << '\t' << trace.str(logs.request[i])
        << '\n';
  }
  return out.str();
}

void ExpectGolden(const std::string& fixture, int year_hint) {
  model::Trace trace;
  ImportOptions options;
  options.year_hint = year_hint;
  base::Status status = ImportLogFile(FixturePath(fixture), options, &trace);
  ASSERT_TRUE(status.ok()) << status.ToString();
  base::StatusOr<std::string> expected = base::ReadFile(FixturePath(fixture + ".expected"));
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  std::string actual = LogsAsTsv(trace);
  std::istringstream want(*expected), got(actual);
  std::string want_line, got_line;
  int row = 0;
  while (std::getline(want, want_line)) {
    std::getline(got, got_line);
    EXPECT_EQ(got_line, want_line) << fixture << " row " << row;
    ++row;
  }
  EXPECT_FALSE(std::getline(got, got_line)) << fixture << ": extra row " << got_line;
  // Every row has a template, its source and the kFile stream.
  for (size_t i = 0; i < trace.logs.size(); ++i) {
    EXPECT_TRUE(trace.logs.template_id[i].valid());
    EXPECT_LT(trace.logs.template_id[i].value(), trace.templates.size());
    EXPECT_EQ(trace.str(trace.logs.source[i]), FixturePath(fixture));
    EXPECT_EQ(trace.logs.stream[i], model::LogStream::kFile);
  }
}

TEST(LogImport, GoldenVllmV0) { ExpectGolden("vllm_v0.log", 2024); }
TEST(LogImport, GoldenVllmV1) { ExpectGolden("vllm_v1.log", 2025); }
TEST(LogImport, GoldenSglang) { ExpectGolden("sglang.log", 0); }
TEST(LogImport, GoldenNccl) { ExpectGolden("nccl.log", 0); }
TEST(LogImport, GoldenTraceback) { ExpectGolden("traceback.log", 0); }
TEST(LogImport, GoldenPlain) { ExpectGolden("plain.log", 0); }

TEST(LogImport, CountersNameWhatHappened) {
  model::Trace trace;
  ASSERT_TRUE(ImportLogFile(FixturePath("traceback.log"), {}, &trace).ok());
  EXPECT_EQ(trace.stats.Get("log_lines"), 19);
  EXPECT_EQ(trace.stats.Get("log_line_traceback_continuation"), 14);
  EXPECT_EQ(trace.stats.Get("log_line_unknown_format"), 1);
  // The bare traceback heads and the line after the crash took the previous ts.
  EXPECT_EQ(trace.stats.Get("log_line_ts_inherited"), 3);
  EXPECT_EQ(trace.meta.format, model::TraceFormat::kLogs);
  ASSERT_EQ(trace.meta.sources.size(), 1u);

  model::Trace nccl;
  ASSERT_TRUE(ImportLogFile(FixturePath("nccl.log"), {}, &nccl).ok());
  EXPECT_EQ(nccl.stats.Get("log_line_no_ts"), 6);  // until the first timestamped line
  EXPECT_EQ(nccl.stats.Get("log_line_blank"), 1);
}

TEST(LogImport, TracebackLinesStaySeparateRowsWithTheHeadsTsAndLevel) {
  std::string path =
      WriteTemp("log_tb", "tb.log",
                "[2025-03-01 10:00:20 TP0] Scheduler hit an exception: Traceback "
                "(most recent call last):\n"
                "  File \"s.py\", line 1, in run\n"
                "    loop()\n"
                "RuntimeError: CUDA error: an illegal memory access was encountered\n"
                "CUDA kernel errors might be asynchronously reported at some other "
                "API call.\n"
                "[2025-03-01 10:00:21 TP0] Decode batch. #running-req: 1\n"
                "  indented but no traceback open\n");
  model::Trace trace;
  ASSERT_TRUE(ImportLogFile(path, {}, &trace).ok());
  ASSERT_EQ(trace.logs.size(), 7u);
  const int64_t head_ts = trace.logs.ts_ns[0];
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(trace.logs.ts_ns[i], head_ts) << i;
    EXPECT_EQ(trace.logs.level[i], LogLevel::kError) << i;
    EXPECT_EQ(trace.logs.rank[i], 0) << i;
  }
  EXPECT_EQ(trace.logs.level[5], LogLevel::kInfo);
  EXPECT_EQ(trace.logs.ts_ns[5], head_ts + kSecond);
  EXPECT_EQ(trace.logs.level[6], LogLevel::kUnknown);  // not part of a traceback
  EXPECT_EQ(trace.logs.ts_ns[6], head_ts + kSecond);   // inherited
  EXPECT_EQ(trace.stats.Get("log_line_traceback_continuation"), 4);
}

TEST(LogImport, YearFromHintFromEventsFromRolloverAndCurrent) {
  const std::string text =
      "INFO 12-31 23:59:59 [a.py:1] last of the year\n"
      "INFO 01-01 00:00:01 [a.py:1] first of the next\n";
  std::string path = WriteTemp("log_year", "year.log", text);
  const int64_t dec31_2023 = (model::TimeNs{1704067199}) * kSecond;  // 2023-12-31 23:59:59 UTC

  model::Trace hinted;
  ImportOptions options;
  options.year_hint = 2023;
  ASSERT_TRUE(ImportLogFile(path, options, &hinted).ok());
  EXPECT_EQ(hinted.logs.ts_ns[0], dec31_2023);
  EXPECT_EQ(hinted.logs.ts_ns[1], dec31_2023 + 2 * kSecond);  // rolled over into 2024
  EXPECT_EQ(hinted.stats.Get("log_year_rollover"), 1);

  // From the trace's earliest event (2023-06-01 UTC).
  model::Trace with_events;
  with_events.events.Append(model::Layer::kK, model::EventPhase::kComplete,
                            base::StringPool::kEmpty, model::ProcessIndex(0), model::ThreadIndex(0),
                            int64_t{1685577600} * kSecond, 10);
  ASSERT_TRUE(ImportLogFile(path, {}, &with_events).ok());
  EXPECT_EQ(with_events.logs.ts_ns[0], dec31_2023);

  // UTC offset: 23:59:59 at UTC+01:00 is 22:59:59 UTC.
  model::Trace shifted;
  options.utc_offset_minutes = 60;
  ASSERT_TRUE(ImportLogFile(path, options, &shifted).ok());
  EXPECT_EQ(shifted.logs.ts_ns[0], dec31_2023 - 3600 * kSecond);

  // Nothing to go by: the current year.
  model::Trace bare;
  ASSERT_TRUE(ImportLogFile(path, {}, &bare).ok());
  auto now = std::chrono::system_clock::now().time_since_epoch();
  int this_year = YearOfTimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  EXPECT_EQ(YearOfTimeNs(bare.logs.ts_ns[0]), this_year);
}

TEST(LogImport, GzipGivesTheSameRows) {
  base::StatusOr<std::string> plain = base::ReadFile(FixturePath("vllm_v1.log"));
  ASSERT_TRUE(plain.ok());
  std::string path = base::TempDir("log_gz") + "/vllm_v1.log.gz";
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, plain->data(), static_cast<unsigned>(plain->size()));
  gzclose(gz);
  ImportOptions options;
  options.year_hint = 2025;
  model::Trace from_plain, from_gz;
  ASSERT_TRUE(ImportLogFile(FixturePath("vllm_v1.log"), options, &from_plain).ok());
  ASSERT_TRUE(ImportLogFile(path, options, &from_gz).ok());
  EXPECT_EQ(LogsAsTsv(from_plain), LogsAsTsv(from_gz));
}

TEST(LogImport, MissingFileIsAStatusNamingIt) {
  model::Trace trace;
  base::Status status = ImportLogFile("/nonexistent/teller.log", {}, &trace);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/nonexistent/teller.log"), std::string::npos);
}

TEST(LogImport, TwoFilesShareTemplatesAndAreDeterministic) {
  ImportOptions options;
  options.year_hint = 2025;
  model::Trace once, twice;
  ASSERT_TRUE(ImportLogFile(FixturePath("sglang.log"), options, &once).ok());
  ASSERT_TRUE(ImportLogFile(FixturePath("sglang.log"), options, &twice).ok());
  ASSERT_TRUE(ImportLogFile(FixturePath("sglang.log"), options, &twice).ok());
  const size_t n = once.logs.size();
  ASSERT_EQ(twice.logs.size(), 2 * n);
  EXPECT_EQ(once.templates.size(), twice.templates.size());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(once.logs.template_id[i], twice.logs.template_id[i]);
    EXPECT_EQ(twice.logs.template_id[i], twice.logs.template_id[n + i]);
  }
  for (size_t t = 0; t < once.templates.size(); ++t) {
    EXPECT_EQ(once.str(once.templates.pattern[t]), twice.str(twice.templates.pattern[t]));
    EXPECT_EQ(2 * once.templates.count[t], twice.templates.count[t]);
  }
  // The two SGLang decode lines share one template; prefill has its own.
  EXPECT_EQ(once.logs.template_id[5], once.logs.template_id[6]);
  EXPECT_NE(once.logs.template_id[4], once.logs.template_id[5]);
  EXPECT_EQ(once.str(once.templates.pattern[once.logs.template_id[5].value()]),
            "Decode batch. #running-req: <*>, #token: <*>, token usage: <*>, gen throughput "
            "(token/s): <*>, #queue-req: <*>");
}

TEST(LogImport, ParseLogsOfTraceFillsBundleRows) {
  model::Trace trace;
  auto add = [&trace](int64_t ts, std::string_view text) {
    trace.AppendLog(ts, model::ProcessIndex::Invalid(), 4242, -1, LogLevel::kUnknown,
                    model::LogStream::kStderr, base::StringPool::kEmpty,
                    model::TemplateId::Invalid(), trace.strings.Intern(text),
                    trace.strings.Intern("logs/4242.jsonl"), trace.logs.size() + 1);
  };
  const int64_t t0 = int64_t{1747045425} * kSecond;
  add(t0, "INFO 05-12 10:23:40 [engine.py:1] Added request cmpl-8b3f2a1c9d4e-0.");
  add(t0 + 1000, "Traceback (most recent call last):");
  add(t0 + 2000, "  File \"x.py\", line 1, in <module>");
  add(t0 + 3000, "ValueError: nope");
  add(INT64_MIN, "[2025-05-12 10:23:46 TP1] Decode batch. #running-req: 1");
  // An already-parsed row is left alone.
  trace.AppendLog(t0, model::ProcessIndex::Invalid(), 1, 0, LogLevel::kDebug,
                  model::LogStream::kFile, base::StringPool::kEmpty, model::TemplateId(0),
                  trace.strings.Intern("INFO 05-12 10:23:40 [x.py:1] kept"),
                  base::StringPool::kEmpty, 1);
  trace.templates.pattern.push_back(trace.strings.Intern("kept"));
  trace.templates.count.push_back(1);

  ParseLogsOfTrace({}, &trace);
  const model::LogTable& logs = trace.logs;
  EXPECT_EQ(logs.ts_ns[0], t0);  // the capture time wins over the printed one
  EXPECT_EQ(logs.level[0], LogLevel::kInfo);
  EXPECT_EQ(trace.str(logs.request[0]), "cmpl-8b3f2a1c9d4e-0");
  for (size_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(logs.level[i], LogLevel::kError) << i;
    EXPECT_EQ(logs.ts_ns[i], t0 + 1000 * static_cast<int64_t>(i)) << i;
  }
  EXPECT_EQ(logs.ts_ns[4], t0 + kSecond);  // filled from the text
  EXPECT_EQ(logs.rank[4], 1);
  EXPECT_EQ(logs.os_pid[4], 4242);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(logs.template_id[i].valid());
    EXPECT_NE(logs.template_id[i], model::TemplateId(0)) << i;  // "kept" is not theirs
  }
  EXPECT_EQ(logs.level[5], LogLevel::kDebug);
  EXPECT_EQ(trace.templates.count[0], 1);
  EXPECT_EQ(trace.stats.Get("log_line_traceback_continuation"), 2);
}

// Counts lines the way the importer splits them: '\n' ends a line; a last line
// without one still counts.
size_t CountLines(std::string_view text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (!text.empty() && text.back() != '\n') ++lines;
  return lines;
}

bool IsValidUtf8WithoutControls(std::string_view text) {
  std::string scratch;
  uint8_t flags;
  std::string_view again = SanitizeLogLine(text, &scratch, &flags);
  return flags == kSanitizeNone && again == text;
}

TEST(LogImport, RandomBytesNeverCrashAndEveryLineIsKept) {
  std::mt19937 random(1234);
  const std::string pieces[] = {"INFO 05-12 10:23:45 [a.py:1] ",
                                "(EngineCore_0 pid=",
                                "[2025-",
                                "Traceback (most recent call last):",
                                "  File ",
                                "\x1b[1;36m",
                                "node:1:2 [0] NCCL WARN ",
                                "cmpl-",
                                "rid=",
                                "\r",
                                "\xff\xfe",
                                "\xe2\x9c",
                                "[rank",
                                "INFO:",
                                "Nov 29 "};
  for (int round = 0; round < 40; ++round) {
    std::string text;
    size_t size = random() % 4000;
    while (text.size() < size) {
      uint32_t pick = random() % 10;
      if (pick < 3) {
        text += pieces[random() % (sizeof(pieces) / sizeof(pieces[0]))];
      } else if (pick < 4) {
        text += '\n';
      } else {
        text += static_cast<char>(random() % 256);
      }
    }
    std::string path = WriteTemp("log_random", "random.log", text);
    model::Trace trace;
    ASSERT_TRUE(ImportLogFile(path, {}, &trace).ok());
    ASSERT_EQ(trace.logs.size(), CountLines(text)) << "round " << round;
    for (size_t i = 0; i < trace.logs.size(); ++i) {
      EXPECT_EQ(trace.logs.line_number[i], static_cast<int64_t>(i + 1));
      EXPECT_TRUE(IsValidUtf8WithoutControls(trace.str(trace.logs.text[i])));
      EXPECT_TRUE(trace.logs.template_id[i].valid());
    }
    EXPECT_EQ(trace.stats.Get("log_lines"), static_cast<int64_t>(trace.logs.size()));
  }
}

TEST(LogImport, VeryLongLinesAreCappedAndCounted) {
  std::string text = "INFO 05-12 10:23:45 [a.py:1] " + std::string(300000, 'x') + "\nnext\n" +
                     std::string(70000, 'y') + "\n" + std::string(3 << 20, 'z');
  std::string path = WriteTemp("log_long", "long.log", text);
  model::Trace trace;
  ImportOptions options;
  options.year_hint = 2025;
  ASSERT_TRUE(ImportLogFile(path, options, &trace).ok());
  ASSERT_EQ(trace.logs.size(), 4u);
  EXPECT_EQ(trace.str(trace.logs.text[0]).size(), size_t{1} << 16);
  EXPECT_EQ(trace.logs.level[0], LogLevel::kInfo);
  EXPECT_EQ(trace.str(trace.logs.text[1]), "next");
  EXPECT_EQ(trace.logs.line_number[1], 2);
  EXPECT_EQ(trace.logs.line_number[3], 4);
  EXPECT_EQ(trace.stats.Get("log_line_truncated"), 3);
}

TEST(LogImport, MixedEngineLinesGiveOneTemplateEach) {
  // Four line kinds in turn, each with changing numbers: every line lands, and the miner
  // gives one template per kind. The rate is measured by bench/log_ingest_bench.
  std::string text;
  constexpr int kLines = 20000;
  for (int i = 0; i < kLines; ++i) text += testing::MixedEngineLogLine(i);
  std::string path = WriteTemp("log_mixed", "mixed.log", text);
  model::Trace trace;
  ImportOptions options;
  options.year_hint = 2025;
  ASSERT_TRUE(ImportLogFile(path, options, &trace).ok());
  ASSERT_EQ(trace.logs.size(), static_cast<size_t>(kLines));
  EXPECT_EQ(trace.templates.size(), 4u);
  std::vector<int> lines_of_template(trace.templates.size(), 0);
  for (size_t i = 0; i < trace.logs.size(); ++i)
    ++lines_of_template[trace.logs.template_id[i].value()];
  for (int count : lines_of_template) EXPECT_EQ(count, kLines / 4);
}

}  // namespace
}  // namespace teller::import
