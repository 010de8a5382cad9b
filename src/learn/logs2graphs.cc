// Logs2Graphs: each record's logs as a directed graph (a node per distinct template,
// its semantic vector and log1p count as features; an edge per observed transition,
// weighted by its share of the source's transitions). Two directed graph convolutions
// (self, successors and predecessors apart, no biases), mean readout of both layers,
// trained one-class on normal records: Deep SVDD's squared distance to a fixed centre
// is the loss and the anomaly score.
#include <algorithm>
#include <map>

#include <torch/nn.h>
#include <torch/optim.h>

#include "learn/log_comparison_nets.h"

namespace teller::learn::log_comparisons {
namespace {

constexpr int32_t kGraphEpochs = 10;
constexpr size_t kGraphBatch = 64;
constexpr double kGraphLearningRate = 1e-3;
constexpr double kWeightDecay = 1e-5;
constexpr float kCentreFloor = 0.1f;  // Deep SVDD: keeps centre coordinates off zero

struct Graph {
  std::vector<int32_t> node_template;
  std::vector<float> node_count;
  std::vector<int64_t> edge_src, edge_dst;
  std::vector<float> edge_weight;
};

Graph MakeGraph(const std::vector<int32_t>& templates) {
  Graph graph;
  std::map<int32_t, int64_t> node_of;
  std::vector<int64_t> sequence;
  for (int32_t t : templates) {
    const auto [it, added] = node_of.emplace(t, static_cast<int64_t>(graph.node_template.size()));
    if (added) {
      graph.node_template.push_back(t);
      graph.node_count.push_back(0);
    }
    graph.node_count[static_cast<size_t>(it->second)] += 1;
    sequence.push_back(it->second);
  }
  std::map<std::pair<int64_t, int64_t>, float> transitions;
  std::vector<float> out_total(graph.node_template.size(), 0);
  for (size_t i = 1; i < sequence.size(); ++i) {
    transitions[{sequence[i - 1], sequence[i]}] += 1;
    out_total[static_cast<size_t>(sequence[i - 1])] += 1;
  }
  for (const auto& [edge, count] : transitions) {
    graph.edge_src.push_back(edge.first);
    graph.edge_dst.push_back(edge.second);
    graph.edge_weight.push_back(count / out_total[static_cast<size_t>(edge.first)]);
  }
  for (float& c : graph.node_count) c = std::log1p(c);
  return graph;
}

// A batch of graphs as one: node features [N, D + 1], edges, the graph of each node.
struct GraphBatch {
  torch::Tensor x, src, dst, weight, graph_of, nodes_per_graph;
  int64_t graphs = 0;
};

GraphBatch Collate(const std::vector<Graph>& graphs, const torch::Tensor& table,
                   const std::vector<size_t>& rows) {
  std::vector<int64_t> node_template, graph_of, src, dst;
  std::vector<float> count, weight, nodes_per_graph;
  std::vector<float> empty;  // 1 for the placeholder node of a graph without logs
  for (size_t g = 0; g < rows.size(); ++g) {
    const Graph& graph = graphs[rows[g]];
    const auto base = static_cast<int64_t>(node_template.size());
    const bool none = graph.node_template.empty();
    for (size_t n = 0; n < std::max<size_t>(graph.node_template.size(), 1); ++n) {
      node_template.push_back(none ? 0 : graph.node_template[n]);
      count.push_back(none ? 0.0f : graph.node_count[n]);
      empty.push_back(none ? 0.0f : 1.0f);
      graph_of.push_back(static_cast<int64_t>(g));
    }
    nodes_per_graph.push_back(static_cast<float>(std::max<size_t>(graph.node_template.size(), 1)));
    for (size_t e = 0; e < graph.edge_src.size(); ++e) {
      src.push_back(base + graph.edge_src[e]);
      dst.push_back(base + graph.edge_dst[e]);
      weight.push_back(graph.edge_weight[e]);
    }
  }
  GraphBatch batch;
  const auto n = static_cast<int64_t>(node_template.size());
  const torch::Tensor vectors =
      table.index_select(0, torch::tensor(node_template)) * torch::tensor(empty).reshape({n, 1});
  batch.x = torch::cat({vectors, torch::tensor(count).reshape({n, 1})}, 1);
  batch.src = torch::tensor(src, torch::kInt64);
  batch.dst = torch::tensor(dst, torch::kInt64);
  batch.weight = torch::tensor(weight, torch::kFloat32).reshape({-1, 1});
  batch.graph_of = torch::tensor(graph_of);
  batch.nodes_per_graph = torch::tensor(nodes_per_graph).reshape({-1, 1});
  batch.graphs = static_cast<int64_t>(rows.size());
  return batch;
}

struct DirectedConvImpl : torch::nn::Module {
  DirectedConvImpl(int64_t in, int64_t out)
      : self(register_module("self",
                             torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))),
        successors(register_module(
            "successors", torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))),
        predecessors(register_module(
            "predecessors", torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))) {}

  torch::Tensor forward(const torch::Tensor& h, const GraphBatch& g) {
    torch::Tensor from_successors =
        torch::zeros_like(h).index_add(0, g.src, h.index_select(0, g.dst) * g.weight);
    torch::Tensor from_predecessors =
        torch::zeros_like(h).index_add(0, g.dst, h.index_select(0, g.src) * g.weight);
    return torch::leaky_relu(self->forward(h) + successors->forward(from_successors) +
                             predecessors->forward(from_predecessors));
  }

  torch::nn::Linear self, successors, predecessors;
};
TORCH_MODULE(DirectedConv);

