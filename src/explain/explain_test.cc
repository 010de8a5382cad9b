#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "diagnose/diagnosis.h"
#include "diagnose/wording.h"
#include "diagnose/diagnosis_json.h"
#include "explain/chat_client.h"
#include "explain/grounding.h"
#include "explain/narrative.h"
#include "explain/narrative_prompt.h"
#include "report/diagnosis_text.h"
#include "report/html_report.h"
#include "sim/simulated_trace_testing.h"

namespace teller::explain {
namespace {

// A chat-completions server on 127.0.0.1 (ephemeral port, one thread) that answers
// every request the same way and keeps the last request.
class ChatServer {
 public:
  enum class Mode { kReply, kSleepPastTimeout, kHttp500, kMalformedJson, kEmptyContent };

  explicit ChatServer(Mode mode, std::string content = "")
      : mode_(mode), content_(std::move(content)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(listen_fd_, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(listen_fd_, 8), 0);
    socklen_t length = sizeof(address);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ChatServer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }
  std::string path() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return path_;
  }
  std::string headers() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return headers_;
  }
  std::string body() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return body_;
  }

 private:
  // Waits up to `ms` for `fd` to be readable, in short slices so that stop_ is seen.
  bool Readable(int fd, int ms) {
    for (int waited = 0; waited < ms && !stop_; waited += 20) {
      pollfd entry{fd, POLLIN, 0};
      if (poll(&entry, 1, 20) > 0) return true;
    }
    return false;
  }

  void Serve() {
    while (!stop_) {
      if (!Readable(listen_fd_, 1000000)) continue;
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      Handle(fd);
      close(fd);
    }
  }

  void Handle(int fd) {
    std::string request;
    char buffer[4096];
    size_t header_end = std::string::npos;
    size_t content_length = 0;
    while (Readable(fd, 5000)) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
      if (header_end == std::string::npos) {
        header_end = request.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          std::string lower = request.substr(0, header_end);
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          const size_t at = lower.find("content-length:");
          if (at != std::string::npos) content_length = std::stoul(lower.substr(at + 15));
        }
      }
      if (header_end != std::string::npos && request.size() >= header_end + 4 + content_length)
        break;
    }
    if (header_end == std::string::npos) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const size_t first_space = request.find(' ');
      path_ = request.substr(first_space + 1, request.find(' ', first_space + 1) - first_space - 1);
      headers_ = request.substr(0, header_end);
      body_ = request.substr(header_end + 4);
    }
    ++requests_;
    std::string status = "200 OK";
    std::string reply;
    switch (mode_) {
      case Mode::kReply:
        reply = nlohmann::json{{"id", "chatcmpl-1"},
                               {"object", "chat.completion"},
                               {"choices",
                                {{{"index", 0},
                                  {"message", {{"role", "assistant"}, {"content", content_}}},
                                  {"finish_reason", "stop"}}}}}
                    .dump();
        break;
      case Mode::kSleepPastTimeout:
        // Until the client gives up and closes the connection (or the test ends).
        while (Readable(fd, 10000)) {
          if (read(fd, buffer, sizeof(buffer)) <= 0) break;
        }
        return;
      case Mode::kHttp500:
        status = "500 Internal Server Error";
        reply = R"({"error": {"message": "model crashed"}})";
        break;
      case Mode::kMalformedJson:
        reply = R"({"choices": [{"message": {"content": "cut off)";
        break;
      case Mode::kEmptyContent:
        reply = R"({"choices": [{"message": {"role": "assistant", "content": ""}}]})";
        break;
    }
    const std::string response =
        "HTTP/1.1 " + status +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(reply.size()) +
        "\r\nConnection: close\r\n\r\n" + reply;
    size_t sent = 0;
    while (sent < response.size()) {
      const ssize_t n = write(fd, response.data() + sent, response.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  }

  Mode mode_;
  std::string content_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  mutable std::mutex mutex_;
  std::string path_, headers_, body_;
  std::thread thread_;
};

