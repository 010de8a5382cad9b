// Built when CMake found no libcurl: the explainer falls back to the grounded explanation.
#include "explain/chat_client.h"

namespace teller::explain {

bool ChatTransportAvailable() { return false; }

base::StatusOr<std::string> PostJson(const std::string& url, const std::string& body,
                                     const ChatOptions& options) {
  return base::Unimplemented(
      "teller was built without libcurl (install libcurl4-openssl-dev and reconfigure)");
}

}  // namespace teller::explain
