#include "cause/baseline_fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "base/median.h"
#include "base/robust.h"

namespace teller::cause {
namespace {

constexpr double kMinLogSizeStep = 0.2;  // a size this far from the median gives a slope
constexpr size_t kMinSlopes = 4;
constexpr size_t kMinLinearSamples = 16;  // 5 coefficients need a few samples each
constexpr int kTerms = 5;
constexpr int kSizeSquaredTerm = 2, kContextTerm = 3;
constexpr double kRidge = 1e-6;

double StepTokens(const model::Trace& trace, model::StringId tokens_key, uint32_t step) {
  int64_t tokens = 0;
  if (tokens_key.valid() && trace.FindIntArg(trace.steps.event[step], tokens_key, &tokens) &&
      tokens > 0) {
    return static_cast<double>(tokens);
  }
  return 0.0;
}

std::array<double, kTerms> Terms(const StepShape& shape) {
  return {1.0, shape.size, shape.size * shape.size / 1000.0, shape.context, shape.requests};
}

// Solves the normal equations over the terms in `active` (Gaussian elimination with
// partial pivoting); false when they are singular. The others' coefficients are 0.
bool SolveActive(const std::array<std::array<double, kTerms + 1>, kTerms>& normal,
                 const std::array<bool, kTerms>& active, std::array<double, kTerms>* out) {
  std::array<int, kTerms> index{};
  int n = 0;
  for (int k = 0; k < kTerms; ++k) {
    if (active[k]) index[n++] = k;
  }
  std::array<std::array<double, kTerms + 1>, kTerms> a{};
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) a[r][c] = normal[index[r]][index[c]];
    a[r][n] = normal[index[r]][kTerms];
  }
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int row = col + 1; row < n; ++row) {
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    }
    if (std::abs(a[pivot][col]) < 1e-12) return false;
    std::swap(a[col], a[pivot]);
    for (int row = 0; row < n; ++row) {
      if (row == col) continue;
      const double factor = a[row][col] / a[col][col];
      for (int k = col; k <= n; ++k) a[row][k] -= factor * a[col][k];
    }
  }
  out->fill(0.0);
  for (int r = 0; r < n; ++r) (*out)[index[r]] = a[r][n] / a[r][r];
  return true;
}

// The share of the experts a batch of `tokens` activates, each token picking an expert
// with probability p.
double ExpertShare(double tokens, double p) { return 1.0 - std::pow(1.0 - p, tokens); }

// Prompt lengths of served traffic vary about as much as their mean (ShareGPT's prompts:
// a coefficient of variation near 1): the spread of one request's even share.
constexpr double kPromptLengthCv = 1.0;

// Each rank's requests: their context so far and the admission whose tokens they shared.
// Continuous batching: a request served before decodes one token; the step's other
// tokens are the prompts of the requests it admits, shared evenly among them. Without
// new requests (chunked prefill going on), the tokens are shared evenly among all.
class ContextEstimator {
 public:
  void AddStep(const model::Trace& trace, uint32_t s, double tokens, StepShape* shape);

 private:
  struct Admission {
    double members = 0;  // requests admitted together
    double share = 0;    // tokens each was given
  };
  struct Served {
    double context = 0;
    int32_t admission = -1;  // into admissions_, -1: its prompt is known
  };
  // The spread of a step's context, from how many of each admission's requests it
  // holds (admission -> count): drawn without replacement from members whose prompts
  // differ.
  double SpreadOf(const std::map<int32_t, double>& present) const;

  std::map<std::pair<int32_t, uint32_t>, Served> served_;  // (rank, request)
  std::vector<Admission> admissions_;
};

