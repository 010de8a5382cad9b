#include "report/html_report.h"
#include "sim/simulated_trace_testing.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "base/testing.h"
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
  d.abnormal = true;
  d.findings.push_back(finding);
  d.steps.push_back({StepIndex(0), 0, 3, 12.25, localize::OperatorFamily::kGemm});
  d.requests.push_back({model::RequestIndex(0), 12.25, {3}});
  d.logs.push_back({row, diagnose::FaultCategory::kCudaKernel, "illegal memory access"});
  d.category = diagnose::FaultCategory::kCudaKernel;
  d.category_probability = 0.75;
  d.votes.push_back({diagnose::FaultCategory::kCudaKernel, 3.0, "top finding <gemm>"});
  d.explanation = "gemm took 900 us against 300 us";
  d.next_action = "Check the GPU's clocks";
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
  EXPECT_NE(html.find("ABNORMAL"), std::string::npos);
  EXPECT_NE(html.find("Category <b>cuda_kernel</b> (rule score 75%)"), std::string::npos);
  EXPECT_NE(html.find("gemm took 900 us against 300 us"), std::string::npos);
  EXPECT_NE(html.find("Check the GPU&#39;s clocks"), std::string::npos);
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
  d.explanation = "no step deviates";
  const std::string html = RenderDiagnosisHtml(trace, d);
  EXPECT_NE(html.find(">NORMAL</span>"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_EQ(Count(html, " data-suspect=\"1\""), 0u);
  EXPECT_NE(html.find("no step deviates"), std::string::npos);
}

using sim::SimulatedTrace;

TEST(HtmlReportTest, SimulatedIncidentDrawsTimelinesAndCutsLargeSlices) {
  const model::Trace trace = SimulatedTrace("link_degradation:magnitude=2.0", "html_link");
  auto diagnosis = diagnose::Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().message();
  ASSERT_TRUE(diagnosis->abnormal);
  ASSERT_FALSE(diagnosis->findings.empty());
  const std::string html = RenderDiagnosisHtml(trace, *diagnosis);
  const size_t drawn = std::min<size_t>(5, diagnosis->findings.size());
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

}  // namespace
}  // namespace teller::report
