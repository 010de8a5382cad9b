// The registry of tuned values (base/tuning_list.h) as data: each value's name, type,
// default, meaning and where it was chosen, for `teller tuning`, docs/tuning.md and the
// checks of `teller diagnose --tune name=value`. The values themselves are fields of the
// stages' options structs, declared from the same lists with TELLER_TUNED_FIELD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/robust.h"
#include "base/status.h"
#include "base/tuning_list.h"

// Declares one tuned value as a field of an options struct: `TELLER_TUNED_CAUSE(
// TELLER_TUNED_FIELD)` inside CauseOptions gives `double drift = 3.0;` and the rest.
#define TELLER_TUNED_FIELD(group, type, field, value, meaning, chosen) type field = value;

namespace teller::base {

struct TunedValue {
  std::string_view group;  // "diagnose", "deviation", "cause"
  std::string_view field;  // the options struct's field
  std::string_view type;   // "double", "size_t", "int64_t"
  std::string_view default_text;
  double default_value = 0.0;
  std::string_view meaning;
  std::string_view chosen;  // the data set, seed and command that chose it, or why not tuned
  std::string Name() const;  // "cause.drift"
};

// Every registered value, in the lists' order.
std::span<const TunedValue> TunedValues();
const TunedValue* FindTunedValue(std::string_view name);

// One `--tune` argument: "cause.drift=2.5".
struct TuningOverride {
  std::string name;
  double value = 0.0;
};
// Checks the name is registered and the value fits its type (integers whole and >= 0,
// every value finite).
StatusOr<TuningOverride> ParseTuningOverride(std::string_view text);

// `teller tuning`: one line a value; markdown: docs/tuning.md.
std::string RenderTunedValues(bool markdown);

// Writes a checked override into a field of the registered type.
template <class T>
void AssignTuned(double value, T* field) {
  *field = static_cast<T>(value);
}

}  // namespace teller::base
