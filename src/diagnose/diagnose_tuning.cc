#include "diagnose/diagnose_tuning.h"

namespace teller::diagnose {
namespace {

// Calls visit(name, field) for every tuned field of the options, in the registry's order.
template <class Options, class Visit>
void VisitTuned(Options& options, Visit&& visit) {
#define TELLER_VISIT_DIAGNOSE(group, type, field, value, meaning, chosen) \
  visit(#group "." #field, options.field);
#define TELLER_VISIT_DEVIATION(group, type, field, value, meaning, chosen) \
  visit(#group "." #field, options.deviation.field);
#define TELLER_VISIT_CAUSE(group, type, field, value, meaning, chosen) \
  visit(#group "." #field, options.causes.field);
#define TELLER_VISIT_HANG(group, type, field, value, meaning, chosen) \
  visit(#group "." #field, options.hang.field);
#define TELLER_VISIT_OOM(group, type, field, value, meaning, chosen) \
  visit(#group "." #field, options.oom.field);
  TELLER_TUNED_DIAGNOSE(TELLER_VISIT_DIAGNOSE)
  TELLER_TUNED_DEVIATION(TELLER_VISIT_DEVIATION)
  TELLER_TUNED_CAUSE(TELLER_VISIT_CAUSE)
  TELLER_TUNED_HANG(TELLER_VISIT_HANG)
  TELLER_TUNED_OOM(TELLER_VISIT_OOM)
#undef TELLER_VISIT_DIAGNOSE
#undef TELLER_VISIT_DEVIATION
#undef TELLER_VISIT_CAUSE
#undef TELLER_VISIT_HANG
#undef TELLER_VISIT_OOM
}

}  // namespace

base::Status ApplyTuning(const base::TuningOverride& tuned, DiagnoseOptions* options) {
  bool found = false;
  VisitTuned(*options, [&](std::string_view name, auto& field) {
    if (name != tuned.name) return;
    base::AssignTuned(tuned.value, &field);
    found = true;
  });
  if (found) return base::OkStatus();
  return base::InvalidArgument("--tune: no tuned value is named '{}' (`teller tuning` lists them)",
                               tuned.name);
}

std::vector<std::pair<std::string, double>> TuningOf(const DiagnoseOptions& options) {
  std::vector<std::pair<std::string, double>> values;
  VisitTuned(options, [&](std::string_view name, const auto& field) {
    values.emplace_back(std::string(name), static_cast<double>(field));
  });
  return values;
}

}  // namespace teller::diagnose