// One simulated incident for every test: a strongly degraded link (as in diagnose_test).
class ExplainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trace_ =
        new model::Trace(sim::SimulatedTrace("link_degradation:magnitude=2.0", "explain_link"));
    auto diagnosis = diagnose::Diagnose(*trace_);
    ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().message();
    diagnosis_ = new diagnose::Diagnosis(std::move(diagnosis).value());
  }
  static void TearDownTestSuite() {
    delete diagnosis_;
    delete trace_;
  }
  const model::Trace& trace() const { return *trace_; }
  const diagnose::Diagnosis& diagnosis() const { return *diagnosis_; }

  std::string NodeName(model::NodeIndex node) const {
    return std::string(trace().str(trace().events.name[trace().nodes.event[node.value()].value()]));
  }
  ExplainerOptions Options(const ChatServer& server, double timeout_s = 20.0) const {
    ExplainerOptions options;
    options.kind = ExplainerKind::kOpenAiCompatible;
    options.chat.endpoint = server.endpoint();
    options.chat.model = "test-model";
    options.chat.timeout_s = timeout_s;
    return options;
  }

  static model::Trace* trace_;
  static diagnose::Diagnosis* diagnosis_;
};
model::Trace* ExplainTest::trace_ = nullptr;
diagnose::Diagnosis* ExplainTest::diagnosis_ = nullptr;

// Tests that talk HTTP: skipped in a build without libcurl.
class ExplainClientTest : public ExplainTest {
 protected:
  void SetUp() override {
    if (!ChatTransportAvailable()) GTEST_SKIP() << "built without libcurl";
    setenv("no_proxy", "127.0.0.1", 1);  // a proxy from the environment must not get these
  }
};

TEST(ChatClientTest, EndpointWithOrWithoutV1GivesOneChatCompletionsUrl) {
  const std::string expected = "http://gpu-box:8000/v1/chat/completions";
  for (const char* endpoint :
       {"http://gpu-box:8000", "http://gpu-box:8000/", "http://gpu-box:8000/v1",
        "http://gpu-box:8000/v1/", "gpu-box:8000", "http://gpu-box:8000/v1/chat/completions"}) {
    auto url = ChatCompletionsUrl(endpoint);
    ASSERT_TRUE(url.ok()) << endpoint << ": " << url.status().message();
    EXPECT_EQ(*url, expected) << endpoint;
  }
  EXPECT_EQ(*ChatCompletionsUrl("https://llm.internal/proxy/v1"),
            "https://llm.internal/proxy/v1/chat/completions");
  EXPECT_FALSE(ChatCompletionsUrl("").ok());
  EXPECT_FALSE(ChatCompletionsUrl("ftp://gpu-box/v1").ok());
  EXPECT_EQ(RedactEndpoint("http://user:secret@gpu-box:8000/v1"), "http://gpu-box:8000/v1");
  EXPECT_EQ(RedactEndpoint("http://gpu-box:8000/v1?x=a@b"), "http://gpu-box:8000/v1?x=a@b");
}

TEST(ChatClientTest, ParsesTheFirstChoiceAndRejectsEverythingElse) {
  auto ok =
      ParseChatReply(R"({"choices":[{"message":{"role":"assistant","content":"Rank 1 is slow."}},
                                          {"message":{"content":"second"}}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "Rank 1 is slow.");
  EXPECT_NE(ParseChatReply("{\"choices\": [").status().message().find("malformed JSON"),
            std::string::npos);
  EXPECT_NE(ParseChatReply(R"({"choices": []})").status().message().find("without choices"),
            std::string::npos);
  EXPECT_NE(ParseChatReply(R"({"error": {"message": "no such model"}})")
                .status()
                .message()
                .find("no such model"),
            std::string::npos);
  EXPECT_FALSE(ParseChatReply(R"({"choices": [{"message": {"content": null}}]})").ok());
  EXPECT_NE(ParseChatReply(R"({"choices": [{"message": {"content": " \n"}}]})")
                .status()
                .message()
                .find("empty content"),
            std::string::npos);
}

TEST(PromptTest, EscapesControlCharactersAndBadUtf8AndCuts) {
  EXPECT_EQ(EscapeForPrompt("a\"b\\c\nd\te\x01", 100), "a\\\"b\\\\c\\nd\\te\\x01");
  EXPECT_EQ(EscapeForPrompt("caf\xC3\xA9 \xFF", 100), "caf\xC3\xA9 \\xFF");
  EXPECT_EQ(EscapeForPrompt("abcdefgh", 5), "abcde...");
  // Never cuts inside a character: the two-byte e-acute does not fit after "abcd".
  EXPECT_EQ(EscapeForPrompt("abcd\xC3\xA9", 5), "abcd...");
}

