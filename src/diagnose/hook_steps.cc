#include "diagnose/hook_steps.h"

#include <algorithm>
#include <set>

#include "fmt/format.h"
#include "wire/bundle_meta.h"

namespace teller::diagnose {

std::string HooksWithoutStepsNote(const model::Trace& trace) {
  if (trace.meta.meta_json.empty()) return "";
  auto meta = wire::ParseBundleMeta(trace.meta.meta_json, "meta.json");
  if (!meta.ok()) return "";
  const bool hooks_on = std::any_of(meta->capture.begin(), meta->capture.end(), [](const auto& l) {
    return l.layer == "python_hooks" && l.enabled;
  });
  if (!hooks_on) return "";
  const auto& layers = trace.events.layer;
  if (std::find(layers.begin(), layers.end(), model::Layer::kStep) != layers.end()) return "";
  std::set<model::StepSource> sources(trace.steps.source.begin(), trace.steps.source.end());
  std::string from;
  for (model::StepSource source : sources) {
    from += fmt::format("{}{}", from.empty() ? "" : ", ", model::StepSourceName(source));
  }
  return fmt::format(
      "the Python hooks were on but no STEP hook fired (no engine step range): {}; the "
      "engine's step function may have moved (see the notes 'hook ... did not attach') or "
      "is not one the default hooks know (docs/capture.md; --python-hooks=FILE)",
      from.empty() ? "no steps were found" : "the steps come from " + from);
}

}  // namespace teller::diagnose
