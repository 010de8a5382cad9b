#include "signatures/signature_catalog.h"

#include <algorithm>
#include <set>

namespace teller::signatures {
namespace {

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string Lowered(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = Lower(c);
  return out;
}

std::vector<std::string> PiecesOf(std::string_view pattern) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start <= pattern.size()) {
    const size_t star = std::min(pattern.find('*', start), pattern.size());
    if (star > start) pieces.push_back(Lowered(pattern.substr(start, star - start)));
    start = star + 1;
  }
  return pieces;
}

}  // namespace

bool PiecesOccurInOrder(std::string_view line, const std::vector<std::string>& pieces,
                        size_t* begin, size_t* end) {
  // Leftmost match of each piece after the previous one is exact for '*'-only globs.
  size_t at = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t found = line.find(pieces[i], at);
    if (found == std::string_view::npos) return false;
    if (i == 0 && begin != nullptr) *begin = found;
    at = found + pieces[i].size();
  }
  if (end != nullptr) *end = at;
  return true;
}

base::Status SignatureCatalog::Add(wire::SignatureCatalogFile file, std::string origin) {
  std::set<std::string> ids_of_file;
  for (wire::SignatureEntry& entry : file.entries) {
    if (!ids_of_file.insert(entry.id).second) {
      return base::InvalidArgument("{}: entry id \"{}\" appears twice", origin, entry.id);
    }
    auto same_id = std::find_if(signatures_.begin(), signatures_.end(),
                                [&](const Signature& s) { return s.entry.id == entry.id; });
    if (same_id != signatures_.end()) signatures_.erase(same_id);
    signatures_.push_back({std::move(entry), origin});
  }
  Compile();
  return base::OkStatus();
}

void SignatureCatalog::Compile() {
  patterns_.clear();
  for (uint32_t s = 0; s < signatures_.size(); ++s) {
    for (const std::string& pattern : signatures_[s].entry.patterns) {
      CompiledPattern compiled;
      compiled.pieces = PiecesOf(pattern);
      compiled.signature = s;
      for (size_t i = 0; i < compiled.pieces.size(); ++i) {
        compiled.literal_chars += compiled.pieces[i].size();
        if (compiled.pieces[i].size() > compiled.pieces[compiled.anchor].size()) {
          compiled.anchor = i;
        }
      }
      patterns_.push_back(std::move(compiled));
    }
  }
  std::stable_sort(patterns_.begin(), patterns_.end(),
                   [](const CompiledPattern& a, const CompiledPattern& b) {
                     if (a.literal_chars != b.literal_chars) {
                       return a.literal_chars > b.literal_chars;
                     }
                     return a.signature > b.signature;  // added last wins a tie
                   });
}

template <typename Visit>
void SignatureCatalog::ForEachMatch(std::string_view line, Visit visit) const {
  const std::string lowered = Lowered(line);
  for (const CompiledPattern& pattern : patterns_) {
    if (pattern.literal_chars > lowered.size()) continue;
    if (lowered.find(pattern.pieces[pattern.anchor]) == std::string::npos) continue;
    size_t begin = 0, end = 0;
    if (!PiecesOccurInOrder(lowered, pattern.pieces, &begin, &end)) continue;
    if (!visit(pattern, begin, end)) return;
  }
}

SignatureMatch SignatureCatalog::Match(std::string_view line) const {
  SignatureMatch match;
  ForEachMatch(line, [&](const CompiledPattern& pattern, size_t begin, size_t end) {
    match = {&signatures_[pattern.signature], pattern.literal_chars, begin, end};
    return false;
  });
  return match;
}

std::vector<SignatureMatch> SignatureCatalog::MatchAll(std::string_view line) const {
  std::vector<SignatureMatch> matches;
  ForEachMatch(line, [&](const CompiledPattern& pattern, size_t begin, size_t end) {
    const Signature* signature = &signatures_[pattern.signature];
    for (const SignatureMatch& seen : matches) {
      if (seen.signature == signature) return true;
    }
    matches.push_back({signature, pattern.literal_chars, begin, end});
    return true;
  });
  return matches;
}

const Signature* SignatureCatalog::Find(std::string_view id) const {
  for (const Signature& signature : signatures_) {
    if (signature.entry.id == id) return &signature;
  }
  return nullptr;
}

}  // namespace teller::signatures
