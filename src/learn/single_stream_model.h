// The single-stream model in libtorch (learn/single_stream_data.h says what it reads
// and returns), built into the trainer plugin only.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "learn/model_inputs.h"
#include "learn/single_stream_data.h"

namespace teller::learn {

// Trains on `train` (teacher forcing: the type token's cross-entropy plus the
// explanation words' NLL) and decodes every test record greedily; on_epoch (may be
// empty) hears each finished epoch (1-based) and its mean loss.
base::StatusOr<SingleStreamFit> FitSingleStream(
    const SingleStreamShape& shape, const std::vector<ModelInput>& train,
    const std::vector<ModelInput>& test, const SingleStreamOptions& options,
    const std::function<void(int32_t epoch, float loss)>& on_epoch = {});

}  // namespace teller::learn
