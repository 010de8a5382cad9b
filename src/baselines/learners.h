// Internal: one factory per learner, each defined in its own file. Only the
// learners whose library was found are compiled (TELLER_BASELINES_OPENCV,
// TELLER_BASELINES_XGBOOST).
#pragma once

#include <memory>

#include "baselines/baseline.h"

namespace teller::baselines::internal {

std::unique_ptr<Baseline> MakeDbscanBaseline(const BaselineOptions& options);
std::unique_ptr<Baseline> MakeIsolationForestBaseline(const BaselineOptions& options);
#ifdef TELLER_BASELINES_OPENCV
std::unique_ptr<Baseline> MakeKMeansBaseline(const BaselineOptions& options);
std::unique_ptr<Baseline> MakeGmmBaseline(const BaselineOptions& options);
std::unique_ptr<Baseline> MakeSvmBaseline(const BaselineOptions& options);
std::unique_ptr<Baseline> MakeRandomForestBaseline(const BaselineOptions& options);
#endif
#ifdef TELLER_BASELINES_XGBOOST
std::unique_ptr<Baseline> MakeXgboostBaseline(const BaselineOptions& options);
#endif

}  // namespace teller::baselines::internal
