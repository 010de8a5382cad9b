#include "diagnose/log_reading.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fmt/format.h"

#include "base/file_util.h"
#include "base/testing.h"
#include "diagnose/diagnosis.h"
#include "diagnose/diagnosis_json.h"
#include "diagnose/wording.h"
#include "signatures/built_in_catalog.h"
#include "store/open_trace.h"

namespace teller::diagnose {
namespace {

using model::FaultCategory;

struct LogCase {
  model::Trace trace;
  std::vector<LogEvidence> events;
};

LogCase ReadLog(const std::string& name, const std::string& text) {
  LogCase out;
  const std::string path = base::TempDir("log_reading") + "/" + name;
  EXPECT_TRUE(base::WriteFileAtomic(path, text).ok());
  auto trace = store::OpenTrace({path}, {});
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  if (!trace.ok()) return out;
  out.trace = std::move(trace).value();
  auto catalog = signatures::BuiltInCatalog();
  EXPECT_TRUE(catalog.ok()) << catalog.status().ToString();
  if (catalog.ok()) out.events = ReadLogEvidence(out.trace, **catalog, {});
  return out;
}

// An illegal address on one worker, then what it set off: the NCCL error and the engine's
// death are consequences; the first cause is the kernel fault.
TEST(LogReadingTest, TheFirstCauseOutranksWhatItSetOff) {
  const LogCase c = ReadLog(
      "crash.log",
      "INFO 01-02 10:00:00 [core.py:58] Initializing a V1 LLM engine\n"
      "(VllmWorker rank=1 pid=812) ERROR 01-02 10:00:05 [multiproc_executor.py:470] "
      "RuntimeError: CUDA error: an illegal memory access was encountered\n"
      "(VllmWorker rank=0 pid=811) ERROR 01-02 10:00:06 [multiproc_executor.py:470] "
      "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
      "ERROR 01-02 10:00:07 [core.py:400] EngineCore encountered a fatal error.\n"
      "ERROR 01-02 10:00:07 [async_llm.py:399] vllm.v1.engine.exceptions.EngineDeadError: "
      "EngineCore encountered an issue. See stack trace (above) for the root cause.\n");
  ASSERT_FALSE(c.events.empty());
  EXPECT_TRUE(c.events[0].first_cause);
  EXPECT_EQ(c.events[0].category, FaultCategory::kCudaKernel) << c.events[0].Label();
  EXPECT_EQ(c.trace.logs.rank[c.events[0].row], 1);
  EXPECT_GE(c.events[0].weight, kFailingLogWeight);
  EXPECT_GE(c.events.size(), 2u);
}

// Lines of several processes are not in time order (each process's lines are appended
// in turn): one signature on two ranks is shown by its earliest line, with its rank.
TEST(LogReadingTest, ASignatureOnSeveralRanksIsShownByItsEarliestLine) {
  model::Trace trace;
  for (int32_t rank : {0, 1}) {
    trace.processes.Append(10 + rank, trace.strings.Intern("h"), trace.strings.Intern("python"),
                           rank, base::StringPool::kEmpty);
  }
  const int64_t ts_of_rank[] = {2'000, 1'000};  // rank 1 raised first
  for (int32_t rank : {0, 1}) {
    trace.AppendLog(ts_of_rank[rank], model::ProcessIndex(static_cast<uint32_t>(rank)), 10 + rank,
                    rank, model::LogLevel::kError, model::LogStream::kStderr,
                    base::StringPool::kEmpty, model::TemplateId::Invalid(),
                    trace.strings.Intern(fmt::format(
                        "teller record: process {} raised an uncaught RuntimeError: x", 10 + rank)),
                    trace.strings.Intern("proc"), 1);
  }
  auto catalog = signatures::BuiltInCatalog();
  ASSERT_TRUE(catalog.ok());
  const std::vector<LogEvidence> events = ReadLogEvidence(trace, **catalog, {});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].Label(), "teller.record.uncaught_exception");
  EXPECT_EQ(events[0].rank, 1);
  EXPECT_EQ(events[0].row, 1u);
  EXPECT_EQ(events[0].repeats, 2);
}

