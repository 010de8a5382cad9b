#include "report/html_report.h"
#include "sim/simulated_trace_testing.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

#include <regex>
#include <string>

#include "base/file_util.h"
#include "base/testing.h"
#include "diagnose/wording.h"
#include "report/diagnosis_text.h"
#include "report/perfetto_export.h"
#include "report/report_test_trace.h"
#include "sim/fault_spec.h"
#include "sim/sim_config.h"
#include "sim/simulator.h"
#include "slice/causal_slice.h"
#include "store/open_trace.h"

namespace teller::report {
namespace {

using model::NodeIndex;
using model::StepIndex;

constexpr std::string_view kEvilKernel = "<script>alert(1)</script>";

size_t Count(const std::string& text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// The hand-built trace with its kernel renamed to a script tag, a log line with HTML
// in it aligned to the step, and a diagnosis naming the kernel as the suspect.
struct EvilCase {
  model::Trace trace;
  diagnose::Diagnosis diagnosis;
};

EvilCase MakeEvilCase() {
  EvilCase c{MakeReportTestTrace(), {}};
  model::Trace& trace = c.trace;
  trace.events.name[3] = trace.strings.Intern(kEvilKernel);  // the K gemm node
  trace.events.name[1] = trace.strings.Intern("forward");
  const size_t row = trace.AppendLog(
      trace.steps.start_ns[0] + 500, model::ProcessIndex(0), 100, 0, model::LogLevel::kError,
      model::LogStream::kStderr, trace.strings.Intern(""), model::TemplateId::Invalid(),
      trace.strings.Intern("CUDA error: an illegal memory access <b>html</b> & more"),
      trace.strings.Intern("worker\"0\".log"), 42);
  trace.logs.step[row] = StepIndex(0);
  trace.logs.alignment[row] = model::LogAlignment::kTimeWindow;

  diagnose::Finding finding;
  finding.step = StepIndex(0);
  finding.rank = 0;
  finding.step_number = 3;
  finding.group = 3;
  finding.family = localize::OperatorFamily::kGemm;
  finding.feature = localize::Feature::kTotalNs;
  finding.score = 9.5;
  finding.peak_z = 12.25;
  finding.value = 900000;
  finding.median = 300000;
  finding.suspects = {NodeIndex(3)};
  auto slice = slice::SliceStep(trace, StepIndex(0), finding.suspects, {});
  EXPECT_TRUE(slice.ok()) << slice.status().message();
  finding.slice = std::move(slice).value();
  diagnose::Diagnosis& d = c.diagnosis;
  d.degraded = true;
  d.findings.push_back(finding);
  d.steps.push_back({StepIndex(0), 0, 3, 12.25, localize::OperatorFamily::kGemm, 3});
  d.requests.push_back({model::RequestIndex(0), 12.25, {3}, {{0, 3}}});
  diagnose::LogEvidence log;
  log.row = log.first_row = log.last_row = row;
  log.category = diagnose::FaultCategory::kCudaKernel;
  log.keyword = "illegal";
  log.weight = 10.0;
  d.logs.push_back(log);
  d.category = diagnose::FaultCategory::kCudaKernel;
  d.category_probability = 0.75;
  d.votes.push_back({diagnose::FaultCategory::kCudaKernel, 3.0, "top finding <gemm>"});
  d.steps_scored = 1;
  d.baseline_keys = 1;
  d.first_abnormal_ns = trace.steps.start_ns[0];
  d.notes.push_back("no <collectives> matched");
  return c;
}

TEST(EscapeHtmlTest, EscapesMarkupQuotesAndControls) {
  EXPECT_EQ(EscapeHtml("a&b<c>\"d'e"), "a&amp;b&lt;c&gt;&quot;d&#39;e");
  EXPECT_EQ(EscapeHtml(std::string("x\x01y\x1bz\tw\n", 8)), "x y z\tw\n");
  EXPECT_EQ(EscapeHtml("plain kernel_name<float>"), "plain kernel_name&lt;float&gt;");
  EXPECT_EQ(EscapeHtml(""), "");
}

TEST(HtmlReportTest, TraceAndLogTextIsEscaped) {
  const EvilCase c = MakeEvilCase();
  const std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;html&lt;/b&gt; &amp; more"), std::string::npos);
  EXPECT_EQ(html.find("<b>html</b>"), std::string::npos);
  EXPECT_NE(html.find("worker&quot;0&quot;.log:42"), std::string::npos);
  EXPECT_NE(html.find("top finding &lt;gemm&gt;"), std::string::npos);
  EXPECT_NE(html.find("no &lt;collectives&gt; matched"), std::string::npos);
  // Our one inline script and nothing else opens a script element.
  EXPECT_EQ(Count(html, "<script"), 1u);
}

TEST(HtmlReportTest, HasEverySection) {
  const EvilCase c = MakeEvilCase();
  const std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  for (std::string_view id :
       {"summary", "explanation", "abnormal", "finding-1", "logs", "evidence", "collection"}) {
    EXPECT_NE(html.find(fmt::format("<section id=\"{}\"", id)), std::string::npos) << id;
  }
  EXPECT_NE(html.find("<svg class=\"timeline\""), std::string::npos);
  EXPECT_NE(html.find("<ul class=\"tree\">"), std::string::npos);
  EXPECT_NE(html.find(">DEGRADED</span>"), std::string::npos);
  EXPECT_NE(html.find("Category <b>cuda_kernel</b>"), std::string::npos);
  // The explanation and the next action are diagnose/wording.h's, escaped.
  EXPECT_NE(html.find("From the logs: an error no known signature matches, placed in cuda_kernel"),
            std::string::npos);
  EXPECT_NE(html.find("Check the GPU that ran the slow kernels"), std::string::npos);
  EXPECT_NE(html.find("prefers-color-scheme:dark"), std::string::npos);
  // The tree nests the kernel under its launch, the launch under forward.
  const std::regex nested("forward</span>.*?<ul><li>.*?cudaLaunchKernel</span>.*?<ul><li>");
  EXPECT_TRUE(std::regex_search(html, nested));
  // Balanced structure.
  EXPECT_EQ(Count(html, "<section"), Count(html, "</section>"));
  EXPECT_EQ(Count(html, "<ul"), Count(html, "</ul>"));
  EXPECT_EQ(Count(html, "<li>"), Count(html, "</li>"));
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  EXPECT_EQ(Count(html, "<table>"), Count(html, "</table>"));
}

TEST(HtmlReportTest, SuspectsAreHighlightedAndOnlyThey) {
  const EvilCase c = MakeEvilCase();
  const std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  // Node 3 is the one suspect: a timeline bar and a tree item, nothing else.
  EXPECT_EQ(Count(html, " data-suspect=\"1\""), 2u);
  EXPECT_NE(html.find("<rect class=\"n L5 suspect\" data-node=\"3\" data-suspect=\"1\""),
            std::string::npos);
  EXPECT_NE(html.find("<span class=\"node suspect\" data-node=\"3\" data-suspect=\"1\">"),
            std::string::npos);
  EXPECT_NE(html.find("<title>SUSPECT: K &lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("data-node=\"2\">"), std::string::npos);  // the launch, not a suspect
}

TEST(HtmlReportTest, FetchesNothingFromTheNetwork) {
  const EvilCase c = MakeEvilCase();
  const std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  // Links stay inside the page.
  const std::regex href("href=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), href); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ((*it)[1].str().front(), '#') << (*it)[1].str();
  }
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

TEST(HtmlReportTest, NormalRunSaysSoWithoutFindings) {
  const model::Trace trace = MakeReportTestTrace();
  diagnose::Diagnosis d;
  d.steps_scored = 4;
  const std::string html = RenderDiagnosisHtml(trace, d);
  EXPECT_NE(html.find(">HEALTHY</span>"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_EQ(Count(html, " data-suspect=\"1\""), 0u);
  EXPECT_NE(html.find("No cause stands above this run&#39;s noise"), std::string::npos);
}

// One voice: the top finding is a suspect only inside the verdict's cause; without a cause
// it is the largest deviation, said to be below the run's noise.
TEST(HtmlReportTest, TheTopFindingIsASuspectOnlyInsideTheCause) {
  EvilCase c = MakeEvilCase();
  c.diagnosis.degraded = false;  // logs aside, no cause in the trace
  c.diagnosis.logs.clear();
  std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_EQ(html.find("Top suspect"), std::string::npos);
  EXPECT_NE(html.find("Largest deviation"), std::string::npos);
  EXPECT_NE(html.find("below this run's noise: not a cause"), std::string::npos);
  EXPECT_NE(html.find("Abnormal steps and requests (none stands above"), std::string::npos);

  diagnose::RootCause root;
  root.hypothesis.kind = cause::CauseKind::kGpuSlow;
  root.hypothesis.rank = 0;
  root.hypothesis.first_group = 2;
  root.hypothesis.last_group = 4;  // the finding's step 3 on rank 0
  c.diagnosis.causes.push_back(root);
  c.diagnosis.degraded = true;
  diagnose::OrderBySupportOfCause(&c.diagnosis);
  html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_NE(html.find("Top suspect"), std::string::npos);
  EXPECT_EQ(html.find("Largest deviation"), std::string::npos);

  c.diagnosis.causes[0].hypothesis.rank = 1;  // another rank's GPU
  diagnose::OrderBySupportOfCause(&c.diagnosis);
  html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_NE(html.find("outside the cause's steps and place"), std::string::npos);
}

// The cause's operators, as the terminal lists them: stable names, escaped, the rest counted.
TEST(HtmlReportTest, TheCausesOperatorsAreListedByRole) {
  EvilCase c = MakeEvilCase();
  diagnose::RootCause root;
  root.hypothesis.kind = cause::CauseKind::kGpuSlow;
  root.hypothesis.rank = 0;
  root.hypothesis.first_group = 2;
  root.hypothesis.last_group = 4;
  for (const char* name : {"void gemm<float, 4>(float*)", "gemm<half, 8>", "a<b>", "c", "d"}) {
    root.operators.push_back({model::Layer::kK, name, false, false, false, {2, 3}});
  }
  root.operators.push_back({model::Layer::kComm, "nccl&AllReduce<T>", true, false, false, {3}});
  c.diagnosis.causes.push_back(root);
  c.diagnosis.degraded = true;
  const std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_NE(html.find("K gemm (2 steps), K a (2 steps), K c (2 steps), +1 more"),
            std::string::npos);
  EXPECT_NE(html.find("COMM nccl&amp;AllReduce (1 step)"), std::string::npos);
}

using sim::SimulatedTrace;

TEST(HtmlReportTest, SimulatedIncidentDrawsTimelinesAndCutsLargeSlices) {
  const model::Trace trace = SimulatedTrace("link_degradation:magnitude=2.0", "html_link");
  auto diagnosis = diagnose::Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().message();
  ASSERT_FALSE(diagnosis->findings.empty());
  const std::string html = RenderDiagnosisHtml(trace, *diagnosis);
  // Those on the cause's ranks and steps.
  const size_t drawn = diagnose::ListedOf(*diagnosis, diagnosis->findings, 5);
  ASSERT_GT(drawn, 0u);
  EXPECT_EQ(Count(html, "<svg class=\"timeline\""), drawn);
  EXPECT_EQ(Count(html, "class=\"finding\""), drawn);
  EXPECT_GE(Count(html, " data-suspect=\"1\""), 2 * drawn);
  EXPECT_EQ(Count(html, "<script"), 1u);
  EXPECT_EQ(html, RenderDiagnosisHtml(trace, *diagnosis));  // deterministic

  // A small budget cuts the slice and says so; suspects stay.
  HtmlReportOptions small;
  small.max_slice_nodes = 3;
  small.max_tree_nodes = 3;
  small.max_findings = 1;
  const std::string cut = RenderDiagnosisHtml(trace, *diagnosis, small);
  const diagnose::Finding& top = diagnosis->findings.front();
  const size_t total = top.slice.nodes.size() + top.slice.peer_nodes.size();
  if (total > std::max<size_t>(3, top.suspects.size())) {
    EXPECT_NE(cut.find(fmt::format("of {} slice nodes", total)), std::string::npos);
  }
  EXPECT_EQ(Count(cut, "<svg class=\"timeline\""), 1u);
  EXPECT_GE(Count(cut, " data-suspect=\"1\""), 2 * top.suspects.size());
  EXPECT_LT(cut.size(), html.size());
}

// The Perfetto windows of the listed abnormal steps: (step, rank) -> (start, end) in
// microseconds as the report writes them, parsed back.
struct ReportWindow {
  std::string start_us, end_us;
  int64_t start_ns = 0, end_ns = 0;
};
std::map<std::pair<int64_t, int32_t>, ReportWindow> ReportWindows(const std::string& html) {
  std::map<std::pair<int64_t, int32_t>, ReportWindow> windows;
  const std::regex cell(
      "data-step=\"(-?\\d+)\" data-rank=\"(-?\\d+)\" data-start-us=\"([-0-9.]+)\" "
      "data-end-us=\"([-0-9.]+)\">[^<]*</td><td><button type=\"button\" class=\"perfetto-open\" "
      "data-start-ns=\"(-?\\d+)\" data-end-ns=\"(-?\\d+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cell); it != std::sregex_iterator();
       ++it) {
    windows[{std::stoll((*it)[1].str()), std::stoi((*it)[2].str())}] = {
        (*it)[3].str(), (*it)[4].str(), std::stoll((*it)[5].str()), std::stoll((*it)[6].str())};
  }
  return windows;
}

TEST(HtmlReportTest, PerfettoHandOffOnlyWhenClickedAndSaysItIsOnline) {
  const EvilCase c = MakeEvilCase();
  HtmlReportOptions options;
  options.perfetto_path = "out/<trace>.perfetto.json";
  const std::string html = RenderDiagnosisHtml(c.trace, c.diagnosis, options);
  EXPECT_NE(html.find("data-perfetto-file=\"out/&lt;trace&gt;.perfetto.json\""), std::string::npos);
  EXPECT_EQ(html.find("<trace>"), std::string::npos);
  EXPECT_NE(html.find("id=\"perfetto-file\""), std::string::npos);  // the reader picks the file
  EXPECT_EQ(Count(html, ">Open in ui.perfetto.dev (online)</button>"), c.diagnosis.steps.size());
  // ui.perfetto.dev is named only in the script that runs on a click; nothing is loaded.
  EXPECT_EQ(Count(html, "https://"), Count(html, "https://ui.perfetto.dev"));
  EXPECT_EQ(Count(html, "<script"), 1u);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  // Step 3 starts at the trace's first event and ends with its device work.
  const auto windows = ReportWindows(html);
  ASSERT_EQ(windows.size(), 1u);
  const ReportWindow& w = windows.at({3, 0});
  EXPECT_EQ(w.start_us, "0.000");
  EXPECT_EQ(w.start_ns, 0);
  EXPECT_EQ(w.end_ns, c.trace.steps.end_ns[0] - c.trace.steps.start_ns[0]);
  EXPECT_EQ(w.end_us, FormatPerfettoMicros(w.end_ns));
  // Without an export: no hand-off, no mention of the network.
  const std::string plain = RenderDiagnosisHtml(c.trace, c.diagnosis);
  EXPECT_EQ(plain.find("perfetto-handoff"), std::string::npos);
  EXPECT_EQ(plain.find("ui.perfetto.dev"), std::string::npos);
}

TEST(HtmlReportTest, PerfettoWindowsMatchTheExportForEveryListedStep) {
  const model::Trace trace = SimulatedTrace("link_degradation:magnitude=2.0", "html_link");
  auto diagnosis = diagnose::Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().message();
  ASSERT_FALSE(diagnosis->steps.empty());
  PerfettoOptions marks;
  MarkDiagnosis(*diagnosis, &marks);
  const std::string path = base::TempDir("html_perfetto") + "/trace.perfetto.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, marks).ok());
  const std::string export_text = *base::ReadFile(path);
  auto json = nlohmann::json::parse(export_text);

  // The export's diagnosis track, and the suspects it marks.
  // (step, rank) -> (ts, ts + dur) in ns, read from the export's exact decimal text.
  std::map<std::pair<int64_t, int32_t>, std::pair<int64_t, int64_t>> exported;
  size_t marked_suspects = 0;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] != "X") continue;
    if (event["pid"] == 999999 && event["tid"] == 1) {  // the abnormal steps' thread
      const int64_t ts_ns = std::llround(event["ts"].get<double>() * 1000);
      exported[{event["args"]["step"].get<int64_t>(), event["args"]["rank"].get<int32_t>()}] = {
          ts_ns, ts_ns + std::llround(event["dur"].get<double>() * 1000)};
    }
    if (event["args"].contains("teller_suspect")) ++marked_suspects;
  }
  EXPECT_EQ(exported.size(), diagnosis->steps.size());
  EXPECT_EQ(marked_suspects, marks.suspects.size());
  for (const diagnose::Finding& finding : diagnosis->findings) {
    for (NodeIndex node : finding.suspects) EXPECT_TRUE(marks.suspects.count(node.value()));
  }

  HtmlReportOptions options;
  options.perfetto_path = "trace.perfetto.json";
  const std::string html = RenderDiagnosisHtml(trace, *diagnosis, options);
  const auto windows = ReportWindows(html);
  EXPECT_EQ(windows.size(), std::min<size_t>(diagnosis->steps.size(), 12));
  for (const diagnose::AbnormalStep& step : diagnosis->steps) {
    const auto window = windows.find({step.number, step.rank});
    if (windows.size() == diagnosis->steps.size()) {
      ASSERT_NE(window, windows.end()) << "step " << step.number << " rank " << step.rank;
    }
    if (window == windows.end()) continue;
    const auto& [start_ns, end_ns] = exported.at({step.number, step.rank});
    EXPECT_EQ(window->second.start_ns, start_ns);
    EXPECT_EQ(window->second.end_ns, end_ns);
    EXPECT_EQ(window->second.start_us, FormatPerfettoMicros(start_ns));
    EXPECT_EQ(window->second.end_us, FormatPerfettoMicros(end_ns));
    // The export's own text holds the start exactly as the report shows it.
    EXPECT_NE(export_text.find("\"ts\":" + window->second.start_us + ","), std::string::npos);
  }
}

// One verdict: the model decoder's grounded sentence is shown only where its words
// point to the cause's category; a dropped or disagreeing sentence is not.
TEST(ModelExplanation, ShownOnlyWhereGroundedAndAgreeingWithTheCause) {
  diagnose::Diagnosis diagnosis;
  diagnosis.model.used = true;
  diagnosis.model.explanation =
      "GPU throttling on rank 1 (GPU 1 on node0): from steps 5-8 its kernels ran about 30% "
      "slower than the same kernels on its peers.";
  EXPECT_EQ(ModelExplanationText(diagnosis), "") << "no cause to agree with";
  diagnose::RootCause cause;
  cause.category = diagnose::FaultCategory::kCudaKernel;
  diagnosis.causes.push_back(cause);
  EXPECT_EQ(ModelExplanationText(diagnosis), diagnosis.model.explanation);
  diagnosis.causes.front().category = diagnose::FaultCategory::kSchedulingSoftware;
  EXPECT_EQ(ModelExplanationText(diagnosis), "");
  diagnosis.causes.front().category = diagnose::FaultCategory::kCudaKernel;
  diagnosis.model.explanation_problems = {"<percent> cannot be filled from the trace"};
  EXPECT_EQ(ModelExplanationText(diagnosis), "");
}

// One verdict: model flags beside a healthy verdict say they were outvoted; beside a
// cause they say how many fall in its window.
TEST(ModelAgreement, FlagsOutsideAnyCauseSayTheyDoNotMakeTheVerdict) {
  diagnose::Diagnosis diagnosis;
  diagnosis.model.used = true;
  EXPECT_EQ(ModelAgreementText(diagnosis), "") << "flags nothing";
  diagnosis.model.abnormal = true;
  diagnosis.model.steps = {{4, "", 0.99}, {9, "", 0.97}};
  EXPECT_NE(ModelAgreementText(diagnosis).find("do not make the verdict"), std::string::npos);
  diagnosis.decider = "learned";
  diagnosis.candidate_probabilities = {0.31};
  diagnosis.degraded_probability = 0.31;
  EXPECT_NE(ModelAgreementText(diagnosis).find("best p 0.31"), std::string::npos);
  diagnose::RootCause cause;
  cause.hypothesis.first_group = 3;
  cause.hypothesis.last_group = 6;
  diagnosis.causes.push_back(cause);
  EXPECT_EQ(ModelAgreementText(diagnosis), "; 1 of them in the cause's steps");
}

}  // namespace
}  // namespace teller::report
