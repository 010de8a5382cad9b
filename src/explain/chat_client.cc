#include "explain/chat_client.h"

#include <nlohmann/json.hpp>

namespace teller::explain {

base::StatusOr<std::string> ChatCompletionsUrl(std::string_view endpoint) {
  std::string url(endpoint);
  while (!url.empty() && (url.back() == ' ' || url.back() == '\n')) url.pop_back();
  if (url.empty()) return base::InvalidArgument("explainer: no endpoint given (--endpoint URL)");
  if (url.find("://") == std::string::npos) url = "http://" + url;
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return base::InvalidArgument("explainer: endpoint {} is not an http:// or https:// URL",
                                 RedactEndpoint(endpoint));
  }
  while (url.back() == '/') url.pop_back();
  constexpr std::string_view kPath = "/chat/completions";
  if (url.size() >= kPath.size() &&
      url.compare(url.size() - kPath.size(), kPath.size(), kPath) == 0) {
    return url;
  }
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0)
    return url + std::string(kPath);
  return url + "/v1" + std::string(kPath);
}

std::string RedactEndpoint(std::string_view endpoint) {
  const size_t scheme = endpoint.find("://");
  const size_t host_start = scheme == std::string_view::npos ? 0 : scheme + 3;
  const size_t path = endpoint.find('/', host_start);
  const size_t at = endpoint.substr(0, path).rfind('@');
  if (at == std::string_view::npos || at < host_start) return std::string(endpoint);
  return std::string(endpoint.substr(0, host_start)) + std::string(endpoint.substr(at + 1));
}

std::string ChatRequestBody(const NarrativeRequest& request, std::string_view model,
                            int max_tokens) {
  nlohmann::ordered_json body{{"model", model},
                              {"messages",
                               {{{"role", "system"}, {"content", request.system}},
                                {{"role", "user"}, {"content", request.user}}}},
                              {"temperature", 0},
                              {"max_tokens", max_tokens}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

base::StatusOr<std::string> ParseChatReply(std::string_view body) {
  const nlohmann::json reply = nlohmann::json::parse(body, nullptr, false);
  auto start = [&] { return EscapeForPrompt(body, 120); };
  if (reply.is_discarded()) {
    return base::DataLoss("malformed JSON in the chat-completions reply (starts \"{}\")", start());
  }
  if (!reply.is_object() || !reply.contains("choices") || !reply["choices"].is_array() ||
      reply["choices"].empty()) {
    if (reply.is_object() && reply.contains("error")) {
      return base::DataLoss("the server answered an error: {}",
                            reply["error"].dump().substr(0, 200));
    }
    return base::DataLoss("chat-completions reply without choices (starts \"{}\")", start());
  }
  const nlohmann::json& choice = reply["choices"][0];
  if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object() ||
      !choice["message"].contains("content")) {
    return base::DataLoss("chat-completions reply without choices[0].message.content");
  }
  const nlohmann::json& content = choice["message"]["content"];
  if (!content.is_string()) {
    return base::DataLoss("choices[0].message.content is not a string");
  }
  std::string text = content.get<std::string>();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return base::DataLoss("the model answered empty content");
  }
  return text;
}

base::StatusOr<std::string> CompleteChat(const NarrativeRequest& request,
                                         const ChatOptions& options) {
  TELLER_ASSIGN_OR_RETURN(const std::string url, ChatCompletionsUrl(options.endpoint));
  if (options.model.empty())
    return base::InvalidArgument("explainer: no model given (--model NAME)");
  if (!ChatTransportAvailable()) {
    return base::Unimplemented(
        "teller was built without libcurl (install libcurl4-openssl-dev and reconfigure)");
  }
  TELLER_ASSIGN_OR_RETURN(
      const std::string reply,
      PostJson(url, ChatRequestBody(request, options.model, options.max_tokens), options));
  return ParseChatReply(reply);
}

}  // namespace teller::explain