struct GraphEncoderImpl : torch::nn::Module {
  GraphEncoderImpl(int64_t in, int64_t dim)
      : first(register_module("first", DirectedConv(in, dim))),
        second(register_module("second", DirectedConv(dim, dim))) {}

  // -> [graphs, 2 * dim]: the mean node of each layer.
  torch::Tensor forward(const GraphBatch& g) {
    const torch::Tensor h1 = first->forward(g.x, g);
    const torch::Tensor h2 = second->forward(h1, g);
    auto mean = [&](const torch::Tensor& h) {
      return torch::zeros({g.graphs, h.size(1)}).index_add(0, g.graph_of, h) / g.nodes_per_graph;
    };
    return torch::cat({mean(h1), mean(h2)}, 1);
  }

  DirectedConv first, second;
};
TORCH_MODULE(GraphEncoder);

std::vector<Graph> MakeGraphs(const LogComparisonData& data) {
  std::vector<Graph> graphs;
  for (const LogComparisonRecord& record : data.records)
    graphs.push_back(MakeGraph(record.templates));
  return graphs;
}

torch::Tensor Embed(GraphEncoder& net, const LogComparisonData& data,
                    const std::vector<size_t>& rows) {
  const std::vector<Graph> graphs = MakeGraphs(data);
  const torch::Tensor table = TemplateTable(data);
  std::vector<torch::Tensor> parts;
  for (const std::vector<size_t>& batch : Batches(rows, 256))
    parts.push_back(net->forward(Collate(graphs, table, batch)));
  return torch::cat(parts, 0);
}

std::vector<float> Score(GraphEncoder& net, const LogComparisonData& data,
                         const torch::Tensor& centre) {
  torch::NoGradGuard no_grad;
  net->eval();
  std::vector<size_t> all(data.records.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return ToFloats((Embed(net, data, all) - centre).pow(2).sum(1));
}

}  // namespace

base::StatusOr<Fitted> FitLogs2Graphs(const LogComparisonData& train, const LogComparisonData& test,
                                      const LogComparisonOptions& options) {
  std::vector<size_t> order = NormalRecords(train);
  if (order.empty())
    return base::InvalidArgument("logs2graphs: the train part has no normal record");
  GraphEncoder net(train.template_dims + 1, options.dim);
  torch::Tensor centre;
  {
    torch::NoGradGuard no_grad;
    centre = Embed(net, train, order).mean(0);
    const torch::Tensor floor = torch::where(centre < 0, torch::full_like(centre, -kCentreFloor),
                                             torch::full_like(centre, kCentreFloor));
    centre = torch::where(centre.abs() < kCentreFloor, floor, centre);
  }
  torch::optim::Adam optimizer(
      net->parameters(), torch::optim::AdamOptions(kGraphLearningRate).weight_decay(kWeightDecay));
  const std::vector<Graph> graphs = MakeGraphs(train);
  const torch::Tensor table = TemplateTable(train);
  std::mt19937_64 rng(options.seed);
  Fitted fitted;
  fitted.epochs = options.epochs > 0 ? options.epochs : kGraphEpochs;
  for (int32_t epoch = 0; epoch < fitted.epochs; ++epoch) {
    net->train();
    Shuffle(&order, &rng);
    for (const std::vector<size_t>& rows : Batches(order, kGraphBatch)) {
      const torch::Tensor loss =
          (net->forward(Collate(graphs, table, rows)) - centre).pow(2).sum(1).mean();
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }
  }
  fitted.parameters = ParameterCount(*net);
  fitted.train_scores = Score(net, train, centre);
  fitted.test_scores = Score(net, test, centre);
  return fitted;
}

}  // namespace teller::learn::log_comparisons
