#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comparisons/dbscan.h"
#include "comparisons/matrix.h"
#include "comparisons/method.h"

namespace teller::comparisons {
namespace {

// splitmix64 + Box-Muller: a fixed, portable generator for the synthetic data.
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : state_(seed) {}
  double Uniform() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
  }
  double Normal() {
    return std::sqrt(-2.0 * std::log(Uniform())) * std::cos(6.283185307179586 * Uniform());
  }

 private:
  uint64_t state_;
};

struct Dataset {
  Matrix x;
  std::vector<int32_t> y;
};

void AddRow(Dataset* data, const std::vector<double>& row, int32_t label) {
  data->x.values.insert(data->x.values.end(), row.begin(), row.end());
  data->x.cols = static_cast<int64_t>(row.size());
  ++data->x.rows;
  data->y.push_back(label);
}

// `per_class` rows per class; class c is a unit Gaussian centred at 4 * e_c
// (plus a common offset and scale per column, so standardization matters).
Dataset Blobs(int classes, int per_class, int dims, uint64_t seed) {
  TestRng rng(seed);
  Dataset data;
  for (int i = 0; i < per_class; ++i) {
    for (int c = 0; c < classes; ++c) {
      std::vector<double> row(dims);
      for (int d = 0; d < dims; ++d) {
        row[d] = 100.0 * (d + 1) + (d + 1) * (rng.Normal() + (d == c ? 4.0 : 0.0));
      }
      AddRow(&data, row, c);
    }
  }
  return data;
}

// Inliers from a unit Gaussian, label 0; every `outlier_every`-th row is an
// outlier at radius 6..8 in a random direction, label 1.
Dataset PlantedOutliers(int rows, int dims, int outlier_every, uint64_t seed) {
  TestRng rng(seed);
  Dataset data;
  for (int i = 0; i < rows; ++i) {
    std::vector<double> row(dims);
    for (double& v : row) v = rng.Normal();
    const bool outlier = i % outlier_every == outlier_every - 1;
    if (outlier) {
      double norm = 0.0;
      for (double v : row) norm += v * v;
      const double radius = 6.0 + 2.0 * rng.Uniform();
      for (double& v : row) v *= radius / std::sqrt(norm);
    }
    AddRow(&data, row, outlier ? 1 : 0);
  }
  return data;
}

// Probability that a random positive scores above a random negative (ties count
// half).
double Auroc(const std::vector<float>& scores, const std::vector<int32_t>& labels) {
  double above = 0.0, pairs = 0.0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] == 0) continue;
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] != 0) continue;
      pairs += 1.0;
      above += scores[i] > scores[j] ? 1.0 : (scores[i] == scores[j] ? 0.5 : 0.0);
    }
  }
  return pairs > 0 ? above / pairs : 0.0;
}

double Accuracy(const std::vector<int32_t>& predicted, const std::vector<int32_t>& truth) {
  size_t right = 0;
  for (size_t i = 0; i < truth.size(); ++i) right += predicted[i] == truth[i];
  return static_cast<double>(right) / static_cast<double>(truth.size());
}

std::vector<MethodId> AvailableOfKind(MethodKind kind) {
  std::vector<MethodId> ids;
  for (MethodId id : AvailableMethods()) {
    if (KindOf(id) == kind) ids.push_back(id);
  }
  return ids;
}

std::unique_ptr<ComparisonMethod> Make(MethodId id, const MethodOptions& options = {}) {
  auto learner = MakeMethod(id, options);
  EXPECT_TRUE(learner.ok()) << learner.status().ToString();
  return std::move(learner).value();
}

