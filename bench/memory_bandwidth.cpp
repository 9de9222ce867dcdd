// Memory read-bandwidth benchmark (standalone, no dependencies beyond the C++ standard library).
//
// Build + run:
//   g++ -O3 -march=native -std=c++20 -pthread bench/memory_bandwidth.cpp -o /tmp/memory_bandwidth
//   /tmp/memory_bandwidth [--gib 4] [--reps 9] [--threads 1,2] [--no-pin] [--no-thp]
//
// Each of N threads (default: 1 and then 2) streams over its own contiguous slice of one
// large buffer (default 4 GiB, far larger than the caches) and sums it with 512-bit
// (AVX-512) or 256-bit (AVX2) integer loads into 8 independent accumulators. One
// repetition = every thread reads its whole slice once; the wall time of a repetition is
// measured from the barrier that starts all threads to the barrier where the last one ends.
// GB/s = bytes read / time / 1e9. The JSON printed on stdout gives, per (kernel, threads),
// the median and best GB/s over the repetitions (after one untimed warm-up pass).
// Threads are pinned to CPUs 0..N-1 unless --no-pin; the buffer is madvise(MADV_HUGEPAGE)d
// (transparent huge pages, fewer TLB misses) unless --no-thp.
//
// This is the number that bounds batch-1 decode speed of an LLM: every token reads all
// the weights once, so tokens/s <= bandwidth / weight bytes.

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using clk = std::chrono::steady_clock;

#if defined(__AVX512F__)
__attribute__((noinline)) uint64_t sum_avx512(const uint8_t* p, size_t bytes) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const uint8_t* end = p + bytes;
    for (; p + 512 <= end; p += 512) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + 0));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + 64));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + 128));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + 192));
        a4 = _mm512_add_epi64(a4, _mm512_load_si512(p + 256));
        a5 = _mm512_add_epi64(a5, _mm512_load_si512(p + 320));
        a6 = _mm512_add_epi64(a6, _mm512_load_si512(p + 384));
        a7 = _mm512_add_epi64(a7, _mm512_load_si512(p + 448));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)),
                          _mm512_add_epi64(_mm512_add_epi64(a4, a5), _mm512_add_epi64(a6, a7)));
    alignas(64) uint64_t t[8];  // (_mm512_reduce_add_epi64 trips a GCC 12 -Wuninitialized false positive)
    _mm512_store_si512(t, a0);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

#if defined(__AVX2__)
__attribute__((noinline)) uint64_t sum_avx2(const uint8_t* p, size_t bytes) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const uint8_t* end = p + bytes;
    for (; p + 256 <= end; p += 256) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i*)(p + 0)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i*)(p + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i*)(p + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i*)(p + 96)));
        a4 = _mm256_add_epi64(a4, _mm256_load_si256((const __m256i*)(p + 128)));
        a5 = _mm256_add_epi64(a5, _mm256_load_si256((const __m256i*)(p + 160)));
        a6 = _mm256_add_epi64(a6, _mm256_load_si256((const __m256i*)(p + 192)));
        a7 = _mm256_add_epi64(a7, _mm256_load_si256((const __m256i*)(p + 224)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)),
                          _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7)));
    alignas(32) uint64_t t[4];
    _mm256_store_si256((__m256i*)t, a0);
    return t[0] + t[1] + t[2] + t[3];
}
#endif

struct Kernel {
    const char* name;
    uint64_t (*fn)(const uint8_t*, size_t);
};

void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
    std::string kernel;
    int threads;
    std::vector<double> gbs;
    std::vector<double> thread_median_gbs;  // each thread's own slice / own time (diagnostic)
};

// Runs `reps` timed repetitions (plus one warm-up) of `k` with `nt` threads over buf.
Result run(const Kernel& k, int nt, const uint8_t* buf, size_t bytes, int reps, bool pin, int ncpu,
           uint64_t& sink) {
    const size_t slice = (bytes / nt) & ~size_t(4095);
    std::barrier start(nt + 1), stop(nt + 1);
    std::atomic<uint64_t> acc{0};
    std::vector<std::thread> th;
    const int total = reps + 1;
    std::vector<std::vector<double>> own(nt);
    for (int t = 0; t < nt; ++t) {
        th.emplace_back([&, t] {
            if (pin) pin_to_cpu(t % ncpu);
            const uint8_t* p = buf + size_t(t) * slice;
            for (int r = 0; r < total; ++r) {
                start.arrive_and_wait();
                auto t0 = clk::now();
                uint64_t s = k.fn(p, slice);
                double dt = std::chrono::duration<double>(clk::now() - t0).count();
                if (r > 0) own[t].push_back(double(slice) / dt / 1e9);
                acc.fetch_add(s, std::memory_order_relaxed);
                stop.arrive_and_wait();
            }
        });
    }
    Result res{k.name, nt, {}, {}};
    for (int r = 0; r < total; ++r) {
        auto t0 = clk::now();
        start.arrive_and_wait();
        stop.arrive_and_wait();
        double s = std::chrono::duration<double>(clk::now() - t0).count();
        if (r > 0) res.gbs.push_back(double(slice) * nt / s / 1e9);
    }
    for (auto& x : th) x.join();
    for (auto& v : own) res.thread_median_gbs.push_back(median(v));
    sink += acc.load();
    return res;
}

}  // namespace

