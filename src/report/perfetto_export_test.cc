#include "report/perfetto_export.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/testing.h"
#include "report/report_test_trace.h"

namespace teller::report {
namespace {

TEST(PerfettoExportTest, WritesValidChromeTraceWithFlowsAndRequests) {
  model::Trace trace = MakeReportTestTrace();
  std::string path = base::TempDir("perfetto") + "/trace.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, {}).ok());
  auto json = nlohmann::json::parse(*base::ReadFile(path));
  EXPECT_EQ(json["otherData"]["teller_origin_ns"].get<int64_t>(), 1700000000000000000);
  int complete = 0, flow_start = 0, flow_end = 0;
  for (const auto& event : json["traceEvents"]) {
    std::string ph = event["ph"];
    if (ph == "X") {
      ++complete;
      if (event["name"] == "decode") {
        EXPECT_EQ(event["args"]["requests"], "r1,r2");
        EXPECT_EQ(event["args"]["phase"], "decode");
      }
      if (event["name"] == "gemm_fp16") {
        EXPECT_DOUBLE_EQ(event["ts"].get<double>(), 10.0);
        EXPECT_DOUBLE_EQ(event["dur"].get<double>(), 900.0);
      }
    }
    if (ph == "s") ++flow_start;
    if (ph == "f") ++flow_end;
  }
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(flow_start, 1);  // the launch -> kernel flow only
  EXPECT_EQ(flow_end, 1);
  // Names taken from a trace never appear as raw markup.
  EXPECT_EQ(base::ReadFile(path)->find("<script>"), std::string::npos);
}

TEST(PerfettoExportTest, WindowKeepsOnlyOverlappingEvents) {
  model::Trace trace = MakeReportTestTrace();
  std::string path = base::TempDir("perfetto_window") + "/trace.json";
  PerfettoOptions options;
  options.window_start_ns = 1700000000000000000 + 60000;
  options.window_end_ns = 1700000000000000000 + 70000;
  ASSERT_TRUE(ExportPerfetto(trace, path, options).ok());
  auto json = nlohmann::json::parse(*base::ReadFile(path));
  std::vector<std::string> names;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] == "X") names.push_back(event["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"decode", "gemm_fp16"}));
}

TEST(PerfettoExportTest, FlowGoesFromTheLaunchToTheKernelTrack) {
  model::Trace trace = MakeReportTestTrace();
  std::string path = base::TempDir("perfetto_flow") + "/trace.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, {}).ok());
  auto json = nlohmann::json::parse(*base::ReadFile(path));
  nlohmann::json launch, kernel, start, end;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] == "X" && event["name"] == "cudaLaunchKernel") launch = event;
    if (event["ph"] == "X" && event["name"] == "gemm_fp16") kernel = event;
    if (event["ph"] == "s") start = event;
    if (event["ph"] == "f") end = event;
  }
  ASSERT_FALSE(start.is_null());
  ASSERT_FALSE(end.is_null());
  EXPECT_EQ(start["id"], end["id"]);
  EXPECT_EQ(start["cat"], "launch");
  // Starts on the launch's track at its start, ends on the kernel's (device) track
  // at the kernel's start, bound to the enclosing slice.
  EXPECT_EQ(start["pid"], launch["pid"]);
  EXPECT_EQ(start["tid"], launch["tid"]);
  EXPECT_DOUBLE_EQ(start["ts"].get<double>(), launch["ts"].get<double>());
  EXPECT_EQ(end["pid"], kernel["pid"]);
  EXPECT_EQ(end["tid"], kernel["tid"]);
  EXPECT_NE(end["pid"], start["pid"]);
  EXPECT_DOUBLE_EQ(end["ts"].get<double>(), kernel["ts"].get<double>());
  EXPECT_EQ(end["bp"], "e");
  EXPECT_EQ(launch["args"]["correlation"], 7);
  EXPECT_EQ(kernel["args"]["correlation"], 7);
}

// The hand-built trace's gemm kernel as the suspect of a finding in step 3.
diagnose::Diagnosis GemmDiagnosis() {
  diagnose::Finding finding;
  finding.step = model::StepIndex(0);
  finding.rank = 0;
  finding.step_number = 3;
  finding.family = localize::OperatorFamily::kGemm;
  finding.feature = localize::Feature::kTotalNs;
  finding.peak_z = 12.25;
  finding.value = 900000;
  finding.median = 300000;
  finding.suspects = {model::NodeIndex(3)};
  diagnose::Finding second = finding;  // names the kernel again, ranked lower
  second.peak_z = 7.5;
  diagnose::Diagnosis d;
  d.degraded = true;
  d.findings = {finding, second};
  d.steps.push_back({model::StepIndex(0), 0, 3, 12.25, localize::OperatorFamily::kGemm});
  return d;
}