TEST(ComparisonsMatrixTest, StandardizerUsesTrainStatisticsAndZeroesConstantColumns) {
  const Matrix train{3, 2, {1, 5, 2, 5, 3, 5}};  // column 0: mean 2, stddev sqrt(2/3)
  const Standardizer standardizer = Standardizer::Fit(train);
  EXPECT_DOUBLE_EQ(standardizer.mean()[0], 2.0);
  EXPECT_DOUBLE_EQ(standardizer.mean()[1], 5.0);
  EXPECT_DOUBLE_EQ(standardizer.scale()[1], 0.0);
  auto applied = standardizer.Apply(Matrix{1, 2, {4, 9}});
  ASSERT_TRUE(applied.ok());
  EXPECT_NEAR(applied->at(0, 0), 2.0 / std::sqrt(2.0 / 3.0), 1e-5);
  EXPECT_EQ(applied->at(0, 1), 0.0f);
  EXPECT_FALSE(standardizer.Apply(Matrix{1, 3, {1, 2, 3}}).ok());
}

TEST(ComparisonsMatrixTest, ValidateRejectsEmptyShapeMismatchAndNonFinite) {
  EXPECT_FALSE(ValidateMatrix(Matrix{}, "x").ok());
  EXPECT_FALSE(ValidateMatrix(Matrix{2, 2, {1, 2, 3}}, "x").ok());
  const base::Status nan = ValidateMatrix(Matrix{2, 2, {1, 2, NAN, 4}}, "x");
  EXPECT_FALSE(nan.ok());
  EXPECT_NE(nan.message().find("row 1, column 0"), std::string::npos) << nan.message();
  EXPECT_TRUE(ValidateMatrix(Matrix{2, 2, {1, 2, 3, 4}}, "x").ok());
}

TEST(ComparisonsMatrixTest, QuantileInterpolates) {
  EXPECT_FLOAT_EQ(Quantile({4, 1, 3, 2}, 0.0), 1.0f);
  EXPECT_FLOAT_EQ(Quantile({4, 1, 3, 2}, 1.0), 4.0f);
  EXPECT_FLOAT_EQ(Quantile({4, 1, 3, 2}, 0.5), 2.5f);
  EXPECT_FLOAT_EQ(Quantile({}, 0.5), 0.0f);
}

TEST(ComparisonsNamesTest, NamesRoundTripAndKindsMatchThePaper) {
  for (MethodId id :
       {MethodId::kKMeans, MethodId::kDbscan, MethodId::kIsolationForest, MethodId::kGmm,
        MethodId::kSvm, MethodId::kRandomForest, MethodId::kXgboost}) {
    EXPECT_EQ(ParseMethodId(MethodName(id)), id);
  }
  EXPECT_FALSE(ParseMethodId("lstm").has_value());
  EXPECT_EQ(KindOf(MethodId::kGmm), MethodKind::kUnsupervised);
  EXPECT_EQ(KindOf(MethodId::kXgboost), MethodKind::kSupervised);
  EXPECT_TRUE(IsAvailable(MethodId::kDbscan));
  EXPECT_TRUE(IsAvailable(MethodId::kIsolationForest));
#ifdef TELLER_COMPARISONS_OPENCV
  EXPECT_TRUE(IsAvailable(MethodId::kSvm));
#else
  EXPECT_EQ(MakeMethod(MethodId::kSvm).status().code(), base::StatusCode::kUnimplemented);
#endif
}

// Two squares, one isolated point and one border point, by hand (eps 1.5,
// minPts 3): rows 0-3 (unit square at the origin) and 4-6 (L at (10, 10)) are
// core; row 7 (5, 5) has no neighbour; row 8 (2.2, 1) has only (1, 1)
// within 1.5, so it is a border point of the first cluster.
Matrix HandDbscanRows() {
  return Matrix{9, 2, {0, 0, 0, 1, 1, 0, 1, 1, 10, 10, 10, 11, 11, 10, 5, 5, 2.2f, 1}};
}

