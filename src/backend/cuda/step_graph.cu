// Recording, capturing and replaying decode steps as CUDA graphs.
#include "backend/cuda/step_graph.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace fathom::cuda {

std::vector<void*> RecordedCall::arg_pointers() {
  std::vector<void*> p;
  p.reserve(offsets.size());
  for (uint32_t at : offsets) p.push_back(args.data() + at);
  return p;
}

void enqueue_kernel(const char* op, const void* func, dim3 grid, dim3 block, size_t shared_bytes, void** args,
                    cudaStream_t stream, bool overlap) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &early;
  config.numAttrs = overlap ? 1 : 0;
  check_cuda(cudaLaunchKernelExC(&config, func, args), op);
}

bool RecordedCall::same_launch(const RecordedCall& o) const {
  return grid.x == o.grid.x && grid.y == o.grid.y && grid.z == o.grid.z && block.x == o.block.x &&
         block.y == o.block.y && block.z == o.block.z && shared_bytes == o.shared_bytes && args == o.args;
}

namespace {

// What must match for a graph to be replayed: the sequence of kernels and
// opaque signatures (kernel arguments and grids may differ: nodes are updated).
uint64_t shape_key(std::span<const RecordedCall> calls) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(calls.size());
  for (const RecordedCall& c : calls) {
    mix(reinterpret_cast<uintptr_t>(c.func));
    for (uint64_t v : c.signature) mix(v);
  }
  return h;
}

bool same_shape(std::span<const RecordedCall> a, std::span<const RecordedCall> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].func != b[i].func || a[i].signature != b[i].signature) return false;
  return true;
}

void launch(RecordedCall& c, cudaStream_t stream) {
  if (!c.is_kernel()) return c.run(stream);
  std::vector<void*> args = c.arg_pointers();
  enqueue_kernel("launch a recorded kernel", c.func, c.grid, c.block, c.shared_bytes, args.data(), stream, c.overlap);
}

constexpr size_t kMaxGraphs = 8;

}  // namespace

struct StepGraphCache::Graph {
  uint64_t key = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<RecordedCall> calls;     // as the exec runs them now (run closures dropped)
  std::vector<cudaGraphNode_t> nodes;  // each kernel call's node; null for opaque calls
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

StepGraphCache::StepGraphCache() = default;
StepGraphCache::~StepGraphCache() = default;

void StepGraphCache::run_eagerly(std::span<RecordedCall> calls, cudaStream_t stream) {
  step_eager_ = true;
  for (RecordedCall& c : calls) launch(c, stream);
}

void StepGraphCache::run(std::span<RecordedCall> calls, cudaStream_t stream) {
  const size_t piece = step_.size();
  if (pieces_.size() <= piece) pieces_.resize(piece + 1);
  std::vector<std::unique_ptr<Graph>>& graphs = pieces_[piece];
  const uint64_t key = shape_key(calls);
  for (size_t g = graphs.size(); g-- > 0;) {
    Graph& graph = *graphs[g];
    if (graph.key != key || !same_shape(graph.calls, calls)) continue;
    for (size_t i = 0; i < calls.size(); ++i) {
      RecordedCall& now = calls[i];
      if (!now.is_kernel() || now.same_launch(graph.calls[i])) continue;
      std::vector<void*> args = now.arg_pointers();
      cudaKernelNodeParams p{};
      p.func = const_cast<void*>(now.func);
      p.gridDim = now.grid;
      p.blockDim = now.block;
      p.sharedMemBytes = unsigned(now.shared_bytes);
      p.kernelParams = args.data();
      check_cuda(cudaGraphExecKernelNodeSetParams(graph.exec, graph.nodes[i], &p), "update a step graph's kernel");
      graph.calls[i].grid = now.grid;
      graph.calls[i].block = now.block;
      graph.calls[i].shared_bytes = now.shared_bytes;
      graph.calls[i].args = now.args;
      ++counts_.updated_nodes;
    }
    check_cuda(cudaGraphLaunch(graph.exec, stream), "launch a step graph");
    step_.push_back(&graph);
    // Most recently used last.
    std::rotate(graphs.begin() + ptrdiff_t(g), graphs.begin() + ptrdiff_t(g) + 1, graphs.end());
    return;
  }
  step_.push_back(capture(calls, stream, key, graphs));
  step_captured_ = true;
}

bool StepGraphCache::count_step(double lead_seconds, double host_seconds, double gpu_seconds) {
  if (step_eager_ || step_.empty()) return false;
  if (step_captured_) {
    ++counts_.captures;
    return false;
  }
  ++counts_.replays;
  counts_.lead_seconds += lead_seconds;
  counts_.host_seconds += host_seconds;
  if (gpu_seconds >= 0.0) counts_.gpu_seconds += gpu_seconds;
  return true;
}

namespace {

// A kernel's name without its namespaces and parameter list ("attention_decode_bf16_kernel<128>").
std::string kernel_name(const void* func) {
  const char* mangled = nullptr;
  if (cudaFuncGetName(&mangled, func) != cudaSuccess || !mangled) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  std::string name = status == 0 && plain ? plain.get() : mangled;
  for (const std::string noise : {"(anonymous namespace)::", "fathom::cuda::", "void "})
    for (size_t at; (at = name.find(noise)) != std::string::npos;) name.erase(at, noise.size());
  // Cut the parameter list: the '(' that closes no template argument list.
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    else if (name[i] == '>') --depth;
    else if (name[i] == '(' && depth == 0) return name.substr(0, i);
  }
  return name;
}

}  // namespace