TEST(GroundingTest, StepsRanksAndNamesOutsideThePromptAreFlagged) {
  NarrativeRequest request;
  request.user = "rank 1, step 17: COMM ncclDevKernel_AllReduce_Sum_bf16 2.1 ms; family all_reduce";
  request.step_numbers = {17, 18};
  request.ranks = {1};
  EXPECT_TRUE(UnverifiedMentions("Steps 17 and 18 on rank 1 spent 2.1 ms in "
                                 "ncclDevKernel_AllReduce_Sum_bf16 (all_reduce).",
                                 request)
                  .empty());
  EXPECT_EQ(UnverifiedMentions("steps 17, 19 and 20 on ranks 1 and 3; check gemm_fp16_tn and "
                               "ncclDevKernel_AllReduce. Stepping back, rank 1's ProfilerStep#44.",
                               request),
            (std::vector<std::string>{"step 19", "step 20", "rank 3", "gemm_fp16_tn"}));
  // A name cited in another case is still the prompt's.
  EXPECT_TRUE(UnverifiedMentions("NCCLDEVKERNEL_ALLREDUCE is slow at step #17", request).empty());
  EXPECT_EQ(UnverifiedMentions("cudaDeviceSynchronize stalls", request),
            std::vector<std::string>{"cudaDeviceSynchronize"});
}

TEST_F(ExplainTest, PromptHoldsTheSliceAndEvidenceWithinItsLimits) {
  ASSERT_FALSE(diagnosis().findings.empty());
  const PromptLimits limits;
  const NarrativeRequest request = BuildNarrativePrompt(trace(), diagnosis(), limits);
  EXPECT_LE(request.user.size(), limits.max_bytes);
  EXPECT_LE(request.nodes_listed, limits.max_nodes);
  EXPECT_GT(request.nodes_listed, 0u);
  const diagnose::Finding& top = diagnosis().findings.front();
  EXPECT_NE(request.user.find(NodeName(top.suspects.front())), std::string::npos);
  EXPECT_NE(request.user.find(fmt::format("rank {}, step {}", top.rank, top.step_number)),
            std::string::npos);
  EXPECT_NE(request.user.find(localize::OperatorFamilyName(top.family)), std::string::npos);
  EXPECT_NE(request.user.find(diagnose::Explanation(trace(), diagnosis()).substr(0, 60)), std::string::npos);
  EXPECT_TRUE(request.step_numbers.count(top.step_number));
  EXPECT_TRUE(request.ranks.count(top.rank));
  EXPECT_NE(request.system.find("Cite only"), std::string::npos);

  PromptLimits tight;
  tight.max_bytes = 1500;
  tight.max_nodes = 4;
  tight.max_log_lines = 1;
  const NarrativeRequest small = BuildNarrativePrompt(trace(), diagnosis(), tight);
  EXPECT_LE(small.user.size(), tight.max_bytes);
  EXPECT_LE(small.nodes_listed, 4u);
  EXPECT_LE(small.log_lines_listed, 1u);
  EXPECT_TRUE(small.truncated);
}

TEST_F(ExplainClientTest, ServerReplyIsUsedAndTheRequestHoldsOnlyTheSlice) {
  const diagnose::Finding& top = diagnosis().findings.front();
  const std::string reply = fmt::format("Step {} on rank {} spent far longer than normal in {}.",
                                        top.step_number, top.rank, NodeName(top.suspects.front()));
  ChatServer server(ChatServer::Mode::kReply, reply);
  ExplainerOptions options = Options(server);
  options.chat.api_key = "sk-test-secret";
  const Narrative narrative = ExplainDiagnosis(trace(), diagnosis(), options);
  ASSERT_TRUE(narrative.used) << narrative.status;
  EXPECT_EQ(narrative.text, reply);
  EXPECT_TRUE(narrative.unverified.empty());
  EXPECT_EQ(narrative.status, "llm: used test-model at " + server.endpoint());
  EXPECT_EQ(server.path(), "/v1/chat/completions");
  EXPECT_NE(server.headers().find("Authorization: Bearer sk-test-secret"), std::string::npos);

  const nlohmann::json body = nlohmann::json::parse(server.body());
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["max_tokens"], 512);
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["role"], "user");
  const std::string user = body["messages"][1]["content"];
  EXPECT_EQ(user, BuildNarrativePrompt(trace(), diagnosis()).user);
  EXPECT_NE(user.find(NodeName(top.suspects.front())), std::string::npos);
  EXPECT_NE(user.find("evidence: "), std::string::npos);

  // Names of nodes outside the slices of the top findings never leave the machine.
  const size_t described = std::min(PromptLimits().max_findings, diagnosis().findings.size());
  std::set<std::string> in_slice;
  for (size_t i = 0; i < described; ++i) {
    const diagnose::Finding& f = diagnosis().findings[i];
    for (model::NodeIndex node : f.slice.nodes) in_slice.insert(NodeName(node));
    for (model::NodeIndex node : f.slice.peer_nodes) in_slice.insert(NodeName(node));
    for (model::NodeIndex node : f.suspects) in_slice.insert(NodeName(node));
  }
  std::set<std::string> outside;
  const std::string explanation = diagnose::Explanation(trace(), diagnosis());
  for (size_t i = 0; i < trace().nodes.size(); ++i) {
    const std::string name = NodeName(model::NodeIndex(static_cast<uint32_t>(i)));
    if (in_slice.count(name)) continue;
    // A name that is part of a name or text the prompt may hold cannot be told apart.
    bool contained = explanation.find(name) != std::string::npos;
    for (const std::string& kept : in_slice) contained |= kept.find(name) != std::string::npos;
    if (!contained) outside.insert(name);
  }
  ASSERT_FALSE(outside.empty());
  for (const std::string& name : outside) {
    EXPECT_EQ(server.body().find(name), std::string::npos) << name;
  }
  // The key is sent, never written.
  const std::string json = DiagnosisJsonWithNarrative(trace(), diagnosis(), narrative);
  EXPECT_EQ(json.find("sk-test-secret"), std::string::npos);
}