// The verdict's cause is one slice over its window on the diagnosis track, with its
// sentence and what decided it; a run without a cause has none.
TEST(PerfettoExportTest, TheCauseIsOneSliceOverItsWindow) {
  model::Trace trace = MakeReportTestTrace();
  diagnose::Diagnosis d = GemmDiagnosis();
  diagnose::RootCause root;
  root.hypothesis.kind = cause::CauseKind::kGpuSlow;
  root.hypothesis.rank = 0;
  root.hypothesis.effect = 0.5;
  root.hypothesis.first_group = trace.steps.number[0];
  root.hypothesis.last_group = trace.steps.number[0];
  d.causes.push_back(root);
  d.category = diagnose::FaultCategory::kCudaKernel;
  d.decider = "learned";  // as ApplyDecider leaves it: a probability per candidate
  d.candidates.push_back(root);
  d.candidate_probabilities = {0.9};
  d.degraded_probability = 0.9;
  PerfettoOptions options;
  MarkDiagnosis(d, &options);
  const std::string path = base::TempDir("perfetto_cause") + "/trace.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, options).ok());
  const auto json = nlohmann::json::parse(*base::ReadFile(path));
  nlohmann::json slice;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] == "X" && event["pid"] == 999999 && event["tid"] == 2) slice = event;
  }
  ASSERT_FALSE(slice.is_null());
  EXPECT_EQ(slice["name"], "DEGRADED cuda_kernel: rank 0's GPU");
  EXPECT_EQ(slice["args"]["teller_decided_by"], "learned");
  EXPECT_DOUBLE_EQ(slice["args"]["teller_probability"].get<double>(), 0.9);
  EXPECT_NE(slice["args"]["teller_cause"].get<std::string>().find("1.50x slower"),
            std::string::npos);
  const PerfettoWindow window =
      PerfettoStepWindow(trace, model::StepIndex(0), PerfettoOriginNs(trace));
  EXPECT_DOUBLE_EQ(slice["ts"].get<double>(), window.start_ns / 1000.0);
  EXPECT_DOUBLE_EQ(slice["dur"].get<double>(), (window.end_ns - window.start_ns) / 1000.0);

  PerfettoOptions healthy;
  MarkDiagnosis(diagnose::Diagnosis{}, &healthy);
  EXPECT_FALSE(healthy.cause.present);
}

TEST(PerfettoExportTest, MarksSuspectsAndAbnormalSteps) {
  model::Trace trace = MakeReportTestTrace();
  PerfettoOptions options;
  MarkDiagnosis(GemmDiagnosis(), &options);
  ASSERT_EQ(options.suspects.size(), 1u);
  EXPECT_EQ(options.suspects.at(3).finding_rank, 1u);  // the best-ranked finding wins
  std::string path = base::TempDir("perfetto_marks") + "/trace.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, options).ok());
  auto json = nlohmann::json::parse(*base::ReadFile(path));
  int coloured = 0;
  nlohmann::json marker;
  std::string diagnosis_process;
  for (const auto& event : json["traceEvents"]) {
    if (event.contains("cname")) ++coloured;
    if (event["ph"] == "M" && event["pid"] == 999999 && event["name"] == "process_name") {
      diagnosis_process = event["args"]["name"];
    }
    if (event["ph"] != "X") continue;
    if (event["name"] == "gemm_fp16") {
      EXPECT_EQ(event["cname"], std::string(kSuspectColor));
      EXPECT_EQ(event["args"]["teller_suspect"], true);
      EXPECT_EQ(event["args"]["teller_finding_rank"], 1);
      EXPECT_DOUBLE_EQ(event["args"]["teller_z"].get<double>(), 12.25);
      EXPECT_DOUBLE_EQ(event["args"]["teller_baseline"].get<double>(), 300000);
      EXPECT_DOUBLE_EQ(event["args"]["teller_value"].get<double>(), 900000);
      EXPECT_EQ(event["args"]["teller_family"], "gemm");
    } else if (event["name"] == "decode") {
      EXPECT_EQ(event["cname"], std::string(kAbnormalStepColor));
      EXPECT_EQ(event["args"]["teller_abnormal_step"], true);
      EXPECT_EQ(event["args"]["teller_step_rank"], 1);
      EXPECT_FALSE(event["args"].contains("teller_suspect"));
    } else if (event["pid"] == 999999) {
      marker = event;
    } else {
      EXPECT_FALSE(event.contains("cname")) << event.dump();
      EXPECT_FALSE(event["args"].contains("teller_suspect")) << event.dump();
    }
  }
  EXPECT_EQ(coloured, 3);  // suspect, abnormal STEP range, diagnosis-track slice
  EXPECT_EQ(diagnosis_process, "teller diagnosis");
  ASSERT_FALSE(marker.is_null());
  // The step's window: from its start (the trace origin) to its end, device work included.
  EXPECT_DOUBLE_EQ(marker["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(marker["dur"].get<double>(),
                   (trace.steps.end_ns[0] - trace.steps.start_ns[0]) / 1000.0);
  EXPECT_EQ(marker["args"]["step"], 3);
  const PerfettoWindow window =
      PerfettoStepWindow(trace, model::StepIndex(0), PerfettoOriginNs(trace));
  EXPECT_EQ(window.start_ns, 0);
  EXPECT_EQ(window.end_ns, trace.steps.end_ns[0] - trace.steps.start_ns[0]);
}

TEST(PerfettoExportTest, UnmarkedExportHasNoMarks) {
  model::Trace trace = MakeReportTestTrace();
  std::string path = base::TempDir("perfetto_nomarks") + "/trace.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, {}).ok());
  const std::string text = *base::ReadFile(path);
  EXPECT_EQ(text.find("cname"), std::string::npos);
  EXPECT_EQ(text.find("teller_suspect"), std::string::npos);
  EXPECT_EQ(text.find("teller_abnormal_step"), std::string::npos);
  EXPECT_EQ(text.find("999999"), std::string::npos);
}

TEST(PerfettoExportTest, MicrosecondsAreExact) {
  EXPECT_EQ(FormatPerfettoMicros(0), "0.000");
  EXPECT_EQ(FormatPerfettoMicros(1234567), "1234.567");
  EXPECT_EQ(FormatPerfettoMicros(-1500), "-1.500");
  EXPECT_EQ(FormatPerfettoMicros(999), "0.999");
}

}  // namespace
}  // namespace teller::report