TEST(ComparisonsDbscanTest, ClustersTheHandCheckedExample) {
  const DbscanClusters result = ClusterDbscan(HandDbscanRows(), 1.5, 3);
  EXPECT_EQ(result.cluster_count, 2);
  EXPECT_EQ(result.cluster, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, -1, 0}));
  EXPECT_EQ(result.core,
            (std::vector<bool>{true, true, true, true, true, true, true, false, false}));
  // With minPts 5 only (1, 1) is core (itself, the three square corners and the
  // border point): one cluster of rows 0-3 and 8; the L and (5, 5) are noise.
  const DbscanClusters sparse = ClusterDbscan(HandDbscanRows(), 1.5, 5);
  EXPECT_EQ(sparse.cluster_count, 1);
  EXPECT_EQ(sparse.cluster, (std::vector<int32_t>{0, 0, 0, 0, -1, -1, -1, -1, 0}));
  EXPECT_EQ(std::count(sparse.core.begin(), sparse.core.end(), true), 1);
  EXPECT_TRUE(sparse.core[3]);
  // With minPts 6 nothing is core: everything is noise.
  const DbscanClusters none = ClusterDbscan(HandDbscanRows(), 1.5, 6);
  EXPECT_EQ(none.cluster_count, 0);
  EXPECT_EQ(std::count(none.cluster.begin(), none.cluster.end(), -1), 9);
}

TEST(ComparisonsDbscanTest, KthNeighbourDistanceOnALine) {
  const Matrix line{3, 1, {0, 1, 3}};
  EXPECT_EQ(KthNeighbourDistance(line, 1), (std::vector<float>{1, 1, 2}));
  EXPECT_EQ(KthNeighbourDistance(line, 2), (std::vector<float>{3, 2, 3}));
  EXPECT_EQ(KthNeighbourDistance(line, 9), (std::vector<float>{3, 2, 3}));
}

TEST(ComparisonsDbscanTest, MethodFlagsNoiseAndRowsFarFromEveryCorePoint) {
  MethodOptions options;
  options.standardize = false;
  options.dbscan.eps = 1.5;
  options.dbscan.min_points = 3;
  auto dbscan = Make(MethodId::kDbscan, options);
  ASSERT_TRUE(dbscan->Fit(HandDbscanRows(), {}).ok());
  EXPECT_FLOAT_EQ(dbscan->threshold(), 1.0f);
  auto train = dbscan->Predict(HandDbscanRows());
  ASSERT_TRUE(train.ok());
  EXPECT_EQ(*train, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 1, 0}));  // exactly the noise
  const Matrix fresh{3, 2, {0.5f, 0.5f, 20, 20, 2.4f, 1}};
  auto predicted = dbscan->Predict(fresh);
  ASSERT_TRUE(predicted.ok());
  EXPECT_EQ(*predicted, (std::vector<int32_t>{0, 1, 0}));  // (2.4, 1) is 1.4 from core (1, 1)
  auto scores = dbscan->Score(fresh);
  ASSERT_TRUE(scores.ok());
  EXPECT_NEAR((*scores)[0], std::sqrt(0.5) / 1.5, 1e-6);
  EXPECT_NEAR((*scores)[2], 1.4 / 1.5, 1e-6);
}

TEST(ComparisonsSupervisedTest, SeparatesHeldOutBinaryAndThreeClassBlobs) {
  const std::vector<MethodId> ids = AvailableOfKind(MethodKind::kSupervised);
  for (int classes : {2, 3}) {
    const Dataset train = Blobs(classes, 100, 4, 11);
    const Dataset test = Blobs(classes, 100, 4, 12);
    for (MethodId id : ids) {
      SCOPED_TRACE(testing::Message() << MethodName(id) << ", " << classes << " classes");
      auto learner = Make(id);
      const base::Status fit = learner->Fit(train.x, train.y);
      ASSERT_TRUE(fit.ok()) << fit.ToString();
      EXPECT_EQ(learner->classes().size(), static_cast<size_t>(classes));
      auto predicted = learner->Predict(test.x);
      ASSERT_TRUE(predicted.ok()) << predicted.status().ToString();
      EXPECT_GT(Accuracy(*predicted, test.y), 0.9);
      auto probabilities = learner->ClassProbabilities(test.x);
      ASSERT_TRUE(probabilities.ok());
      ASSERT_EQ(probabilities->cols, classes);
      auto scores = learner->Score(test.x);
      ASSERT_TRUE(scores.ok());
      for (int64_t r = 0; r < test.x.rows; ++r) {
        const std::span<const float> row = probabilities->Row(r);
        EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), 1.0, 1e-4);
        EXPECT_NEAR((*scores)[r], 1.0f - row[0],
                    1e-6);  // Score = 1 - P(class 0)
      }
      std::vector<int32_t> abnormal(test.y.size());
      for (size_t i = 0; i < test.y.size(); ++i) abnormal[i] = test.y[i] != 0;
      EXPECT_GT(Auroc(*scores, abnormal), 0.9);
    }
  }
}

