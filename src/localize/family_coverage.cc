// family_coverage [FOLDER|BUNDLE|FILE...]: for every trace (default ../shared/real-traces)
// prints the share of device time that falls into a named operator family, the
// largest families, the shares docs/benchmark.md compares the modern preset with (GEMM
// with the MoE kernels, attention, communication) and the longest unnamed kernels. Exits
// 1 when a trace is below 95% named.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "localize/operator_family.h"
#include "store/open_trace.h"

namespace {

constexpr double kTargetShare = 0.95;

std::vector<std::string> Inputs(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) args.push_back("../shared/real-traces");
  std::vector<std::string> files;
  for (const std::string& arg : args) {
    std::error_code ec;
    // A bundle directory (meta.json inside) is one input; another folder lists inputs.
    if (!std::filesystem::is_directory(arg, ec) ||
        std::filesystem::exists(std::filesystem::path(arg) / "meta.json", ec)) {
      files.push_back(arg);
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(arg, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".md") || name.starts_with(".")) continue;
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  using teller::localize::OperatorFamily;
  int below = 0;
  for (const std::string& file : Inputs(argc, argv)) {
    auto trace = teller::store::OpenTrace({file}, {});
    const std::string name = std::filesystem::path(file).filename().string();
    if (!trace.ok()) {
      std::printf("%-60s  error: %s\n", name.c_str(), trace.status().message().c_str());
      ++below;
      continue;
    }
    const auto coverage = teller::localize::ComputeFamilyCoverage(trace.value(), 5);
    const bool pass = coverage.named_share() >= kTargetShare;
    if (!pass) ++below;
    std::printf("%-60s  named %6.2f%%  of %.3f ms device time, %lld events  %s\n", name.c_str(),
                100.0 * coverage.named_share(), coverage.device_time_ns / 1e6,
                static_cast<long long>(coverage.device_events), pass ? "ok" : "BELOW 95%");
    std::vector<std::pair<int64_t, int>> families;
    for (int f = 0; f < teller::localize::kOperatorFamilyCount; ++f) {
      if (coverage.time_by_family_ns[f] > 0)
        families.emplace_back(-coverage.time_by_family_ns[f], f);
    }
    std::sort(families.begin(), families.end());
    std::printf("    families:");
    for (size_t i = 0; i < families.size() && i < 8; ++i) {
      std::printf(
          " %s %.1f%%",
          std::string(
              teller::localize::OperatorFamilyName(static_cast<OperatorFamily>(families[i].second)))
              .c_str(),
          coverage.device_time_ns ? -100.0 * families[i].first / coverage.device_time_ns : 0.0);
    }
    std::printf("\n");
    double gemm = 0, attention = 0, communication = 0;
    for (int f = 0; f < teller::localize::kOperatorFamilyCount; ++f) {
      const auto family = static_cast<OperatorFamily>(f);
      const double share = coverage.device_time_ns
                               ? static_cast<double>(coverage.time_by_family_ns[f]) /
                                     static_cast<double>(coverage.device_time_ns)
                               : 0.0;
      if (family == OperatorFamily::kGemm || family == OperatorFamily::kMoe) gemm += share;
      if (family == OperatorFamily::kAttention) attention += share;
      if (teller::localize::IsCollectiveFamily(family)) communication += share;
    }
    std::printf("    shares: gemm+moe %.1f%% attention %.1f%% communication %.1f%%\n", 100 * gemm,
                100 * attention, 100 * communication);
    for (const auto& [kernel, time_ns] : coverage.top_unnamed) {
      std::printf("    unnamed %5.2f%%  %.120s\n", 100.0 * time_ns / coverage.device_time_ns,
                  kernel.c_str());
    }
  }
  return below == 0 ? 0 : 1;
}