void ContextEstimator::AddStep(const model::Trace& trace, uint32_t s, double tokens,
                               StepShape* shape) {
  const uint32_t begin = trace.steps.requests_begin[s], count = trace.steps.requests_count[s];
  const int32_t rank = trace.steps.rank[s];
  size_t admitted = 0;
  for (uint32_t i = begin; i < begin + count; ++i) {
    admitted += served_.count({rank, trace.step_requests[i].value()}) == 0;
  }
  const double continuing = static_cast<double>(count - admitted);
  const bool decode_split = admitted > 0 && tokens > continuing;
  const double prompt_share =
      decode_split ? (tokens - continuing) / static_cast<double>(admitted) : 0.0;
  const double even_share = tokens / static_cast<double>(count);
  int32_t admission = -1;
  if (decode_split && admitted > 1) {
    admission = static_cast<int32_t>(admissions_.size());
    admissions_.push_back({static_cast<double>(admitted), prompt_share});
  }
  std::map<int32_t, double> present;  // admission -> its requests in the step
  for (uint32_t i = begin; i < begin + count; ++i) {
    auto [entry, admitted_here] = served_.try_emplace({rank, trace.step_requests[i].value()});
    Served& request = entry->second;
    request.context += !decode_split ? even_share : admitted_here ? prompt_share : 1.0;
    if (admitted_here) request.admission = admission;
    if (request.admission >= 0) present[request.admission] += 1.0;
    shape->context += request.context;
  }
  shape->context_spread = SpreadOf(present);
}

double ContextEstimator::SpreadOf(const std::map<int32_t, double>& present) const {
  double variance = 0.0;
  for (const auto& [index, k] : present) {
    const Admission& a = admissions_[static_cast<size_t>(index)];
    const double sigma = kPromptLengthCv * a.share;
    variance += sigma * sigma * k * (a.members - k) / (a.members - 1.0);
  }
  return std::sqrt(variance);
}

}  // namespace

std::vector<StepShape> StepShapes(const model::Trace& trace) {
  std::vector<StepShape> shapes(trace.steps.size());
  const model::StringId tokens_key = trace.strings.Find("tokens");
  std::vector<uint32_t> order(trace.steps.size());
  for (uint32_t s = 0; s < order.size(); ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(trace.steps.rank[a], trace.steps.start_ns[a]) <
           std::tie(trace.steps.rank[b], trace.steps.start_ns[b]);
  });
  ContextEstimator contexts;
  for (uint32_t s : order) {
    const uint32_t count = trace.steps.requests_count[s];
    const double tokens = StepTokens(trace, tokens_key, s);
    shapes[s].size = tokens > 0.0 ? tokens : static_cast<double>(count);
    shapes[s].requests = static_cast<double>(count);
    if (count == 0 || tokens <= 0.0) continue;
    contexts.AddStep(trace, s, tokens, &shapes[s]);
  }
  std::map<int64_t, double> largest;  // global step -> its largest size
  for (uint32_t s = 0; s < shapes.size(); ++s) {
    const int64_t global = trace.steps.global_step[s];
    if (global >= 0) largest[global] = std::max(largest[global], shapes[s].size);
  }
  for (uint32_t s = 0; s < shapes.size(); ++s) {
    const int64_t global = trace.steps.global_step[s];
    shapes[s].padded_size = global >= 0 ? largest[global] : shapes[s].size;
  }
  return shapes;
}

ChannelBaseline::ChannelBaseline(const std::vector<StepShape>& shapes,
                                 const std::vector<double>& values, double floor, ShapeModel model)
    : model_(model) {
  std::vector<StepShape> kept_shapes = shapes;
  std::vector<double> kept_values = values;
  for (int pass = 0; pass < 2 && !kept_values.empty(); ++pass) {
    linear_ = (model == ShapeModel::kLinearInTokens || model == ShapeModel::kTokenWork ||
               model == ShapeModel::kSaturating) &&
              FitLinear(kept_shapes, kept_values);
    experts_ = false;
    if (model == ShapeModel::kAffineInRequests || model == ShapeModel::kAffineInSize) {
      FitAffine(kept_shapes, kept_values);
    } else {
      FitPowerLaw(kept_shapes, kept_values);
    }
    FitSigma(kept_shapes, kept_values, floor);
    if (model == ShapeModel::kSaturating) ChooseSaturating(kept_shapes, kept_values, floor);
    std::vector<StepShape> next_shapes;
    std::vector<double> next_values;
    for (size_t i = 0; i < kept_values.size(); ++i) {
      if (std::abs(kept_values[i] - Expected(kept_shapes[i])) > 3.0 * sigma_) continue;
      next_shapes.push_back(kept_shapes[i]);
      next_values.push_back(kept_values[i]);
    }
    if (next_values.size() * 2 < kept_values.size()) break;
    kept_shapes = std::move(next_shapes);
    kept_values = std::move(next_values);
  }
}

