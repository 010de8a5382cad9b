#include "import/log_line_parser.h"

#include <gtest/gtest.h>

namespace teller::import {
namespace {

using model::LogLevel;

constexpr int64_t kSecond = 1'000'000'000;

// 2025-05-12 10:23:45 UTC, computed with Python's datetime.
constexpr int64_t kMay12At102345 = 1747045425 * kSecond;

LogParseContext Context(int year = 2025, int offset_minutes = 0) {
  LogParseContext context;
  context.year = year;
  context.utc_offset_minutes = offset_minutes;
  return context;
}

TEST(LogLineParser, CivilDaysAndYears) {
  EXPECT_EQ(DaysFromCivil(1970, 1, 1), 0);
  EXPECT_EQ(DaysFromCivil(2000, 3, 1), 11017);
  EXPECT_EQ(DaysFromCivil(2024, 2, 29), 19782);
  EXPECT_EQ(YearOfTimeNs(0), 1970);
  EXPECT_EQ(YearOfTimeNs(kMay12At102345), 2025);
  EXPECT_EQ(YearOfTimeNs(DaysFromCivil(2024, 12, 31) * 86400 * kSecond + 86399 * kSecond), 2024);
  EXPECT_EQ(YearOfTimeNs(-1), 1969);
}

TEST(LogLineParser, VllmV1WithProcessPrefix) {
  ParsedLogLine line = ParseLogLine(
      "(EngineCore_0 pid=1234) INFO 05-12 10:23:45 [core.py:58] Initializing a V1 LLM engine",
      Context());
  EXPECT_EQ(line.format, LogFormat::kVllm);
  ASSERT_TRUE(line.has_ts);
  EXPECT_TRUE(line.year_inferred);
  EXPECT_EQ(line.ts_ns, kMay12At102345);
  EXPECT_EQ(line.level, LogLevel::kInfo);
  EXPECT_EQ(line.pid, 1234);
  EXPECT_EQ(line.rank, -1);
  EXPECT_EQ(line.process_label, "EngineCore_0");
  EXPECT_EQ(line.message, "Initializing a V1 LLM engine");

  line = ParseLogLine("(VllmWorker rank=1 pid=4567) WARNING 05-12 10:23:45 [x.py:1] hi", Context());
  EXPECT_EQ(line.level, LogLevel::kWarning);
  EXPECT_EQ(line.pid, 4567);
  EXPECT_EQ(line.rank, 1);
  EXPECT_EQ(line.process_label, "VllmWorker rank=1");

  line = ParseLogLine("(Worker_TP3 pid=99) INFO 05-12 10:23:45 [x.py:1] hi", Context());
  EXPECT_EQ(line.rank, 3);
  line = ParseLogLine("(Worker_PP1_TP3 pid=99) INFO 05-12 10:23:45 [x.py:1] hi", Context());
  EXPECT_EQ(line.rank, -1);  // not a global rank
}

TEST(LogLineParser, VllmTimezoneOffset) {
  // Local 10:23:45 at UTC+08:00 is 02:23:45 UTC.
  ParsedLogLine line = ParseLogLine("INFO 05-12 10:23:45 [core.py:58] x", Context(2025, 480));
  EXPECT_EQ(line.ts_ns, kMay12At102345 - 8 * 3600 * kSecond);
}

TEST(LogLineParser, VllmOldFileFormatAndFraction) {
  ParsedLogLine line = ParseLogLine("ERROR 05-12 10:23:45.250 llm_engine.py:72] boom", Context());
  EXPECT_EQ(line.format, LogFormat::kVllm);
  EXPECT_EQ(line.level, LogLevel::kError);
  EXPECT_EQ(line.ts_ns, kMay12At102345 + 250'000'000);
  EXPECT_EQ(line.message, "boom");
}

TEST(LogLineParser, SglangRankTags) {
  ParsedLogLine line =
      ParseLogLine("[2025-05-12 10:23:45 TP3] Decode batch. #running-req: 3", Context(1999));
  EXPECT_EQ(line.format, LogFormat::kSglang);
  EXPECT_FALSE(line.year_inferred);
  EXPECT_EQ(line.ts_ns, kMay12At102345);
  EXPECT_EQ(line.rank, 3);
  EXPECT_EQ(line.level, LogLevel::kInfo);
  EXPECT_EQ(line.process_label, "TP3");
  EXPECT_EQ(line.message, "Decode batch. #running-req: 3");

  line = ParseLogLine("[2025-05-12 10:23:45 PP1 TP3] x", Context());
  EXPECT_EQ(line.rank, -1);
  line = ParseLogLine("[2025-05-12 10:23:45 TP3 EP3] x", Context());
  EXPECT_EQ(line.rank, 3);
}

TEST(LogLineParser, NcclInfoWarnAndTimestampedWarn) {
  ParsedLogLine line =
      ParseLogLine("node-a:12345:12399 [2] NCCL INFO Channel 00/02 :    0   1", Context());
  EXPECT_EQ(line.format, LogFormat::kNccl);
  EXPECT_FALSE(line.has_ts);
  EXPECT_EQ(line.level, LogLevel::kInfo);
  EXPECT_EQ(line.pid, 12345);
  EXPECT_EQ(line.cuda_device, 2);
  EXPECT_EQ(line.rank, -1);
  EXPECT_EQ(line.message, "Channel 00/02 :    0   1");

  line = ParseLogLine(
      "[2025-05-12 10:23:45] node-a:7:8 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : error 12",
      Context());
  EXPECT_EQ(line.format, LogFormat::kNccl);
  EXPECT_EQ(line.ts_ns, kMay12At102345);
  EXPECT_EQ(line.level, LogLevel::kWarning);
  EXPECT_EQ(line.pid, 7);
  EXPECT_EQ(line.message, "NET/IB : error 12");
}

TEST(LogLineParser, TorchWatchdog) {
  ParsedLogLine line = ParseLogLine(
      "[rank4]:[E512 10:23:45.715298746 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, Timeout(ms)=600000)",
      Context());
  EXPECT_EQ(line.format, LogFormat::kTorch);
  EXPECT_EQ(line.level, LogLevel::kError);
  EXPECT_EQ(line.ts_ns, kMay12At102345 + 715298746);
  EXPECT_EQ(line.rank, 4);

  line = ParseLogLine("[E ProcessGroupNCCL.cpp:737] [PG 1 Rank 2] Watchdog caught", Context());
  EXPECT_EQ(line.format, LogFormat::kTorch);
  EXPECT_FALSE(line.has_ts);
  EXPECT_EQ(line.rank, 2);
  EXPECT_EQ(line.message, "[PG 1 Rank 2] Watchdog caught");

  line = ParseLogLine("W0512 10:23:45.000001 4242 socket.cpp:12] slow", Context());
  EXPECT_EQ(line.format, LogFormat::kTorch);
  EXPECT_EQ(line.level, LogLevel::kWarning);
  EXPECT_EQ(line.ts_ns, kMay12At102345 + 1000);
}

TEST(LogLineParser, TensorRtLlmPrefixes) {
  ParsedLogLine line =
      ParseLogLine("[TensorRT-LLM][ERROR] Assertion failed: x (file.cpp:12)", Context());
  EXPECT_EQ(line.format, LogFormat::kTensorRtLlm);
  EXPECT_EQ(line.level, LogLevel::kError);
  EXPECT_FALSE(line.has_ts);
  EXPECT_EQ(line.message, "Assertion failed: x (file.cpp:12)");

  line = ParseLogLine("[05/12/2025-10:23:45] [TRT-LLM] [W] Found pynvml==11.5.0", Context());
  EXPECT_EQ(line.format, LogFormat::kTensorRtLlm);
  EXPECT_EQ(line.level, LogLevel::kWarning);
  EXPECT_EQ(line.ts_ns, kMay12At102345);
  EXPECT_EQ(line.message, "Found pynvml==11.5.0");

  line = ParseLogLine("[TensorRT-LLM][NOTALEVEL] x", Context());
  EXPECT_NE(line.format, LogFormat::kTensorRtLlm);
}

TEST(LogLineParser, KernelRingBuffer) {
  ParsedLogLine line = ParseLogLine(
      "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
      Context());
  EXPECT_EQ(line.format, LogFormat::kKernel);
  EXPECT_FALSE(line.has_ts);  // seconds since boot are no wall clock
  EXPECT_EQ(line.message, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.");
  line = ParseLogLine("[12.5 x] not a ring line", Context());
  EXPECT_NE(line.format, LogFormat::kKernel);
}

TEST(LogLineParser, UvicornAccessAndPythonPrefix) {
  ParsedLogLine line = ParseLogLine(
      "INFO:     127.0.0.1:50000 - \"POST /v1/completions HTTP/1.1\" 200 OK", Context());
  EXPECT_EQ(line.format, LogFormat::kHttpAccess);
  EXPECT_EQ(line.level, LogLevel::kInfo);
  EXPECT_FALSE(line.has_ts);
  line = ParseLogLine("INFO:     Started server process [1234]", Context());
  EXPECT_EQ(line.format, LogFormat::kPlain);
  line = ParseLogLine("WARNING:root:careful", Context());
  EXPECT_EQ(line.level, LogLevel::kWarning);
  EXPECT_EQ(line.message, "careful");
}

TEST(LogLineParser, PlainTimestamps) {
  ParsedLogLine line = ParseLogLine("2025-05-12T10:23:45.5Z started", Context());
  EXPECT_EQ(line.format, LogFormat::kPlain);
  EXPECT_EQ(line.ts_ns, kMay12At102345 + 500'000'000);
  EXPECT_EQ(line.level, LogLevel::kUnknown);
  // An explicit zone wins over the context offset.
  line = ParseLogLine("2025-05-12T12:23:45+02:00 ERROR x", Context(2025, 480));
  EXPECT_EQ(line.ts_ns, kMay12At102345);
  EXPECT_EQ(line.level, LogLevel::kError);
  EXPECT_EQ(line.message, "x");
  line = ParseLogLine("2025-05-12 10:23:45,123 - vllm - WARNING - msg", Context());
  EXPECT_EQ(line.ts_ns, kMay12At102345 + 123'000'000);
  EXPECT_EQ(line.level, LogLevel::kWarning);
  EXPECT_EQ(line.message, "msg");
  line = ParseLogLine("May 12 10:23:45 host prog[77]: INFO hello", Context(2025));
  EXPECT_TRUE(line.year_inferred);
  EXPECT_EQ(line.ts_ns, kMay12At102345);
  EXPECT_EQ(line.pid, 77);
  EXPECT_EQ(line.level, LogLevel::kInfo);
  line = ParseLogLine("May  2 10:23:45 host kernel: x", Context(2025));
  EXPECT_EQ(line.ts_ns, kMay12At102345 - 10 * 86400 * kSecond);
}

TEST(LogLineParser, RejectsNearMisses) {
  for (std::string_view text :
       {"INFO 13-40 10:23:45 [x.py:1] bad month", "[2025-05-12 25:00:00] bad hour",
        "host:12:x [0] NCCL INFO bad tid", "2025-05-12 hello", "Information: nothing", "[E"}) {
    ParsedLogLine line = ParseLogLine(text, Context());
    EXPECT_FALSE(line.has_ts) << text;
    EXPECT_EQ(line.format, LogFormat::kUnknown) << text;
  }
}

TEST(LogLineParser, Tracebacks) {
  ParsedLogLine line = ParseLogLine("Traceback (most recent call last):", Context());
  EXPECT_EQ(line.format, LogFormat::kTraceback);
  EXPECT_TRUE(line.traceback_head);
  EXPECT_EQ(line.level, LogLevel::kError);
  EXPECT_TRUE(IsTracebackFrameLine("  File \"x.py\", line 1, in <module>"));
  EXPECT_TRUE(IsTracebackFrameLine("frame #3: c10::Error::Error() + 0x96"));
  EXPECT_FALSE(IsTracebackFrameLine("INFO hello"));
  EXPECT_TRUE(IsExceptionLine("ValueError: bad"));
  EXPECT_TRUE(IsExceptionLine("torch.OutOfMemoryError: CUDA out of memory."));
  EXPECT_TRUE(IsExceptionLine("KeyboardInterrupt"));
  EXPECT_TRUE(IsExceptionLine("c10.DistBackend: x"));
  EXPECT_FALSE(IsExceptionLine("hello world"));
  EXPECT_FALSE(IsExceptionLine("note: something"));
  EXPECT_FALSE(IsExceptionLine("serve_fsdp.py:88 - queued req-0 on rank 0"));
}

TEST(LogLineParser, RequestIds) {
  EXPECT_EQ(FindRequestId("Added request cmpl-8b3f2a1c9d4e-0."), "cmpl-8b3f2a1c9d4e-0");
  EXPECT_EQ(FindRequestId("x chatcmpl-0f1e2d3c4b5a is preempted"), "chatcmpl-0f1e2d3c4b5a");
  EXPECT_EQ(FindRequestId("Finish: rid='6b0c2f7e', out=1"), "6b0c2f7e");
  EXPECT_EQ(FindRequestId("Finish: rid=None"), "");
  EXPECT_EQ(FindRequestId("request_id=req-42a7."), "req-42a7");
  EXPECT_EQ(FindRequestId("Added request 0."), "0");
  EXPECT_EQ(FindRequestId("Aborted request 1f3e-77."), "1f3e-77");
  EXPECT_EQ(FindRequestId("no id here: pid=12, grid=3"), "");
  EXPECT_EQ(FindRequestId("mycmpl-abcdef is not one"), "");
}

TEST(LogLineParser, SanitizeKeepsCleanTextAndFixesTheRest) {
  std::string scratch;
  uint8_t flags;
  EXPECT_EQ(SanitizeLogLine("plain\ttext\r", &scratch, &flags), "plain\ttext");
  EXPECT_EQ(flags, kSanitizeNone);
  EXPECT_EQ(SanitizeLogLine("\x1b[1;36m(W pid=1)\x1b[0;0m INFO", &scratch, &flags),
            "(W pid=1) INFO");
  EXPECT_EQ(flags, kSanitizeAnsiStripped);
  EXPECT_EQ(SanitizeLogLine(" 10%|#\r 50%|##", &scratch, &flags), " 50%|##");
  EXPECT_EQ(flags, kSanitizeCarriageReturn);
  EXPECT_EQ(SanitizeLogLine("caf\xc3\xa9 \xe2\x9c\x93", &scratch, &flags),
            "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(flags, kSanitizeNone);
  EXPECT_EQ(SanitizeLogLine(std::string_view("a\0b\xff\xc3", 5), &scratch, &flags),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(flags, kSanitizeInvalidBytes);
  // Overlong encodings and surrogates are invalid.
  EXPECT_EQ(SanitizeLogLine("\xc0\xaf\xed\xa0\x80", &scratch, &flags).find('\xc0'),
            std::string_view::npos);
}

}  // namespace
}  // namespace teller::import
