#include "explain/narrative.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "diagnose/diagnosis_json.h"
#include "explain/grounding.h"

namespace teller::explain {

std::string_view ExplainerKindName(ExplainerKind kind) {
  return kind == ExplainerKind::kGrounded ? "grounded" : "openai-compatible";
}

base::StatusOr<ExplainerKind> ExplainerKindFromName(std::string_view name) {
  if (name == "grounded") return ExplainerKind::kGrounded;
  if (name == "openai-compatible") return ExplainerKind::kOpenAiCompatible;
  return base::InvalidArgument("unknown explainer \"{}\": expected grounded or openai-compatible",
                               std::string(name));
}

Narrative ExplainDiagnosis(const model::Trace& trace, const diagnose::Diagnosis& diagnosis,
                           const ExplainerOptions& options) {
  Narrative narrative;
  narrative.kind = options.kind;
  if (options.kind == ExplainerKind::kGrounded) return narrative;
  const NarrativeRequest request = BuildNarrativePrompt(trace, diagnosis, options.limits);
  narrative.prompt_bytes = request.system.size() + request.user.size();
  base::StatusOr<std::string> reply = CompleteChat(request, options.chat);
  if (!reply.ok()) {
    narrative.status =
        fmt::format("llm unavailable: {}; grounded explanation shown", reply.status().message());
    return narrative;
  }
  narrative.used = true;
  narrative.text = std::move(reply).value();
  narrative.unverified = UnverifiedMentions(narrative.text, request);
  narrative.status =
      fmt::format("llm: used {} at {}", options.chat.model, RedactEndpoint(options.chat.endpoint));
  if (!narrative.unverified.empty()) {
    narrative.status +=
        "; unverified mention: " + fmt::format("{}", fmt::join(narrative.unverified, ", "));
  }
  return narrative;
}

std::string TerminalSafe(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool blank = static_cast<unsigned char>(c) <= 0x20 || c == 0x7F;
    if (!blank) {
      out += c;
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string DiagnosisJsonWithNarrative(const model::Trace& trace,
                                       const diagnose::Diagnosis& diagnosis,
                                       const Narrative& narrative) {
  std::string json = diagnose::DiagnosisToJson(trace, diagnosis);
  if (narrative.kind == ExplainerKind::kGrounded) return json;
  using Json = nlohmann::ordered_json;
  const Json parsed = Json::parse(json, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return json;
  Json entry{{"explainer", ExplainerKindName(narrative.kind)},
             {"used", narrative.used},
             {"text", narrative.used ? Json(narrative.text) : Json(nullptr)},
             {"unverified_mentions", narrative.unverified},
             {"prompt_bytes", narrative.prompt_bytes}};
  Json out = Json::object();
  for (auto it = parsed.begin(); it != parsed.end(); ++it) {
    out[it.key()] = it.value();
    if (it.key() == "next_action") {
      out["narrative_status"] = narrative.status;
      out["narrative"] = entry;
    }
  }
  if (!out.contains("narrative")) {
    out["narrative_status"] = narrative.status;
    out["narrative"] = std::move(entry);
  }
  return out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace teller::explain
