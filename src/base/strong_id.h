// StrongId: an integer id that does not mix with other ids or plain integers.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace teller::base {

template <typename Tag, typename Rep = int64_t>
class StrongId {
 public:
  using rep_type = Rep;
  static constexpr Rep kInvalidValue = std::numeric_limits<Rep>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}

  static constexpr StrongId Invalid() { return StrongId(kInvalidValue); }
  constexpr bool valid() const { return value_ != kInvalidValue; }
  constexpr Rep value() const { return value_; }

  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  Rep value_ = kInvalidValue;
};

}  // namespace teller::base

template <typename Tag, typename Rep>
struct std::hash<teller::base::StrongId<Tag, Rep>> {
  size_t operator()(const teller::base::StrongId<Tag, Rep>& id) const {
    return std::hash<Rep>()(id.value());
  }
};
