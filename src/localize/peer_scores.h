// Peer deviation (the horizontal view): a rank's operator family against the same
// family on the ranks doing the same work in the same global step (same family,
// same instance count). Catches the one slow rank of a tensor-parallel group even
// when the fault lasts half the run, where the run's own baseline drifts.
#pragma once

#include <cstdint>
#include <vector>

#include "localize/feature_rows.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::localize {

struct PeerScore {
  double score = 0.0;  // (x - peer median) / (sigma of the peers' MAD + eps); slower only
  Feature feature = Feature::kTotalNs;
  double value = 0.0;
  double median = 0.0;  // of the peers, this rank included
  int32_t peers = 0;    // ranks in the group, this rank included
  // The score is the rank's compute kernel time as a whole against its peers'
  // (a slow GPU slows every family a little); the row is the family that adds most.
  bool rank_wide = false;
  double rank_excess = 0.0;  // the rank's compute time over the peer median, minus 1
};

inline constexpr int32_t kMinPeers = 3;
// Smallest denominator: this share of the peer median (timing jitter between
// identical GPUs is a few percent).
inline constexpr double kPeerResolution = 0.05;
// The same for a rank's compute time as a whole: the sum of hundreds of kernels
// jitters less than one family.
inline constexpr double kRankResolution = 0.02;

// One entry per row of rows.features; score 0 where the row has fewer than
// kMinPeers peers or no global step, and for collectives (they last until the
// last rank arrives). Total and mean time only, those in feature_mask.
// Also, per step, the rank's compute time (compute families, summed) against the
// ranks with the same compute families and counts in the same global step; that
// score goes to the row of the family with the largest excess over its peers.
std::vector<PeerScore> ScorePeers(const FeatureRows& rows, uint32_t feature_mask);

}  // namespace teller::localize