Backend::StepGraphCosts StepGraphCache::kernel_costs(cudaStream_t stream, int rounds, int repeats) {
  Backend::StepGraphCosts costs;
  if (step_.empty() || step_eager_) return costs;
  auto launch_step = [&] {
    for (Graph* g : step_) check_cuda(cudaGraphLaunch(g->exec, stream), "launch a step graph");
  };
  cudaEvent_t start = nullptr, end = nullptr;
  check_cuda(cudaEventCreate(&start), "create a timing event");
  check_cuda(cudaEventCreate(&end), "create a timing event");
  auto time_ms = [&] {
    std::vector<float> ms;
    for (int r = 0; r < rounds; ++r) {
      check_cuda(cudaEventRecord(start, stream), "record a timing event");
      for (int i = 0; i < repeats; ++i) launch_step();
      check_cuda(cudaEventRecord(end, stream), "record a timing event");
      check_cuda(cudaEventSynchronize(end), "wait for a timing event");
      float elapsed = 0.0f;
      check_cuda(cudaEventElapsedTime(&elapsed, start, end), "read a timing event");
      ms.push_back(elapsed / float(repeats));
    }
    std::nth_element(ms.begin(), ms.begin() + ptrdiff_t(ms.size() / 2), ms.end());
    return double(ms[ms.size() / 2]);
  };
  launch_step();  // warm
  costs.whole_ms = time_ms();
  std::vector<const void*> funcs;
  for (const Graph* g : step_)
    for (const RecordedCall& c : g->calls)
      if (c.is_kernel() && std::find(funcs.begin(), funcs.end(), c.func) == funcs.end()) funcs.push_back(c.func);
  auto enable = [&](const void* func, bool on) {
    int64_t n = 0;
    for (Graph* g : step_)
      for (size_t i = 0; i < g->calls.size(); ++i) {
        if (g->calls[i].func != func) continue;
        check_cuda(cudaGraphNodeSetEnabled(g->exec, g->nodes[i], on ? 1 : 0), "switch a graph node");
        ++n;
      }
    return n;
  };
  for (const void* func : funcs) {
    Backend::StepKernelCost& k = costs.kernels.emplace_back();
    k.kernel = kernel_name(func);
    k.nodes = enable(func, false);
    k.ms_saved = costs.whole_ms - time_ms();
    enable(func, true);
  }
  // The ablated runs left wrong values behind: the whole step once more puts
  // its results (its KV rows among them) back as they were.
  launch_step();
  check_cuda(cudaStreamSynchronize(stream), "wait for the stream");
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return costs;
}

StepGraphCache::Graph* StepGraphCache::capture(std::span<RecordedCall> calls, cudaStream_t stream, uint64_t key,
                                               std::vector<std::unique_ptr<Graph>>& graphs) {
  auto graph = std::make_unique<Graph>();
  graph->key = key;
  graph->nodes.assign(calls.size(), nullptr);
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "begin capturing a step");
  try {
    for (size_t i = 0; i < calls.size(); ++i) {
      launch(calls[i], stream);
      if (!calls[i].is_kernel()) continue;
      cudaStreamCaptureStatus status{};
      const cudaGraphNode_t* deps = nullptr;
      size_t count = 0;
      check_cuda(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &count),
                 "find a captured kernel's node");
      check(status == cudaStreamCaptureStatusActive && count == 1, "cuda: capturing a step: the kernel of call ", i,
            " left ", count, " graph nodes to depend on");
      graph->nodes[i] = deps[0];
    }
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream, &graph->graph), "end capturing a step");
  check_cuda(cudaGraphInstantiate(&graph->exec, graph->graph, 0), "instantiate a step graph");
  check_cuda(cudaGraphLaunch(graph->exec, stream), "launch a step graph");
  for (RecordedCall& c : calls) c.run = nullptr;  // what they captured is in the graph
  graph->calls.assign(calls.begin(), calls.end());
  if (graphs.size() == kMaxGraphs) graphs.erase(graphs.begin());
  graphs.push_back(std::move(graph));
  return graphs.back().get();
}

}  // namespace fathom::cuda
