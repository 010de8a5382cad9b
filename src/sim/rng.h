// Rng: a fixed-algorithm random source (xoshiro256** seeded by splitmix64) with
// its own distributions, so the same seed gives the same bundle bytes on every
// standard library (std:: distributions differ between implementations).
#pragma once

#include <cmath>
#include <cstdint>

namespace teller::sim {

inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Mixes a seed with a stream tag, for independent sub-streams.
inline uint64_t MixSeed(uint64_t seed, uint64_t stream) {
  uint64_t state = seed ^ (stream * 0xd1b54a32d192ed03ull);
  return SplitMix64(&state);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) {
    uint64_t state = seed;
    for (uint64_t& word : s_) word = SplitMix64(&state);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [lo, hi] (inclusive); bias is negligible for small ranges.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(Next() % span);
  }
  bool Bernoulli(double p) { return Uniform() < p; }
  // Standard normal by Box-Muller (one value per call, the pair's second is dropped
  // so the stream position never depends on history).
  double Normal() {
    double u1 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double Normal(double mean, double stddev) { return mean + stddev * Normal(); }
  double Exponential(double mean) {
    double u = Uniform();
    if (u < 1e-300) u = 1e-300;
    return -mean * std::log(u);
  }
  // exp(N(mu, sigma)).
  double LogNormal(double mu, double sigma) { return std::exp(Normal(mu, sigma)); }
  // Pareto with scale xm and shape alpha (heavy tail for alpha near 1-2).
  double Pareto(double xm, double alpha) {
    double u = Uniform();
    if (u < 1e-12) u = 1e-12;
    return xm / std::pow(u, 1.0 / alpha);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace teller::sim