// A Python traceback is one event, named by its exception line.
TEST(LogReadingTest, ATracebackIsOneEvent) {
  const LogCase c =
      ReadLog("oom.log",
              "Traceback (most recent call last):\n"
              "  File \"/app/server.py\", line 10, in <module>\n"
              "    main()\n"
              "  File \"/usr/lib/python3/site-packages/torch/nn/modules/module.py\", line 1, in f\n"
              "    return forward(x)\n"
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
              "a total capacity of 79.10 GiB of which 1.06 GiB is free.\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].category, FaultCategory::kMemoryResource) << c.events[0].Label();
  EXPECT_EQ(c.events[0].first_row, 0u);
  EXPECT_EQ(c.events[0].last_row, 5u);
  EXPECT_EQ(c.events[0].row, 5u);
}

// A worker's out-of-memory line fails the run with the allocator's figures: its
// unallocated reserve would have held the request, so the cache is fragmented, and the
// headline, the explanation, the next action and the JSON's `oom` all say so.
TEST(LogReadingTest, AnOutOfMemoryLineIsReportedWithItsFigures) {
  const LogCase c = ReadLog(
      "oom.log",
      "INFO 01-02 10:00:00 [core.py:58] Initializing a V1 LLM engine\n"
      "(VllmWorker rank=1 pid=812) ERROR 01-02 10:00:05 [multiproc_executor.py:470] "
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a "
      "total capacity of 79.10 GiB of which 1.06 GiB is free. Including non-PyTorch memory, "
      "this process has 78.02 GiB memory in use. Of the allocated memory 60.10 GiB is "
      "allocated by PyTorch, and 17.30 GiB is reserved by PyTorch but unallocated.\n");
  auto diagnosis = Diagnose(c.trace, DiagnoseOptions{});
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().ToString();
  EXPECT_EQ(VerdictOf(*diagnosis), RunVerdict::kFailed);
  EXPECT_EQ(diagnosis->category, FaultCategory::kMemoryResource);
  ASSERT_TRUE(diagnosis->oom.found);
  EXPECT_EQ(diagnosis->oom.rank, 1);
  EXPECT_EQ(FailureHeadline(*diagnosis), "out of memory on rank 1, GPU 1 (fragmented)");
  const std::string explanation = Explanation(c.trace, *diagnosis);
  EXPECT_NE(explanation.find("17.30 GiB reserved but unallocated"), std::string::npos)
      << explanation;
  EXPECT_NE(NextActionOf(*diagnosis).find("expandable_segments"), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(DiagnosisToJson(c.trace, *diagnosis));
  EXPECT_EQ(json["oom"]["kind"], "fragmented");
  EXPECT_DOUBLE_EQ(json["oom"]["requested_bytes"].get<double>(), 4.0 * (1 << 30));
  EXPECT_TRUE(json["oom"]["step"] == -1);
}

// The kernel's OOM killer before a worker's death: memory, not the death.
TEST(LogReadingTest, TheOomKillerBeforeAWorkersDeathIsMemory) {
  const LogCase c = ReadLog(
      "dmesg.log",
      "[ 8812.201] Out of memory: Killed process 4242 (python3) total-vm:912345kB, "
      "anon-rss:812345kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:2000kB oom_score_adj:0\n"
      "ERROR 01-02 10:00:07 [multiproc_executor.py:140] Worker proc VllmWorker-1 died "
      "unexpectedly, shutting down executor.\n");
  ASSERT_FALSE(c.events.empty());
  EXPECT_EQ(c.events[0].category, FaultCategory::kMemoryResource) << c.events[0].Label();
}

// Benign warnings and info lines of a healthy start and serving: no event.
TEST(LogReadingTest, AHealthyLogHasNoEvents) {
  const LogCase c = ReadLog(
      "healthy.log",
      "INFO 01-02 10:00:00 [api_server.py:1024] vLLM API server version 0.8.5\n"
      "WARNING 01-02 10:00:01 [config.py:2972] Casting torch.bfloat16 to torch.float16.\n"
      "INFO 01-02 10:00:09 [gpu_model_runner.py:1329] Model loading took 14.99 GiB\n"
      "INFO 01-02 10:00:20 [loggers.py:116] Engine 000: Avg prompt throughput: 512.0 "
      "tokens/s, Avg generation throughput: 80.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs\n"
      "INFO:     127.0.0.1:50000 - \"POST /v1/completions HTTP/1.1\" 200 OK\n");
  EXPECT_TRUE(c.events.empty()) << c.events.front().Label();
  DiagnoseOptions options;
  auto diagnosis = Diagnose(c.trace, options);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().ToString();
  EXPECT_EQ(VerdictOf(*diagnosis), RunVerdict::kHealthy);
}

// An exception no signature knows is still an error: placed by a keyword, or read as the
// engine's own software when it names nothing.
TEST(LogReadingTest, UnknownErrorsArePlacedByKeywordsAndFailTheRun) {
  const LogCase c = ReadLog(
      "unknown.log", "ERROR 01-02 10:00:05 [engine.py:160] ZeroDivisionError: division by zero\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].signature, nullptr);
  EXPECT_EQ(c.events[0].category, FaultCategory::kSchedulingSoftware);
  auto diagnosis = Diagnose(c.trace, {});
  ASSERT_TRUE(diagnosis.ok());
  EXPECT_EQ(VerdictOf(*diagnosis), RunVerdict::kFailed);
  const std::string explanation = Explanation(c.trace, *diagnosis);
  EXPECT_NE(explanation.find("no known signature"), std::string::npos) << explanation;
}

// A wrapper's text beside the error it wraps: the wrapped error names the cause.
TEST(LogReadingTest, TheWrappedErrorOutranksItsWrapper) {
  LogCase c =
      ReadLog("trt.log",
              "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, stream): "
              "out of memory (/src/tensorrt_llm/runtime/tllmBuffers.h:112)\n");
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].category, FaultCategory::kMemoryResource) << c.events[0].Label();
  c = ReadLog("nccl.log",
              "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
              "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
              "ncclUnhandledCudaError: Call to CUDA function failed.\n"
              "Last error:\n"
              "Cuda failure 'an illegal memory access was encountered'\n");
  ASSERT_FALSE(c.events.empty());
  EXPECT_EQ(c.events[0].category, FaultCategory::kCudaKernel) << c.events[0].Label();
}

// A known harmless line stays quiet even where a generic entry matches inside it, and a
// longer pattern over the same text refines a shorter one.
TEST(LogReadingTest, LongerPatternsRefineShorterOnes) {
  const LogCase c =
      ReadLog("xid.log",
              "[ 99.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has "
              "fallen off the bus.\n");
  ASSERT_EQ(c.events.size(), 1u);
  ASSERT_NE(c.events[0].signature, nullptr);
  EXPECT_NE(c.events[0].Label(), "nvidia.xid.any");
  EXPECT_EQ(c.events[0].category, FaultCategory::kRuntimeDriver);
}

// The same signature on every rank is one event with its repeats counted.
TEST(LogReadingTest, RepeatsOfOneSignatureFoldIntoOneEvent) {
  std::string text;
  for (int rank = 0; rank < 4; ++rank) {
    text +=
        "[rank" + std::to_string(rank) +
        "]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank " + std::to_string(rank) +
        "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, "
        "NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600012 milliseconds before "
        "timing out.\n";
  }
  const LogCase c = ReadLog("watchdog.log", text);
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].repeats, 4);
  EXPECT_EQ(c.events[0].category, FaultCategory::kCommunicationNetwork);
}

}  // namespace
}  // namespace teller::diagnose