TEST(ComparisonsSupervisedTest, PredictsTheTrainingLabelsThemselves) {
  Dataset train = Blobs(3, 60, 3, 21);
  Dataset test = Blobs(3, 30, 3, 22);
  const int32_t kLabels[] = {0, 5, 7};
  for (int32_t& y : train.y) y = kLabels[y];
  for (int32_t& y : test.y) y = kLabels[y];
  for (MethodId id : AvailableOfKind(MethodKind::kSupervised)) {
    SCOPED_TRACE(MethodName(id));
    auto learner = Make(id);
    ASSERT_TRUE(learner->Fit(train.x, train.y).ok());
    EXPECT_EQ(learner->classes(), (std::vector<int32_t>{0, 5, 7}));
    auto predicted = learner->Predict(test.x);
    ASSERT_TRUE(predicted.ok());
    EXPECT_GT(Accuracy(*predicted, test.y), 0.9);
  }
}

TEST(ComparisonsUnsupervisedTest, RankPlantedOutliersAboveInliers) {
  const Dataset train = PlantedOutliers(400, 3, 20, 31);
  const Dataset test = PlantedOutliers(400, 3, 20, 32);
  for (MethodId id : AvailableOfKind(MethodKind::kUnsupervised)) {
    SCOPED_TRACE(MethodName(id));
    auto learner = Make(id);
    const base::Status fit = learner->Fit(train.x, {});
    ASSERT_TRUE(fit.ok()) << fit.ToString();
    EXPECT_DOUBLE_EQ(learner->contamination(), kDefaultContamination);
    auto scores = learner->Score(test.x);
    ASSERT_TRUE(scores.ok()) << scores.status().ToString();
    EXPECT_GT(Auroc(*scores, test.y), 0.9);
    auto predicted = learner->Predict(test.x);
    ASSERT_TRUE(predicted.ok());
    for (size_t i = 0; i < predicted->size(); ++i) {
      EXPECT_EQ((*predicted)[i], (*scores)[i] > learner->threshold() ? 1 : 0);
    }
    // Most planted outliers of the test set are flagged (KMeans may spend a
    // centroid on a few of them).
    int planted = 0, flagged = 0;
    for (size_t i = 0; i < test.y.size(); ++i) {
      planted += test.y[i];
      flagged += test.y[i] & (*predicted)[i];
    }
    EXPECT_GE(flagged, planted * 3 / 4) << flagged << " of " << planted;
    std::printf("%s: test AUROC %.3f, %d of %d planted outliers flagged\n",
                std::string(MethodName(id)).c_str(), Auroc(*scores, test.y), flagged, planted);
  }
}

TEST(ComparisonsUnsupervisedTest, LabelsOnlyPickTheContamination) {
  const Dataset train = PlantedOutliers(400, 3, 20, 41);  // 5% outliers
  for (MethodId id : AvailableOfKind(MethodKind::kUnsupervised)) {
    SCOPED_TRACE(MethodName(id));
    auto learner = Make(id);
    ASSERT_TRUE(learner->Fit(train.x, train.y).ok());
    EXPECT_DOUBLE_EQ(learner->contamination(), 0.05);
    if (id == MethodId::kDbscan) continue;  // its threshold is eps, not a quantile
    auto flagged = learner->Predict(train.x);
    ASSERT_TRUE(flagged.ok());
    const auto count = std::count(flagged->begin(), flagged->end(), 1);
    EXPECT_NEAR(static_cast<double>(count), 20.0,
                1.0);  // (1 - 0.05) quantile of 400 scores
  }
  MethodOptions fixed;
  fixed.contamination = 0.2;
  auto forest = Make(MethodId::kIsolationForest, fixed);
  ASSERT_TRUE(forest->Fit(train.x, train.y).ok());
  EXPECT_DOUBLE_EQ(forest->contamination(), 0.2);
}

