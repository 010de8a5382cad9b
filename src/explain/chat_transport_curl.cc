// The HTTP POST of the chat-completions client, on libcurl: the only file that
// includes it.
#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "explain/chat_client.h"

namespace teller::explain {
namespace {

constexpr size_t kMaxReplyBytes = 8 << 20;  // a chat reply is kilobytes; more is not one

size_t AppendReply(char* data, size_t size, size_t count, void* user) {
  auto* reply = static_cast<std::string*>(user);
  const size_t bytes = size * count;
  if (reply->size() + bytes > kMaxReplyBytes) return 0;  // curl then fails the transfer
  reply->append(data, bytes);
  return bytes;
}

// curl_global_init is not thread-safe in every libcurl build: once, before any handle.
bool GlobalInit() {
  static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return ok;
}

long Milliseconds(double seconds) {
  return static_cast<long>(std::max(1.0, std::ceil(seconds * 1000.0)));
}

struct EasyDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct ListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

bool ChatTransportAvailable() { return true; }

base::StatusOr<std::string> PostJson(const std::string& url, const std::string& body,
                                     const ChatOptions& options) {
  const std::string shown = RedactEndpoint(url);
  if (!GlobalInit()) return base::Internal("libcurl failed to initialize");
  std::unique_ptr<CURL, EasyDeleter> curl(curl_easy_init());
  if (!curl) return base::Internal("libcurl: no easy handle");
  std::unique_ptr<curl_slist, ListDeleter> headers;
  auto add_header = [&](const std::string& header) {
    curl_slist* list = curl_slist_append(headers.get(), header.c_str());
    if (list) {
      (void)headers.release();
      headers.reset(list);
    }
  };
  add_header("Content-Type: application/json");
  add_header("Accept: application/json");
  add_header("Expect:");  // no 100-continue round trip before the body
  if (!options.api_key.empty()) add_header("Authorization: Bearer " + options.api_key);
  std::string reply;
  char error[CURL_ERROR_SIZE] = {0};
  CURL* handle = curl.get();
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_POST, 1L);
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, AppendReply);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &reply);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, Milliseconds(options.timeout_s));
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS,
                   Milliseconds(std::min(options.connect_timeout_s, options.timeout_s)));
  curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
  const CURLcode code = curl_easy_perform(handle);
  if (code != CURLE_OK) {
    const std::string detail = error[0] ? error : curl_easy_strerror(code);
    if (code == CURLE_OPERATION_TIMEDOUT) {
      return base::IoError("no answer from {} within {:g} s ({})", shown, options.timeout_s,
                           detail);
    }
    if (code == CURLE_COULDNT_CONNECT) {
      return base::IoError("cannot connect to {} ({})", shown, detail);
    }
    return base::IoError("request to {} failed: {}", shown, detail);
  }
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    std::string start = EscapeForPrompt(reply, 200);
    return base::IoError("{} answered HTTP {}{}", shown, status,
                         start.empty() ? "" : " (\"" + start + "\")");
  }
  return reply;
}

}  // namespace teller::explain