// Work that saturates with the batch (experts: fewer tokens activate fewer of them, each
// loading its weights) bends below a line: of the line, the power law and the experts'
// model, the shape that fits best.
void ChannelBaseline::ChooseSaturating(const std::vector<StepShape>& shapes,
                                       const std::vector<double>& values, double floor) {
  const bool linear = linear_;
  double best_sigma = sigma_;  // as fitted: the line when it was, else the power law
  if (linear) {
    linear_ = false;
    FitSigma(shapes, values, floor);
    if (sigma_ < best_sigma) best_sigma = sigma_;
    else linear_ = true;
  }
  const bool was_linear = linear_;
  if (FitExperts(shapes, values)) {
    experts_ = true;
    FitSigma(shapes, values, floor);
    if (sigma_ < best_sigma) return;
    experts_ = false;
  }
  linear_ = was_linear;
  sigma_ = best_sigma;
}

// value = a + b x (share of the experts a batch of `size` tokens activates, each token
// picking one with probability p: 1 - (1 - p)^size) + c x size, b and c at least 0 (the
// weights each active expert loads, the rows each token adds); p the best of a grid in
// half octaves.
bool ChannelBaseline::FitExperts(const std::vector<StepShape>& shapes,
                                 const std::vector<double>& values) {
  if (values.size() < kMinLinearSamples) return false;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int half_octave = 2; half_octave <= 16; ++half_octave) {  // p from 1/2 to 1/256
    const double p = std::exp2(-0.5 * half_octave);
    std::array<std::array<double, kTerms + 1>, kTerms> system{};
    for (size_t i = 0; i < values.size(); ++i) {
      const std::array<double, 3> terms = {1.0, ExpertShare(shapes[i].size, p), shapes[i].size};
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) system[r][c] += terms[r] * terms[c];
        system[r][kTerms] += terms[r] * values[i];
      }
    }
    for (int k = 1; k < 3; ++k) system[k][k] += kRidge * system[k][k] + kRidge;
    for (int k = 3; k < kTerms; ++k) system[k][k] = 1.0;
    std::array<bool, kTerms> active = {true, true, true, false, false};
    std::array<double, kTerms> solution{};
    bool solved = false;
    for (int round = 0; round < 3; ++round) {
      solved = SolveActive(system, active, &solution);
      if (!solved) break;
      const int negative = solution[1] < 0.0 ? 1 : solution[2] < 0.0 ? 2 : -1;
      if (negative < 0) break;
      active[negative] = false;
    }
    if (!solved) continue;
    double cost = 0.0;
    for (size_t i = 0; i < values.size(); ++i) {
      cost += std::abs(values[i] - solution[0] - solution[1] * ExpertShare(shapes[i].size, p) -
                       solution[2] * shapes[i].size);
    }
    if (cost < best_cost) {
      best_cost = cost;
      expert_p_ = p;
      expert_coefficients_ = {solution[0], solution[1], solution[2]};
    }
  }
  return std::isfinite(best_cost);
}

double ChannelBaseline::Expected(const StepShape& shape) const {
  if (experts_) {
    return std::max(expert_coefficients_[0] +
                        expert_coefficients_[1] * ExpertShare(shape.size, expert_p_) +
                        expert_coefficients_[2] * shape.size,
                    0.0);
  }
  if (linear_) {
    const std::array<double, kTerms> terms = Terms(shape);
    double value = 0.0;
    for (int k = 0; k < kTerms; ++k) value += coefficients_[k] * terms[k];
    return std::max(value, 0.0);
  }
  if (model_ == ShapeModel::kAffineInRequests || model_ == ShapeModel::kAffineInSize) {
    const double x = AffineX(shape);
    if (!affine_ || x <= 0.0) return median_;
    return std::max(intercept_ + per_unit_ * x, 0.0);
  }
  if (slope_ == 0.0 || shape.size <= 0.0 || median_size_ <= 0.0) return median_;
  return median_ * std::pow(shape.size / median_size_, slope_);
}

double ChannelBaseline::ContextSlope() const {
  return linear_ && !experts_ ? coefficients_[kContextTerm] : 0.0;
}

