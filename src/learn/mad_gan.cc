// MAD-GAN: windows of the step series (learn/log_comparisons.h), standardized and
// projected on their principal components (as the paper reduces SWaT), an LSTM
// generator and an LSTM discriminator trained on normal records' windows. A window's
// score adds the discriminator's doubt and the error of the generator's best
// reconstruction (its latent input fitted by gradient steps), each over its train mean.
#include <algorithm>

#include <torch/nn.h>
#include <torch/optim.h>

// After nn.h: torch/linalg.h names torch::Tensor without including it (libtorch 1.13), which
// only a unity build hid.
#include <torch/linalg.h>

#include "learn/log_comparison_nets.h"

namespace teller::learn::log_comparisons {
namespace {

constexpr int32_t kGanEpochs = 15;
constexpr size_t kGanBatch = 64;
constexpr int64_t kComponents = 8;
constexpr int64_t kLatent = 4;
constexpr double kScale = 4.0;  // standard deviations that map to the generator's +-1
constexpr double kGanLearningRate = 1e-3;
constexpr int32_t kInversionSteps = 20;
constexpr double kInversionRate = 0.1;
constexpr double kDiscriminationShare = 0.5;  // MAD-GAN's lambda

struct SequenceNetImpl : torch::nn::Module {
  SequenceNetImpl(int64_t in, int64_t hidden, int64_t out)
      : lstm(register_module(
            "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(in, hidden).batch_first(true)))),
        head(register_module("head", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return head->forward(std::get<0>(lstm->forward(x)));
  }
  torch::nn::LSTM lstm;
  torch::nn::Linear head;
};
TORCH_MODULE(SequenceNet);

torch::Tensor SeriesTensor(const LogComparisonData& data) {
  std::vector<float> values;
  for (const LogComparisonRecord& r : data.records)
    values.insert(values.end(), r.series.begin(), r.series.end());
  return torch::tensor(values).reshape(
      {static_cast<int64_t>(data.records.size()), data.series_window, data.series_features});
}

// Standardization and principal axes from the normal train windows' steps.
struct SeriesSpace {
  torch::Tensor mean, std, axes, scale;
  torch::Tensor Project(const torch::Tensor& series) const {
    return ((series - mean) / std).matmul(axes) / scale;
  }
};

SeriesSpace FitSpace(const torch::Tensor& normal) {
  const torch::Tensor rows = normal.reshape({-1, normal.size(2)});
  SeriesSpace space;
  space.mean = rows.mean(0);
  const torch::Tensor spread = rows.std(0, false);
  space.std = torch::where(spread < 1e-6, torch::ones_like(spread), spread);
  const torch::Tensor z = (rows - space.mean) / space.std;
  const auto [values, vectors] = torch::linalg::eigh(z.t().matmul(z) / rows.size(0), "L");
  const int64_t features = rows.size(1), k = std::min(kComponents, features);
  space.axes = vectors.slice(1, features - k, features);
  space.scale = values.slice(0, features - k, features).clamp_min(1e-6).sqrt() * kScale;
  return space;
}

// The discriminator's doubt and the reconstruction error of each window.
std::pair<torch::Tensor, torch::Tensor> RawScores(SequenceNet& generator,
                                                  SequenceNet& discriminator,
                                                  const torch::Tensor& windows) {
  std::vector<torch::Tensor> doubt, error;
  for (int64_t at = 0; at < windows.size(0); at += 1024) {
    const torch::Tensor x = windows.slice(0, at, std::min(at + 1024, windows.size(0)));
    {
      torch::NoGradGuard no_grad;
      doubt.push_back(1 - torch::sigmoid(discriminator->forward(x)).mean({1, 2}));
    }
    torch::Tensor latent = torch::randn({x.size(0), x.size(1), kLatent}).requires_grad_(true);
    torch::optim::Adam inversion({latent}, torch::optim::AdamOptions(kInversionRate));
    for (int32_t step = 0; step < kInversionSteps; ++step) {
      const torch::Tensor loss = (torch::tanh(generator->forward(latent)) - x).pow(2).sum();
      inversion.zero_grad();
      loss.backward();
      inversion.step();
    }
    torch::NoGradGuard no_grad;
    error.push_back((torch::tanh(generator->forward(latent)) - x).pow(2).mean({1, 2}));
  }
  return {torch::cat(doubt), torch::cat(error)};
}

void TrainGan(SequenceNet& generator, SequenceNet& discriminator, const torch::Tensor& normal,
              int32_t epochs, uint64_t seed) {
  const auto options = torch::optim::AdamOptions(kGanLearningRate).betas({0.5, 0.999});
  torch::optim::Adam g_optimizer(generator->parameters(), options);
  torch::optim::Adam d_optimizer(discriminator->parameters(), options);
  std::mt19937_64 rng(seed);
  std::vector<size_t> order(static_cast<size_t>(normal.size(0)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int32_t epoch = 0; epoch < epochs; ++epoch) {
    Shuffle(&order, &rng);
    for (const std::vector<size_t>& rows : Batches(order, kGanBatch)) {
      const torch::Tensor real =
          normal.index_select(0, torch::tensor(std::vector<int64_t>(rows.begin(), rows.end())));
      const torch::Tensor fake =
          torch::tanh(generator->forward(torch::randn({real.size(0), real.size(1), kLatent})));
      const torch::Tensor real_logits = discriminator->forward(real);
      const torch::Tensor d_loss =
          torch::binary_cross_entropy_with_logits(real_logits, torch::ones_like(real_logits)) +
          torch::binary_cross_entropy_with_logits(discriminator->forward(fake.detach()),
                                                  torch::zeros_like(real_logits));
      d_optimizer.zero_grad();
      d_loss.backward();
      d_optimizer.step();
      const torch::Tensor fake_logits = discriminator->forward(fake);
      const torch::Tensor g_loss =
          torch::binary_cross_entropy_with_logits(fake_logits, torch::ones_like(fake_logits));
      g_optimizer.zero_grad();
      g_loss.backward();
      g_optimizer.step();
    }
  }
}

}  // namespace

base::StatusOr<Fitted> FitMadGan(const LogComparisonData& train, const LogComparisonData& test,
                                 const LogComparisonOptions& options) {
  const size_t width =
      static_cast<size_t>(train.series_window) * static_cast<size_t>(train.series_features);
  for (const auto* data : {&train, &test}) {
    for (const LogComparisonRecord& r : data->records) {
      if (r.series.size() != width)
        return base::InvalidArgument("mad_gan: a record's series has {} values, not {}",
                                     r.series.size(), width);
    }
  }
  const std::vector<size_t> normal_rows = NormalRecords(train);
  if (normal_rows.empty())
    return base::InvalidArgument("mad_gan: the train part has no normal record");
  const torch::Tensor train_series = SeriesTensor(train);
  const torch::Tensor normal = train_series.index_select(
      0, torch::tensor(std::vector<int64_t>(normal_rows.begin(), normal_rows.end())));
  const SeriesSpace space = FitSpace(normal);
  const int64_t k = space.axes.size(1);
  SequenceNet generator(kLatent, options.dim, k), discriminator(k, options.dim, 1);
  Fitted fitted;
  fitted.epochs = options.epochs > 0 ? options.epochs : kGanEpochs;
  TrainGan(generator, discriminator, space.Project(normal), fitted.epochs, options.seed);
  for (torch::Tensor& p : generator->parameters()) p.requires_grad_(false);
  generator->eval();
  discriminator->eval();
  const auto [train_doubt, train_error] =
      RawScores(generator, discriminator, space.Project(train_series));
  const auto [test_doubt, test_error] =
      RawScores(generator, discriminator, space.Project(SeriesTensor(test)));
  const torch::Tensor doubt_unit = train_doubt.mean().clamp_min(1e-6);
  const torch::Tensor error_unit = train_error.mean().clamp_min(1e-6);
  auto combine = [&](const torch::Tensor& doubt, const torch::Tensor& error) {
    return ToFloats(kDiscriminationShare * doubt / doubt_unit +
                    (1 - kDiscriminationShare) * error / error_unit);
  };
  fitted.parameters = ParameterCount(*generator) + ParameterCount(*discriminator);
  fitted.train_scores = combine(train_doubt, train_error);
  fitted.test_scores = combine(test_doubt, test_error);
  return fitted;
}

}  // namespace teller::learn::log_comparisons