int main(int argc, char** argv) {
    double gib = 4.0;
    int reps = 9;
    bool pin = true;
    bool thp = true;
    std::vector<int> thread_counts = {1, 2};
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--gib" && i + 1 < argc) gib = std::atof(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (a == "--no-pin") pin = false;
        else if (a == "--no-thp") thp = false;
        else if (a == "--threads" && i + 1 < argc) {
            thread_counts.clear();
            std::string s = argv[++i];
            size_t pos = 0;
            while (pos < s.size()) {
                size_t c = s.find(',', pos);
                if (c == std::string::npos) c = s.size();
                thread_counts.push_back(std::atoi(s.substr(pos, c - pos).c_str()));
                pos = c + 1;
            }
        } else {
            std::fprintf(stderr, "usage: %s [--gib G] [--reps N] [--threads 1,2] [--no-pin] [--no-thp]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    const int ncpu = std::max(1u, std::thread::hardware_concurrency());
    const size_t bytes = (size_t(gib * double(1ull << 30)) + 4095) & ~size_t(4095);

    constexpr size_t kAlign = size_t(2) << 20;  // 2 MiB so huge pages can back the whole buffer
    const size_t alloc_bytes = (bytes + kAlign - 1) & ~(kAlign - 1);
    uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(kAlign, alloc_bytes));
    if (!buf) {
        std::fprintf(stderr, "allocation of %zu bytes failed\n", bytes);
        return 1;
    }
    if (thp) madvise(buf, alloc_bytes, MADV_HUGEPAGE);  // best effort
    {  // first touch from all CPUs so pages are really backed (and NUMA-local where relevant)
        std::vector<std::thread> th;
        const size_t part = bytes / ncpu;
        for (int t = 0; t < ncpu; ++t)
            th.emplace_back([&, t] {
                if (pin) pin_to_cpu(t);
                size_t b = part * t, e = (t == ncpu - 1) ? bytes : b + part;
                for (size_t i = b; i < e; ++i) buf[i] = uint8_t(i * 131u + 7u);
            });
        for (auto& x : th) x.join();
    }

    std::vector<Kernel> kernels;
#if defined(__AVX512F__)
    kernels.push_back({"avx512", sum_avx512});
#endif
#if defined(__AVX2__)
    kernels.push_back({"avx2", sum_avx2});
#endif
    if (kernels.empty()) {
        std::fprintf(stderr, "build with -march=native on an AVX2/AVX-512 machine\n");
        return 1;
    }

    uint64_t sink = 0;
    std::vector<Result> results;
    for (const auto& k : kernels)
        for (int nt : thread_counts) {
            results.push_back(run(k, nt, buf, bytes, reps, pin, ncpu, sink));
            const auto& r = results.back();
            std::fprintf(stderr, "%-7s threads=%d median %.2f GB/s best %.2f GB/s (per thread:", r.kernel.c_str(), nt,
                         median(r.gbs), *std::max_element(r.gbs.begin(), r.gbs.end()));
            for (double g : r.thread_median_gbs) std::fprintf(stderr, " %.2f", g);
            std::fprintf(stderr, ")\n");
        }

    std::printf("{\n  \"buffer_bytes\": %zu,\n  \"reps\": %d,\n  \"pinned\": %s,\n  \"thp_madvise\": %s,\n  \"hw_threads\": %d,\n",
                bytes, reps, pin ? "true" : "false", thp ? "true" : "false", ncpu);
    std::printf("  \"unit\": \"GB/s (1e9 bytes/s)\",\n  \"results\": [\n");
    for (size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        std::printf("    {\"kernel\": \"%s\", \"threads\": %d, \"median_gbs\": %.2f, \"best_gbs\": %.2f, "
                    "\"min_gbs\": %.2f, \"all_gbs\": [",
                    r.kernel.c_str(), r.threads, median(r.gbs), *std::max_element(r.gbs.begin(), r.gbs.end()),
                    *std::min_element(r.gbs.begin(), r.gbs.end()));
        for (size_t j = 0; j < r.gbs.size(); ++j) std::printf("%s%.2f", j ? ", " : "", r.gbs[j]);
        std::printf("], \"per_thread_median_gbs\": [");
        for (size_t j = 0; j < r.thread_median_gbs.size(); ++j)
            std::printf("%s%.2f", j ? ", " : "", r.thread_median_gbs[j]);
        std::printf("]}%s\n", i + 1 < results.size() ? "," : "");
    }
    std::printf("  ],\n  \"checksum\": %llu\n}\n", (unsigned long long)sink);
    std::free(buf);
    return 0;
}