bool ChannelBaseline::FitLinear(const std::vector<StepShape>& shapes,
                                const std::vector<double>& values) {
  if (values.size() < kMinLinearSamples) return false;
  std::array<std::array<double, kTerms + 1>, kTerms> system{};
  for (size_t i = 0; i < values.size(); ++i) {
    const std::array<double, kTerms> terms = Terms(shapes[i]);
    for (int r = 0; r < kTerms; ++r) {
      for (int c = 0; c < kTerms; ++c) system[r][c] += terms[r] * terms[c];
      system[r][kTerms] += terms[r] * values[i];
    }
  }
  // A little ridge: terms that move together (a decode's tokens are its requests) share
  // their coefficient instead of making the system singular.
  for (int k = 1; k < kTerms; ++k) system[k][k] += kRidge * system[k][k] + kRidge;
  std::array<bool, kTerms> active;
  active.fill(true);
  std::array<double, kTerms> solution{};
  if (model_ != ShapeModel::kTokenWork) {
    if (!SolveActive(system, active, &solution)) return false;
  } else {
    // Work per token reads no KV context and does not grow with the square of the
    // tokens; more tokens or sequences never make it faster: a term that would take a
    // negative coefficient (a slow window that falls on small batches) is left out and
    // the rest refitted.
    active[kSizeSquaredTerm] = active[kContextTerm] = false;
    for (int round = 0; round < kTerms; ++round) {
      if (!SolveActive(system, active, &solution)) return false;
      int most_negative = -1;
      for (int k = 1; k < kTerms; ++k) {
        if (active[k] && solution[k] < 0.0 &&
            (most_negative < 0 || solution[k] < solution[most_negative])) {
          most_negative = k;
        }
      }
      if (most_negative < 0) break;
      active[most_negative] = false;
    }
  }
  for (int k = 0; k < kTerms; ++k) coefficients_[k] = solution[k];
  return true;
}

// value = median * (size / median size)^b, b the median log-log slope against the
// median point (a prefill's attention grows with its tokens faster than its GEMMs do).
void ChannelBaseline::FitPowerLaw(const std::vector<StepShape>& shapes,
                                  const std::vector<double>& values) {
  std::vector<double> copy = values;
  median_ = base::MedianInPlace(&copy);
  copy.clear();
  for (const StepShape& shape : shapes) copy.push_back(shape.size);
  median_size_ = base::MedianInPlace(&copy);
  slope_ = 0.0;
  std::vector<double> slopes;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double size = shapes[i].size;
    if (size <= 0.0 || median_size_ <= 0.0 || values[i] <= 0.0 || median_ <= 0.0) continue;
    const double dx = std::log(size / median_size_);
    if (std::abs(dx) < kMinLogSizeStep) continue;
    slopes.push_back(std::log(values[i] / median_) / dx);
  }
  if (slopes.size() >= kMinSlopes) slope_ = std::clamp(base::MedianInPlace(&slopes), 0.0, 2.0);
}

double ChannelBaseline::AffineX(const StepShape& shape) const {
  return model_ == ShapeModel::kAffineInSize ? shape.size : shape.requests;
}

// value = intercept + per_unit * x, the slope the median of the slopes against the
// median point (Theil-Sen), never negative: a step's fixed cost (the scheduler's loop,
// a collective's latency) plus what each sequence or token adds (its metadata, its bytes).
void ChannelBaseline::FitAffine(const std::vector<StepShape>& shapes,
                                const std::vector<double>& values) {
  std::vector<double> copy = values;
  median_ = base::MedianInPlace(&copy);
  copy.clear();
  for (const StepShape& shape : shapes) copy.push_back(AffineX(shape));
  const double median_x = base::MedianInPlace(&copy);
  affine_ = false;
  std::vector<double> slopes;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double x = AffineX(shapes[i]), dx = x - median_x;
    if (x <= 0.0 || std::abs(dx) < std::max(1.0, 0.1 * median_x)) continue;
    slopes.push_back((values[i] - median_) / dx);
  }
  if (median_x <= 0.0 || slopes.size() < kMinSlopes) return;
  affine_ = true;
  per_unit_ = std::max(base::MedianInPlace(&slopes), 0.0);
  intercept_ = median_ - per_unit_ * median_x;
}

void ChannelBaseline::FitSigma(const std::vector<StepShape>& shapes,
                               const std::vector<double>& values, double floor) {
  std::vector<double> residuals(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    residuals[i] = std::abs(values[i] - Expected(shapes[i]));
  }
  sigma_ = std::max(base::SigmaOfMad(base::MedianInPlace(&residuals)), floor);
}

}  // namespace teller::cause
