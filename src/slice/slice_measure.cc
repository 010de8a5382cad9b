// Slice size against step size on one input: `slice_measure INPUT [TOP_FAMILIES]`.
// Suspects of each step come from its TOP_FAMILIES (default 1) highest-scoring families
// under localize's Baseline (learned on all steps, in-sample), two ways: every instance
// of the family, and only its longest instance. Prints one markdown row per option set
// and the reasons behind the default slices. Not a test and not a CLI verb.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "localize/baseline.h"
#include "localize/operator_family.h"
#include "localize/step_features.h"
#include "slice/causal_slice.h"
#include "store/open_trace.h"

namespace {

using namespace teller;

struct Variant {
  const char* name;
  slice::SliceOptions options;
};

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * (values.size() - 1) + 0.5)];
}

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / values.size();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: slice_measure INPUT [TOP_FAMILIES]\n");
    return 2;
  }
  const size_t top = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  auto trace = store::OpenTrace({argv[1]}, {});
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", trace.status().ToString().c_str());
    return 1;
  }
  const localize::StepFeatures features = localize::ComputeStepFeatures(*trace);
  const localize::FeatureRows rows = localize::FeatureRowsOfPart(*trace, features);
  std::vector<model::StepIndex> steps;
  for (uint32_t s = 0; s < trace->steps.size(); ++s) steps.push_back(model::StepIndex(s));
  const localize::Baseline baseline = localize::Baseline::Learn(rows, steps);

  // Suspects per step: all instances of the top families, or the longest of each.
  std::vector<std::vector<model::NodeIndex>> all_instances(steps.size()), longest(steps.size());
  std::map<std::string, int> top_family;
  for (model::StepIndex s : steps) {
    const auto scores = baseline.ScoreStep(rows, s);
    for (size_t k = 0; k < scores.size() && k < top; ++k) {
      const size_t row = scores[k].row;
      if (k == 0) ++top_family[std::string(localize::OperatorFamilyName(scores[k].family))];
      model::NodeIndex worst;
      int64_t worst_ns = -1;
      for (int64_t i = 0; i < features.count[row]; ++i) {
        const model::NodeIndex node = features.instances[features.instances_begin[row] + i];
        all_instances[s.value()].push_back(node);
        const int64_t dur = trace->events.dur_ns[trace->nodes.event[node.value()].value()];
        if (dur > worst_ns) worst_ns = dur, worst = node;
      }
      if (worst.valid()) longest[s.value()].push_back(worst);
    }
  }

  std::vector<Variant> variants;
  variants.push_back({"defaults", {}});
  Variant horizontal{"defaults + horizontal", {}};
  horizontal.options.horizontal = true;
  variants.push_back(horizontal);
  Variant original{"gamma 0.5, tau0 200 us", {}};
  original.options.gamma = 0.5;
  original.options.tau0_ns = 200'000;
  variants.push_back(original);
  Variant wide{"tau0 200 us", {}};
  wide.options.tau0_ns = 200'000;
  variants.push_back(wide);
  Variant narrow{"tau0 20 us", {}};
  narrow.options.tau0_ns = 20'000;
  variants.push_back(narrow);
  Variant loose{"kappa 0.3", {}};
  loose.options.kappa = 0.3;
  variants.push_back(loose);
  Variant depth{"h = 1", {}};
  depth.options.ancestor_depth = 1;
  variants.push_back(depth);
  Variant capped{"max_nodes 64", {}};
  capped.options.max_nodes = 64;
  variants.push_back(capped);

  std::printf("input %s: %zu steps, top %zu families as suspects; top family:", argv[1],
              steps.size(), top);
  for (const auto& [name, count] : top_family) std::printf(" %s %d", name.c_str(), count);
  std::printf("\n");
  for (int mode = 0; mode < 2; ++mode) {
    const auto& suspects = mode == 0 ? all_instances : longest;
    std::printf("\nsuspects: %s\n",
                mode == 0 ? "every instance of the family" : "its longest instance");
    std::printf(
        "| options | steps | suspects/step | step nodes | slice nodes | share mean | share "
        "median | share p90 | parent-closed share | span share | peers/step | CPU us/step |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::array<double, 6> reason_nodes{};  // defaults: suspect, E_p, temporal, E_c, Anc_h only
    for (const Variant& variant : variants) {
      slice::Slicer slicer(*trace);
      std::vector<double> share, closed_share, span_share, slice_nodes, step_nodes, suspect_count,
          peers;
      double total_us = 0;
      for (model::StepIndex s : steps) {
        if (suspects[s.value()].empty()) continue;
        const std::clock_t t0 = std::clock();  // CPU time: the machine may be shared
        auto result = slicer.SliceStep(s, suspects[s.value()], {}, variant.options);
        total_us += 1e6 * double(std::clock() - t0) / CLOCKS_PER_SEC;
        if (!result.ok()) {
          std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
          return 1;
        }
        const slice::SliceSize size = slice::MeasureSlice(*trace, *result);
        if (&variant == &variants[0]) {
          for (uint8_t r : result->reasons) {
            for (int bit = 0; bit < 5; ++bit) reason_nodes[bit] += (r >> bit) & 1;
            reason_nodes[5] += r == slice::kReasonAncestor;
          }
        }
        share.push_back(size.NodeShare());
        span_share.push_back(size.SpanShare());
        closed_share.push_back(double(slice::ParentClosure(*trace, *result).size()) /
                               std::max<int64_t>(size.step_nodes, 1));
        slice_nodes.push_back(size.slice_nodes);
        step_nodes.push_back(size.step_nodes);
        suspect_count.push_back(size.suspects);
        peers.push_back(size.peer_nodes);
      }
      std::printf(
          "| %s | %zu | %.1f | %.1f | %.1f | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% | "
          "%.1f | %.0f |\n",
          variant.name, share.size(), Mean(suspect_count), Mean(step_nodes), Mean(slice_nodes),
          100 * Mean(share), 100 * Quantile(share, 0.5), 100 * Quantile(share, 0.9),
          100 * Mean(closed_share), 100 * Mean(span_share), Mean(peers),
          share.empty() ? 0.0 : total_us / share.size());
    }
    const double count = std::max<double>(1, steps.size());
    std::printf(
        "defaults, nodes/step by reason (a node can have several): suspect %.1f, "
        "parent/child %.1f, temporal %.1f, comm %.1f, ancestor %.1f (ancestor only %.1f)\n",
        reason_nodes[0] / count, reason_nodes[1] / count, reason_nodes[2] / count,
        reason_nodes[3] / count, reason_nodes[4] / count, reason_nodes[5] / count);
  }
  return 0;
}
