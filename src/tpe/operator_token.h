// Operator tokens: the learned model's spelling of an event name, by what the operator
// is, not by how one library, GPU or model spells it. A cuBLAS, CUTLASS, hipBLASLt or
// nvjet GEMM is "gemm"; "aten::addmm" is "matmul"; "nn.Module: LlamaDecoderLayer_3"
// is "module.layer"; "vllm/attention/layer.py(290): forward" is "python". The set of
// tokens is closed, so a model trained on simulated runs reads a real trace's names.
#pragma once

#include <string>
#include <string_view>

#include "model/layer.h"

namespace teller::tpe {

// The token of an event of `layer` named `name` (docs/tpe.md, "Operator tokens").
std::string OperatorToken(model::Layer layer, std::string_view name);

}  // namespace teller::tpe
