// StringPool: interns strings once; events refer to them by StringId.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/strong_id.h"

namespace teller::base {

struct StringIdTag {};
using StringId = StrongId<StringIdTag, uint32_t>;

class StringPool {
 public:
  StringPool();
  StringPool(const StringPool&) = delete;
  StringPool& operator=(const StringPool&) = delete;
  StringPool(StringPool&&) = default;
  StringPool& operator=(StringPool&&) = default;

  // The empty string is always id 0.
  static constexpr StringId kEmpty = StringId(0);

  StringId Intern(std::string_view text);
  // Returns an invalid id when the text was never interned.
  StringId Find(std::string_view text) const;
  std::string_view Get(StringId id) const { return views_[id.value()]; }
  size_t size() const { return views_.size(); }
  size_t bytes() const { return total_bytes_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const;
  };

  char* Allocate(size_t size);

  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = 0;
  size_t block_size_ = 0;
  size_t total_bytes_ = 0;
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, uint32_t, Hash, std::equal_to<>> index_;
};

}  // namespace teller::base
