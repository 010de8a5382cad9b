// Weights file reader (learn::ParseWeights, src/learn/weights_file): any bytes are read
// or refused with a Status; what reads serializes back to the same bytes; a model
// built from it (a small fixed configuration) is built or refused by name and shape,
// and when built, scores a small record to probabilities.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "learn/model_forward.h"
#include "learn/weights_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  base::StatusOr<learn::NamedTensors> tensors = learn::ParseWeights(bytes, "fuzz.bin");
  if (!tensors.ok()) return 0;
  FUZZ_CHECK(learn::SerializeWeights(*tensors) == bytes, "weights do not round-trip");
  learn::ModelConfig config;
  config.vocab_size = 4;
  config.template_count = 2;
  config.dim = 4;
  config.heads = 2;
  config.gcn_layers = 1;
  config.summary_bins = 2;
  base::StatusOr<learn::ModelForward> forward = learn::ModelForward::Create(config, *tensors);
  if (!forward.ok()) return 0;
  learn::ModelInput input;
  input.token = {1, 3};
  input.depth = {0, 1};
  input.parent = {-1, 0};
  input.time.assign(2 * learn::kTimeFeatures, 0.5f);
  input.log_template = {1};
  input.log_level = {2};
  const learn::Prediction p = forward->Predict(input);
  FUZZ_CHECK(p.token_probability.size() == 2, "token probabilities");
  FUZZ_CHECK(!(p.step_probability < 0) && !(p.step_probability > 1), "step probability %f",
             p.step_probability);
  return 0;
}