TEST_F(ExplainClientTest, EndpointWithV1ReachesTheSamePath) {
  ChatServer server(ChatServer::Mode::kReply, "The all-reduce is slow.");
  ExplainerOptions options = Options(server);
  options.chat.endpoint = server.endpoint() + "/v1/";
  const Narrative narrative = ExplainDiagnosis(trace(), diagnosis(), options);
  EXPECT_TRUE(narrative.used) << narrative.status;
  EXPECT_EQ(server.path(), "/v1/chat/completions");
  EXPECT_EQ(server.requests(), 1);
}

TEST_F(ExplainClientTest, ReplyCitingAStepOrKernelNotInThePromptIsFlagged) {
  ChatServer server(ChatServer::Mode::kReply,
                    "The fault began at step 99999 on rank 0, in fake_kernel_xyz.");
  const Narrative narrative = ExplainDiagnosis(trace(), diagnosis(), Options(server));
  ASSERT_TRUE(narrative.used) << narrative.status;
  EXPECT_NE(std::find(narrative.unverified.begin(), narrative.unverified.end(), "step 99999"),
            narrative.unverified.end());
  EXPECT_NE(std::find(narrative.unverified.begin(), narrative.unverified.end(), "fake_kernel_xyz"),
            narrative.unverified.end());
  EXPECT_NE(narrative.status.find("; unverified mention: step 99999"), std::string::npos)
      << narrative.status;
}

void ExpectFallback(const Narrative& narrative, const std::string& reason) {
  EXPECT_FALSE(narrative.used);
  EXPECT_TRUE(narrative.text.empty());
  EXPECT_EQ(narrative.status.rfind("llm unavailable: ", 0), 0u) << narrative.status;
  EXPECT_NE(narrative.status.find(reason), std::string::npos) << narrative.status;
  const std::string tail = "; grounded explanation shown";
  ASSERT_GE(narrative.status.size(), tail.size());
  EXPECT_EQ(narrative.status.substr(narrative.status.size() - tail.size()), tail);
}

TEST_F(ExplainClientTest, ServerSlowerThanTheTimeoutFallsBack) {
  ChatServer server(ChatServer::Mode::kSleepPastTimeout);
  ExpectFallback(ExplainDiagnosis(trace(), diagnosis(), Options(server, 0.3)),
                 "no answer from " + server.endpoint() + "/v1/chat/completions within 0.3 s");
}

TEST_F(ExplainClientTest, HttpErrorFallsBack) {
  ChatServer server(ChatServer::Mode::kHttp500);
  ExpectFallback(ExplainDiagnosis(trace(), diagnosis(), Options(server)), "answered HTTP 500");
}

TEST_F(ExplainClientTest, MalformedJsonFallsBack) {
  ChatServer server(ChatServer::Mode::kMalformedJson);
  ExpectFallback(ExplainDiagnosis(trace(), diagnosis(), Options(server)), "malformed JSON");
}

TEST_F(ExplainClientTest, EmptyContentFallsBack) {
  ChatServer server(ChatServer::Mode::kEmptyContent);
  ExpectFallback(ExplainDiagnosis(trace(), diagnosis(), Options(server)), "empty content");
}

TEST_F(ExplainClientTest, ConnectionRefusedFallsBack) {
  // A port that was just free: bind, read it, close.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  ExplainerOptions options;
  options.kind = ExplainerKind::kOpenAiCompatible;
  options.chat.endpoint = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  options.chat.model = "test-model";
  ExpectFallback(ExplainDiagnosis(trace(), diagnosis(), options), "cannot connect to");
}

