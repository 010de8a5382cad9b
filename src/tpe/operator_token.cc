#include "tpe/operator_token.h"

#include <algorithm>
#include <array>
#include <utility>

#include "localize/operator_family.h"

namespace teller::tpe {
namespace {

using localize::OperatorFamily;
using model::Layer;

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// A PyTorch op ("aten::addmm", "prim::Constant"): its kind by its stem. Ordered, first
// substring match wins; the stems are PyTorch's, the same on every release and GPU.
std::string_view AtenOpToken(std::string_view op) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 51> kStems = {{
      {"scaled_dot_product", "attention"},
      {"flash_attention", "attention"},
      {"efficient_attention", "attention"},
      {"convolution", "conv"},
      {"conv", "conv"},
      {"matmul", "matmul"},
      {"addmm", "matmul"},
      {"baddbmm", "matmul"},
      {"bmm", "matmul"},
      {"linear", "matmul"},
      {"mm", "matmul"},
      {"norm", "norm"},
      {"softmax", "softmax"},
      {"embedding", "embedding"},
      {"relu", "activation"},
      {"gelu", "activation"},
      {"silu", "activation"},
      {"sigmoid", "activation"},
      {"tanh", "activation"},
      {"threshold", "activation"},
      {"dropout", "activation"},
      {"loss", "loss"},
      {"_foreach", "optimizer"},
      {"pool", "pooling"},
      {"copy", "copy"},
      {"clone", "copy"},
      {"contiguous", "copy"},
      {"empty", "alloc"},
      {"zeros", "alloc"},
      {"ones", "alloc"},
      {"full", "alloc"},
      {"fill", "alloc"},
      {"zero_", "alloc"},
      {"resize", "alloc"},
      {"cat", "indexing"},
      {"stack", "indexing"},
      {"index", "indexing"},
      {"gather", "indexing"},
      {"scatter", "indexing"},
      {"argmax", "sampling"},
      {"topk", "sampling"},
      {"multinomial", "sampling"},
      {"sort", "sampling"},
      {"sum", "reduction"},
      {"mean", "reduction"},
      {"max", "reduction"},
      {"min", "reduction"},
      {"view", "view"},
      {"reshape", "view"},
      {"split", "view"},
      {"chunk", "view"},
  }};
  static constexpr std::array<std::string_view, 14> kViews = {
      "t",       "transpose",  "permute", "expand",  "slice",  "select", "unsqueeze",
      "squeeze", "as_strided", "narrow",  "flatten", "unbind", "detach", "alias"};
  const size_t colon = op.rfind("::");
  const std::string_view stem = colon == std::string_view::npos ? op : op.substr(colon + 2);
  if (stem == "to") return "copy";
  for (std::string_view view : kViews) {
    const bool in_place = stem.size() == view.size() + 1 && stem.back() == '_';  // "t_"
    if (stem.substr(0, view.size()) == view && (stem.size() == view.size() || in_place)) {
      return "view";
    }
  }
  for (const auto& [pattern, token] : kStems) {
    if (Contains(stem, pattern)) return token;
  }
  return "elementwise";  // add, mul, div, pow, rsqrt, neg, where, ...
}

// What a module class does, by its name ("LlamaDecoderLayer", "QKVParallelLinear").
std::string ModuleToken(std::string_view class_name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 17> kKinds = {{
      {"attention", "attention"},
      {"attn", "attention"},
      {"rotary", "rotary"},
      {"norm", "norm"},
      {"embed", "embedding"},
      {"moe", "moe"},
      {"expert", "moe"},
      {"mlp", "mlp"},
      {"feedforward", "mlp"},
      {"linear", "linear"},
      {"sampler", "sampling"},
      {"logits", "sampling"},
      {"quant", "quantization"},
      {"layer", "layer"},
      {"block", "layer"},
      {"causallm", "model"},
      {"model", "model"},
  }};
  const std::string lower = Lower(class_name);
  for (const auto& [pattern, kind] : kKinds) {
    if (Contains(lower, pattern)) return "module." + std::string(kind);
  }
  return "module.other";
}

// An engine's method ("Scheduler.run_batch", "EngineCore.step"): its part of a step,
// by the method's name.
std::string_view EngineCallToken(std::string_view call) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kParts = {{
      {"schedul", "engine.schedule"},
      {"get_next_batch", "engine.schedule"},
      {"update_from_output", "engine.output"},
      {"process_batch_result", "engine.output"},
      {"output", "engine.output"},
      {"sample", "engine.sample"},
      {"graph", "engine.graph"},
      {"replay", "engine.graph"},
      {"forward", "engine.forward"},
      {"execute_model", "engine.forward"},
      {"run_batch", "engine.forward"},
      {"step", "engine.step"},
  }};
  const std::string lower = Lower(call.substr(call.rfind('.') + 1));  // the method
  for (const auto& [pattern, token] : kParts) {
    if (Contains(lower, pattern)) return token;
  }
  return "engine.call";
}

bool IsIdentifier(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

std::string FrontendToken(std::string_view name) {
  if (name.substr(0, 12) == "ProfilerStep") return "profiler_step";
  if (Contains(name, "): ") || name.substr(0, 9) == "<built-in") return "python";
  if (name.substr(0, 11) == "nn.Module: ") {
    std::string_view module = name.substr(11);
    return ModuleToken(module.substr(0, module.rfind('_')));
  }
  const size_t dot = name.find('.');
  if (dot != std::string_view::npos && IsIdentifier(name.substr(0, dot))) {
    return std::string(EngineCallToken(name));  // Class.method, Optimizer.step#SGD.step
  }
  if (IsIdentifier(name) && std::isupper(static_cast<unsigned char>(name[0]))) {
    return ModuleToken(name);  // a module's record_function range: "Qwen3DecoderLayer"
  }
  return "frontend";
}

std::string HostOpToken(std::string_view name) {
  if (Contains(name, "Backward")) return "backward";  // autograd nodes and their evaluation
  if (name.substr(0, 6) == "aten::" || name.substr(0, 6) == "prim::") {
    return std::string(AtenOpToken(name));
  }
  // A library's op (_C::rms_norm, flashinfer::..., sgl_kernel::silu_and_mul): by the
  // kernel family its name reads as.
  const OperatorFamily family = localize::ClassifyOperator(Layer::kK, name);
  if (family == OperatorFamily::kUnnamed) return "host_op";
  return std::string(localize::OperatorFamilyName(family));
}

std::string CopyToken(std::string_view name) {
  for (std::string_view direction : {"HtoD", "DtoH", "DtoD", "PtoP", "HtoH"}) {
    if (Contains(name, direction)) return "memcpy_" + Lower(direction);
  }
  return std::string(localize::OperatorFamilyName(localize::ClassifyOperator(Layer::kMem, name)));
}

}  // namespace

std::string OperatorToken(model::Layer layer, std::string_view name) {
  switch (layer) {
    case Layer::kStep:
      return "step";
    case Layer::kFe:
      return FrontendToken(name);
    case Layer::kBe:
      return HostOpToken(name);
    case Layer::kMem:
      return CopyToken(name);
    case Layer::kK:
    case Layer::kComm:
    case Layer::kRt:
    case Layer::kDrv:
    case Layer::kSync: {
      const OperatorFamily family = localize::ClassifyOperator(layer, name);
      if (family == OperatorFamily::kUnnamed) return "kernel";
      return std::string(localize::OperatorFamilyName(family));
    }
    case Layer::kOther:
      break;
  }
  return "other";
}

}  // namespace teller::tpe