TEST(ComparisonsDeterminismTest, SameSeedSameScores) {
  const Dataset blobs = Blobs(3, 50, 4, 51);
  const Dataset outliers = PlantedOutliers(300, 4, 10, 52);
  for (MethodId id : AvailableMethods()) {
    SCOPED_TRACE(MethodName(id));
    const Dataset& data = KindOf(id) == MethodKind::kSupervised ? blobs : outliers;
    MethodOptions options;
    options.seed = 1234;
    options.threads = 2;
    auto first = Make(id, options);
    auto second = Make(id, options);
    ASSERT_TRUE(first->Fit(data.x, data.y).ok());
    ASSERT_TRUE(second->Fit(data.x, data.y).ok());
    auto a = first->Score(data.x);
    auto b = second->Score(data.x);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    // Refitting the same object gives the same model too.
    ASSERT_TRUE(first->Fit(data.x, data.y).ok());
    auto c = first->Score(data.x);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*a, *c);
  }
}

TEST(ComparisonsErrorsTest, BadShapesAndLabelsAreStatusesNotCrashes) {
  const Dataset data = Blobs(2, 20, 3, 61);
  for (MethodId id : AvailableMethods()) {
    SCOPED_TRACE(MethodName(id));
    const bool supervised = KindOf(id) == MethodKind::kSupervised;
    auto learner = Make(id);
    EXPECT_FALSE(learner->Score(data.x).ok());  // not fitted
    EXPECT_FALSE(learner->Fit(Matrix{}, {}).ok());
    EXPECT_FALSE(learner->Fit(Matrix{0, 3, {}}, {}).ok());
    EXPECT_FALSE(learner->Fit(Matrix{2, 3, {1, 2, 3}}, std::vector<int32_t>{0, 1}).ok());
    const std::vector<int32_t> short_labels(data.y.begin(), data.y.end() - 1);
    EXPECT_FALSE(learner->Fit(data.x, short_labels).ok());
    if (supervised) {
      EXPECT_FALSE(learner->Fit(data.x, {}).ok());
      const base::Status single = learner->Fit(data.x, std::vector<int32_t>(data.y.size(), 1));
      EXPECT_FALSE(single.ok());
      EXPECT_NE(single.message().find("single class"), std::string::npos) << single.message();
    }
    ASSERT_TRUE(learner->Fit(data.x, data.y).ok());
    const base::Status wrong_cols = learner->Predict(Matrix{1, 2, {0, 0}}).status();
    EXPECT_FALSE(wrong_cols.ok());
    EXPECT_NE(wrong_cols.message().find("expected 3 columns"), std::string::npos)
        << wrong_cols.message();
    EXPECT_FALSE(learner->Score(Matrix{1, 3, {0, INFINITY, 0}}).ok());
    EXPECT_EQ(learner->ClassProbabilities(data.x).ok(), supervised);
  }
}

TEST(ComparisonsErrorsTest, LibraryFailuresBecomeStatuses) {
#ifdef TELLER_COMPARISONS_OPENCV
  // EM with as many components as rows is degenerate; whatever OpenCV does, no
  // throw escapes.
  MethodOptions options;
  options.gmm.components = 50;
  auto gmm = Make(MethodId::kGmm, options);
  const Matrix two{2, 1, {0, 1}};
  const base::Status status = gmm->Fit(two, {});
  if (!status.ok()) {
    EXPECT_FALSE(status.message().empty());
  }
#endif
  MethodOptions bad;
  bad.dbscan.min_points = 0;
  auto dbscan = Make(MethodId::kDbscan, bad);
  EXPECT_FALSE(dbscan->Fit(Matrix{2, 1, {0, 1}}, {}).ok());
}

}  // namespace
}  // namespace teller::comparisons
