// Layer of an event from its name, shared by every importer so that a kernel or
// call means the same layer whatever file it came from.
#pragma once

#include <string_view>

#include "model/layer.h"

namespace teller::model {

// Device work: a kernel is COMM when it is a collective (NCCL/RCCL, NVLS
// multimem all-reduce, custom all-reduce), else K.
Layer ClassifyKernel(std::string_view kernel_name);
bool IsCollectiveKernelName(std::string_view kernel_name);
// Host API call (cuda*/hip*/cu*): SYNC for synchronizations, DRV for driver
// calls (cu*, hipDrv*), else RT.
Layer ClassifyApiCall(std::string_view api_name, bool from_driver_domain);
// A graph launch (cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch).
bool IsGraphLaunchName(std::string_view api_name);
// Kernel launches and async copies/sets: calls that put work on a stream.
bool IsLaunchName(std::string_view api_name);

// Host work of the PyTorch profiler. An op (Kineto's cpu_op): COMM for collectives
// (record_param_comms, nccl:*, c10d::*), else BE.
Layer ClassifyHostOp(std::string_view op_name);
// A user annotation (record_function, Kineto's user_annotation): COMM for nccl:*,
// else FE (ProfilerStep#N and engine step annotations stay FE).
Layer ClassifyUserAnnotation(std::string_view range_name);
// A host range that says neither (the legacy autograd profiler writes no category): an
// op when its name reads as one (a namespace, "aten::mm", "autograd::engine::...",
// or an autograd node, "AddmmBackward0"), else a user annotation ("ProfilerStep#3",
// "Optimizer.step#SGD.step").
Layer ClassifyHostRange(std::string_view range_name);

}  // namespace teller::model
