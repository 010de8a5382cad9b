// Isolation Forest comparison method: localize's forest (localize/isolation_forest.h) on
// the standardized rows; the score is its 2^(-E[h(x)]/c(n)), deterministic for
// the seed.
#include <memory>

#include "comparisons/learners.h"
#include "localize/isolation_forest.h"

namespace teller::comparisons {
namespace {

class IsolationForestMethod final : public ComparisonMethod {
 public:
  explicit IsolationForestMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kIsolationForest; }
  MethodKind kind() const override { return MethodKind::kUnsupervised; }

 protected:
  base::Status FitUnsupervised(const Matrix& x) override {
    const IsolationForestMethodOptions& settings = options().isolation_forest;
    if (settings.trees < 1 || settings.sample_size < 2) {
      return base::InvalidArgument(
          "isolation_forest: needs trees >= 1 and "
          "sample_size >= 2, got {} and {}",
          settings.trees, settings.sample_size);
    }
    std::vector<double> rows(x.values.begin(), x.values.end());
    forest_ = localize::IsolationForest::Fit(
        rows, static_cast<int>(x.cols),
        localize::IsolationForestOptions{
            .trees = settings.trees, .sample_size = settings.sample_size, .seed = options().seed});
    return base::OkStatus();
  }

  base::StatusOr<std::vector<float>> AnomalyScores(const Matrix& x) const override {
    const std::vector<double> rows(x.values.begin(), x.values.end());
    std::vector<double> scores(static_cast<size_t>(x.rows));
    forest_.ScoreRows(rows.data(), scores.size(), scores.data());
    return std::vector<float>(scores.begin(), scores.end());
  }

 private:
  localize::IsolationForest forest_;
};

}  // namespace

namespace internal {
std::unique_ptr<ComparisonMethod> MakeIsolationForestMethod(const MethodOptions& options) {
  return std::make_unique<IsolationForestMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
