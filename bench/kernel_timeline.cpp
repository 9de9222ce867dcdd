// A CUDA injection library: with CUDA_INJECTION64_PATH=.../libkernel_timeline.so
// set, the CUDA driver loads it into any program (fathom_bench here), and it
// records when each kernel ran on the GPU, launches replayed from CUDA graphs
// included, through CUPTI's activity API: the first block's start and the
// last block's end. At exit it writes them to $FATHOM_TIMELINE (default
// timeline.csv) as start_ns,end_ns,graph_node,name.
//
// Why: ncu times each kernel alone, and --profile-step-graph times a graph
// without one kernel's nodes; neither shows where a step's time goes while
// its kernels overlap (programmatic dependent launch lets a kernel start
// before the one before it ends). Here the ends, in order, are the step's
// critical path: scripts/timeline_costs.py charges each kernel the time from
// the end before it to its own end.
//
// Build (on this machine, for the GPU machine): scripts/gpu_bundle.sh timeline.
#include <cxxabi.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  uint64_t start, end, node;
  std::string name;
};

std::mutex rows_mutex;
std::vector<Row> rows;
constexpr size_t kBufferBytes = size_t(8) << 20;

std::string demangled(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && plain ? plain : name;
  std::free(plain);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  {
    std::lock_guard lock(rows_mutex);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      rows.push_back({k->start, k->end, k->graphNodeId, demangled(k->name)});
    }
  }
  std::free(buffer);
}

void write_rows() {
  cuptiActivityFlushAll(1);
  const char* path = std::getenv("FATHOM_TIMELINE");
  FILE* f = std::fopen(path ? path : "timeline.csv", "w");
  if (!f) {
    std::fprintf(stderr, "kernel_timeline: cannot write %s\n", path ? path : "timeline.csv");
    return;
  }
  std::lock_guard lock(rows_mutex);
  std::fprintf(f, "start_ns,end_ns,graph_node,name\n");
  for (const Row& r : rows) {
    std::string name = r.name;
    for (char& c : name)
      if (c == '"') c = '\'';
    std::fprintf(f, "%llu,%llu,%llu,\"%s\"\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), static_cast<unsigned long long>(r.node), name.c_str());
  }
  std::fclose(f);
}

}  // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_timeline: CUPTI would not record kernels\n");
    return 0;
  }
  std::atexit(write_rows);
  return 1;
}
