// Matching log lines against signatures: each line gets the most specific signature
// whose pattern it contains (case-insensitive; '*' matches any run of characters).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "wire/signature_catalog_file.h"

namespace teller::signatures {

struct Signature {
  wire::SignatureEntry entry;
  std::string origin;  // the catalog file it came from ("cuda.json", a user's path)
};

struct SignatureMatch {
  const Signature* signature = nullptr;  // null: no signature matched
  size_t literal_chars = 0;              // specificity of the pattern that matched
  size_t begin = 0, end = 0;             // the text it matched in the line
  explicit operator bool() const { return signature != nullptr; }
};

class SignatureCatalog {
 public:
  // Adds a file's entries. An entry whose id is already in the catalog replaces it (a
  // user's file overrides a built-in entry); two entries of one file may not share an id.
  base::Status Add(wire::SignatureCatalogFile file, std::string origin);

  // The signature of the pattern with the most literal characters that line contains;
  // ties go to the entry added last.
  SignatureMatch Match(std::string_view line) const;
  // Every signature line matches (one match each, its most specific pattern), most
  // specific first: a line may carry a wrapper's text and the error it wraps
  // ("CUDA runtime error in f(): an illegal memory access was encountered").
  std::vector<SignatureMatch> MatchAll(std::string_view line) const;

  const Signature* Find(std::string_view id) const;
  const std::vector<Signature>& signatures() const { return signatures_; }
  size_t size() const { return signatures_.size(); }

 private:
  struct CompiledPattern {
    std::vector<std::string> pieces;  // lower-case literal runs between '*'
    size_t anchor = 0;                // the longest piece: tried first
    size_t literal_chars = 0;
    uint32_t signature = 0;
  };
  void Compile();
  // Calls visit(pattern) for each pattern line contains, most specific first, until it
  // returns false; visit gets the pattern and the span it matched.
  template <typename Visit>
  void ForEachMatch(std::string_view line, Visit visit) const;

  std::vector<Signature> signatures_;
  std::vector<CompiledPattern> patterns_;  // most literal characters first
};

// True when the pieces occur in line in order (line and pieces lower case); *begin and
// *end (when given) get the leftmost such match.
bool PiecesOccurInOrder(std::string_view line, const std::vector<std::string>& pieces,
                        size_t* begin = nullptr, size_t* end = nullptr);

}  // namespace teller::signatures
