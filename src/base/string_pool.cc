#include "base/string_pool.h"

#include <cstring>

namespace teller::base {
namespace {
constexpr size_t kBlockSize = 1 << 20;
}  // namespace

size_t StringPool::Hash::operator()(std::string_view text) const {
  // FNV-1a over 8-byte words; strings here are short and hashing is hot.
  uint64_t hash = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    hash = (hash ^ word) * 1099511628211ull;
    hash ^= hash >> 29;
  }
  for (; i < text.size(); ++i) hash = (hash ^ static_cast<uint8_t>(text[i])) * 1099511628211ull;
  return static_cast<size_t>(hash ^ (hash >> 32));
}

StringPool::StringPool() {
  views_.emplace_back();
  index_.emplace(std::string_view(), 0);
}

char* StringPool::Allocate(size_t size) {
  if (blocks_.empty() || block_used_ + size > block_size_) {
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(kBlockSize));  // no 1 MB memset
    block_used_ = 0;
    block_size_ = kBlockSize;
  }
  char* out = blocks_.back().get() + block_used_;
  block_used_ += size;
  return out;
}

StringId StringPool::Intern(std::string_view text) {
  auto it = index_.find(text);
  if (it != index_.end()) return StringId(it->second);
  char* storage = nullptr;
  if (!text.empty()) {
    if (text.size() > kBlockSize / 4) {
      // A large string gets its own block; the current small block stays open.
      auto block = std::make_unique_for_overwrite<char[]>(text.size());
      storage = block.get();
      blocks_.insert(blocks_.end() - (blocks_.empty() ? 0 : 1), std::move(block));
    } else {
      storage = Allocate(text.size());
    }
    std::memcpy(storage, text.data(), text.size());
  }
  std::string_view stored(storage, text.size());
  auto id = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  index_.emplace(stored, id);
  total_bytes_ += text.size();
  return StringId(id);
}

StringId StringPool::Find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? StringId::Invalid() : StringId(it->second);
}

}  // namespace teller::base
