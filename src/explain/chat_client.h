// An OpenAI-compatible chat-completions client (vLLM, SGLang, llama.cpp, any server
// that speaks POST /v1/chat/completions): the URL, the request body, the reply
// parser, and the HTTP POST (libcurl; chat_transport_curl.cc is the only file that
// includes it; without libcurl at configure time, chat_transport_none.cc says so).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "explain/narrative_prompt.h"

namespace teller::explain {

struct ChatOptions {
  std::string endpoint;  // "http://host:8000", with or without "/v1"
  std::string model;
  std::string api_key;              // sent as "Authorization: Bearer"; never written anywhere
  double timeout_s = 60.0;          // whole request
  double connect_timeout_s = 10.0;  // capped by timeout_s
  int max_tokens = 512;
};

// "{endpoint}/v1/chat/completions"; an endpoint that already ends in "/v1" or in
// "/v1/chat/completions" is not doubled, one without a scheme gets "http://".
base::StatusOr<std::string> ChatCompletionsUrl(std::string_view endpoint);

// The endpoint as shown in statuses: user:password@ removed.
std::string RedactEndpoint(std::string_view endpoint);

// {"model", "messages": [system, user], "temperature": 0, "max_tokens"}.
std::string ChatRequestBody(const NarrativeRequest& request, std::string_view model,
                            int max_tokens);

// choices[0].message.content of a chat-completions reply; an error for malformed
// JSON, a reply without it, or empty content.
base::StatusOr<std::string> ParseChatReply(std::string_view body);

// False when teller was built without libcurl.
bool ChatTransportAvailable();

// POSTs `body` as JSON to `url`; the reply body of a 2xx answer, else an error that
// names the cause (timeout, connection refused, HTTP status and the start of its body).
base::StatusOr<std::string> PostJson(const std::string& url, const std::string& body,
                                     const ChatOptions& options);

// URL + body + POST + parse.
base::StatusOr<std::string> CompleteChat(const NarrativeRequest& request,
                                         const ChatOptions& options);

}  // namespace teller::explain
