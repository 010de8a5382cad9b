// Internal: one factory per learner, each defined in its own file. Only the
// learners whose library was found are compiled (TELLER_COMPARISONS_OPENCV,
// TELLER_COMPARISONS_XGBOOST).
#pragma once

#include <memory>

#include "comparisons/method.h"

namespace teller::comparisons::internal {

std::unique_ptr<ComparisonMethod> MakeDbscanMethod(const MethodOptions& options);
std::unique_ptr<ComparisonMethod> MakeIsolationForestMethod(const MethodOptions& options);
#ifdef TELLER_COMPARISONS_OPENCV
std::unique_ptr<ComparisonMethod> MakeKMeansMethod(const MethodOptions& options);
std::unique_ptr<ComparisonMethod> MakeGmmMethod(const MethodOptions& options);
std::unique_ptr<ComparisonMethod> MakeSvmMethod(const MethodOptions& options);
std::unique_ptr<ComparisonMethod> MakeRandomForestMethod(const MethodOptions& options);
#endif
#ifdef TELLER_COMPARISONS_XGBOOST
std::unique_ptr<ComparisonMethod> MakeXgboostMethod(const MethodOptions& options);
#endif

}  // namespace teller::comparisons::internal