TEST_F(ExplainTest, WithoutLibcurlTheExplainerSaysSo) {
  if (ChatTransportAvailable()) GTEST_SKIP() << "built with libcurl";
  ExplainerOptions options;
  options.kind = ExplainerKind::kOpenAiCompatible;
  options.chat.endpoint = "http://127.0.0.1:9";
  options.chat.model = "test-model";
  ExpectFallback(ExplainDiagnosis(trace(), diagnosis(), options), "built without libcurl");
}

TEST_F(ExplainTest, GroundedExplainerSendsNothingAndLeavesTheJsonAsItWas) {
  const Narrative grounded = ExplainDiagnosis(trace(), diagnosis(), ExplainerOptions{});
  EXPECT_FALSE(grounded.used);
  EXPECT_TRUE(grounded.status.empty());
  EXPECT_EQ(grounded.prompt_bytes, 0u);
  EXPECT_EQ(DiagnosisJsonWithNarrative(trace(), diagnosis(), grounded),
            diagnose::DiagnosisToJson(trace(), diagnosis()));

  Narrative fallback;
  fallback.kind = ExplainerKind::kOpenAiCompatible;
  fallback.status = "llm unavailable: test; grounded explanation shown";
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(DiagnosisJsonWithNarrative(trace(), diagnosis(), fallback));
  std::vector<std::string> keys;
  for (auto it = json.begin(); it != json.end(); ++it) keys.push_back(it.key());
  auto next = std::find(keys.begin(), keys.end(), "next_action");
  ASSERT_NE(next, keys.end());
  ASSERT_LT(next + 2, keys.end());
  EXPECT_EQ(*(next + 1), "narrative_status");
  EXPECT_EQ(*(next + 2), "narrative");
  EXPECT_EQ(json["narrative_status"], fallback.status);
  EXPECT_TRUE(json["narrative"]["text"].is_null());
  EXPECT_EQ(json["narrative"]["explainer"], "openai-compatible");
  // Those that support the cause and the others, at most max_findings of each.
  const auto& findings = diagnosis().findings;
  const size_t supporting = static_cast<size_t>(std::count_if(
      findings.begin(), findings.end(), [](const auto& f) { return f.supports_cause; }));
  const size_t most = diagnosis().max_findings;
  EXPECT_EQ(json["findings"].size(),
            std::min(supporting, most) + std::min(findings.size() - supporting, most));
}

TEST(ExplainerKindTest, TerminalSafeDropsEscapesAndNewlines) {
  EXPECT_EQ(TerminalSafe("Rank 1 is slow.\n\n\x1b[2J  Check\tNCCL.\r\n"),
            "Rank 1 is slow. [2J Check NCCL.");
}

// The report shows the narrative beside the grounded explanation, escaped.
TEST_F(ExplainTest, ReportsShowTheNarrativeAndItsStatus) {
  report::HtmlReportOptions html;
  html.narrative = "<script>alert(1)</script> rank 5 is late";
  html.narrative_status = "llm: used m at http://127.0.0.1:1";
  const std::string page = report::RenderDiagnosisHtml(trace(), diagnosis(), html);
  EXPECT_NE(page.find("id=\"narrative-text\""), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt; rank 5 is late"), std::string::npos);
  EXPECT_EQ(page.find("<script>alert(1)"), std::string::npos);
  EXPECT_NE(page.find("llm: used m at http://127.0.0.1:1"), std::string::npos);
  EXPECT_EQ(report::RenderDiagnosisHtml(trace(), diagnosis()).find("id=\"narrative\""),
            std::string::npos);

  report::DiagnosisTextOptions text;
  text.narrative_status = "llm unavailable: test; grounded explanation shown";
  const std::string summary = report::RenderDiagnosis(trace(), diagnosis(), text);
  EXPECT_NE(summary.find("Narrative\n  llm unavailable: test; grounded explanation shown"),
            std::string::npos)
      << summary;
  EXPECT_LT(summary.find("Explanation"), summary.find("Narrative"));
}

TEST(ExplainerKindTest, NamesRoundTrip) {
  for (ExplainerKind kind : {ExplainerKind::kGrounded, ExplainerKind::kOpenAiCompatible}) {
    EXPECT_EQ(*ExplainerKindFromName(ExplainerKindName(kind)), kind);
  }
  EXPECT_FALSE(ExplainerKindFromName("openai").ok());
}

}  // namespace
}  // namespace teller::explain
