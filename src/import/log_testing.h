// Test and bench only: service-log lines of four engine kinds.
#pragma once

#include <cstdint>
#include <string>

namespace teller::import::testing {

// Line i of a log that cycles through a vLLM request line, an SGLang decode batch, an
// NCCL INFO line and a uvicorn access line, each with numbers that change per line;
// the template miner gives one template per kind.
inline std::string MixedEngineLogLine(int64_t i) {
  switch (i % 4) {
    case 0:
      return "INFO 05-12 10:23:45 [async_llm.py:252] Added request cmpl-" +
             std::to_string(1000000 + i) + "abcdef-0.\n";
    case 1:
      return "[2025-05-12 10:23:45 TP0] Decode batch. #running-req: " + std::to_string(i % 64) +
             ", #token: " + std::to_string(i) + ", token usage: 0.01, #queue-req: 0\n";
    case 2:
      return "node-a:12345:" + std::to_string(i) + " [0] NCCL INFO Channel 00/02 : 0 1\n";
    default:
      return "INFO:     127.0.0.1:" + std::to_string(i % 60000) +
             " - \"POST /v1/completions HTTP/1.1\" 200 OK\n";
  }
}

}  // namespace teller::import::testing
