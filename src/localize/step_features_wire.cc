#include "localize/step_features_wire.h"

#include <algorithm>
#include <vector>

#include "base/byte_io.h"
#include "localize/operator_family.h"

namespace teller::localize {
namespace {

constexpr std::string_view kSummaryMagic = "TLFS";
constexpr std::string_view kMergedMagic = "TLFM";

template <typename T>
bool StrictlyAscending(const std::vector<T>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::greater_equal<T>()) == values.end();
}

// Offsets from 0 to the bigrams' size, ascending; each composition's bigrams in range
// and strictly ascending (FinishStepFeatures searches them).
base::Status CheckUsualPairs(const base::WireReader& in, const MergedStepFeatureSummary& m) {
  if (m.usual_begin.empty()) {
    if (!m.usual_bigram.empty()) return in.Bad("usual_bigram rows without usual_begin");
    return base::OkStatus();
  }
  if (m.usual_begin.front() != 0 || m.usual_begin.back() != m.usual_bigram.size() ||
      !std::is_sorted(m.usual_begin.begin(), m.usual_begin.end())) {
    return in.Bad("usual_begin not ascending from 0 to the usual_bigram rows");
  }
  constexpr uint32_t kBigrams = kOperatorFamilyCount * kOperatorFamilyCount;
  for (size_t c = 0; c < m.compositions(); ++c) {
    const std::vector<uint32_t> pairs(m.usual_bigram.begin() + m.usual_begin[c],
                                      m.usual_bigram.begin() + m.usual_begin[c + 1]);
    if (!StrictlyAscending(pairs) || (!pairs.empty() && pairs.back() >= kBigrams)) {
      return in.Bad(fmt::format("usual bigrams of composition {} not ascending in range", c));
    }
  }
  return base::OkStatus();
}

base::Status CheckMerged(const base::WireReader& in, const MergedStepFeatureSummary& m) {
  TELLER_RETURN_IF_ERROR(in.SameRows(m.match, "match", m.match_skew_ns, "match_skew_ns"));
  TELLER_RETURN_IF_ERROR(in.SameRows(m.usual_bigram, "usual_bigram", m.usual_times, "usual_times"));
  if (m.composition_family_count.size() != m.compositions() * kOperatorFamilyCount) {
    return in.Bad(fmt::format("{} rows of composition_family_count for {} compositions",
                              m.composition_family_count.size(), m.compositions()));
  }
  if (!StrictlyAscending(m.match)) return in.Bad("match ids not distinct and ascending");
  return CheckUsualPairs(in, m);
}

}  // namespace

std::string EncodeStepFeatureSummary(const StepFeatureSummary& summary) {
  base::WireWriter out(kSummaryMagic, kStepFeaturesWireVersion);
  out.Column(summary.match);
  out.Column(summary.match_min_end_ns);
  out.Column(summary.match_max_end_ns);
  out.Column(summary.composition_family_count);
  out.Column(summary.composition_steps);
  out.Column(summary.histogram_composition);
  out.Column(summary.histogram_bigram);
  out.Column(summary.histogram_times);
  out.Column(summary.histogram_steps);
  return out.Take();
}

base::StatusOr<StepFeatureSummary> DecodeStepFeatureSummary(std::string_view bytes) {
  static const std::string kWhat = "step feature summary";
  base::WireReader in(bytes, kWhat);
  StepFeatureSummary s;
  TELLER_RETURN_IF_ERROR(in.Header(kSummaryMagic, kStepFeaturesWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("match", &s.match));
  TELLER_RETURN_IF_ERROR(in.Column("match_min_end_ns", &s.match_min_end_ns));
  TELLER_RETURN_IF_ERROR(in.Column("match_max_end_ns", &s.match_max_end_ns));
  TELLER_RETURN_IF_ERROR(in.Column("composition_family_count", &s.composition_family_count));
  TELLER_RETURN_IF_ERROR(in.Column("composition_steps", &s.composition_steps));
  TELLER_RETURN_IF_ERROR(in.Column("histogram_composition", &s.histogram_composition));
  TELLER_RETURN_IF_ERROR(in.Column("histogram_bigram", &s.histogram_bigram));
  TELLER_RETURN_IF_ERROR(in.Column("histogram_times", &s.histogram_times));
  TELLER_RETURN_IF_ERROR(in.Column("histogram_steps", &s.histogram_steps));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckStepFeatureSummary(s));
  return s;
}

std::string EncodeMergedStepFeatureSummary(const MergedStepFeatureSummary& merged) {
  base::WireWriter out(kMergedMagic, kStepFeaturesWireVersion);
  out.Column(merged.match);
  out.Column(merged.match_skew_ns);
  out.Column(merged.composition_family_count);
  out.Column(merged.usual_begin);
  out.Column(merged.usual_bigram);
  out.Column(merged.usual_times);
  return out.Take();
}

base::StatusOr<MergedStepFeatureSummary> DecodeMergedStepFeatureSummary(std::string_view bytes) {
  static const std::string kWhat = "merged step feature summary";
  base::WireReader in(bytes, kWhat);
  MergedStepFeatureSummary m;
  TELLER_RETURN_IF_ERROR(in.Header(kMergedMagic, kStepFeaturesWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("match", &m.match));
  TELLER_RETURN_IF_ERROR(in.Column("match_skew_ns", &m.match_skew_ns));
  TELLER_RETURN_IF_ERROR(in.Column("composition_family_count", &m.composition_family_count));
  TELLER_RETURN_IF_ERROR(in.Column("usual_begin", &m.usual_begin));
  TELLER_RETURN_IF_ERROR(in.Column("usual_bigram", &m.usual_bigram));
  TELLER_RETURN_IF_ERROR(in.Column("usual_times", &m.usual_times));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckMerged(in, m));
  return m;
}

}  // namespace teller::localize
