// Taskflow's build+run of the five shapes of `pto-wsp bench` (crates/pto-wsp-cpu/src/shapes.rs):
// the same tasks and the same edges, every task empty, timed from the first `emplace` to the end
// of `run(...).get()`; best of REPEAT runs per shape, ns per task. Built and run by
// scripts/bench-taskflow.sh against a Taskflow checkout (header-only; not part of this
// repository). It prints each shape's edge count so it can be checked against
// `pto-wsp bench`'s header lines (chain 999,999; tree 1,048,574; independent 0;
// wavefront 1,998,000; random 2,497,241).
//
// Usage: taskflow-shapes THREADS REPEAT SHAPE...   (SHAPE: chain tree independent wavefront random)
#include <taskflow/taskflow.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// SplitMix64, as `pto_wsp_ir::expand::splitmix64`.
uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The random shape's draws, as `Draws` in shapes.rs: a task's predecessors depend only on the
// seed and the task's id.
struct Draws {
  uint64_t state;
  Draws(uint64_t seed, uint64_t task) : state(splitmix64(seed ^ splitmix64(task))) {}
  uint64_t next() {
    uint64_t r = splitmix64(state);
    state += 0x9E3779B97F4A7C15ull;
    return r;
  }
  // Uniform in 0..n (multiply-shift).
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
};

struct Graph {
  tf::Taskflow flow;
  std::vector<tf::Task> tasks;
  size_t edges = 0;

  void add_tasks(size_t n) {
    tasks.resize(n);
    for (auto& t : tasks) t = flow.emplace([] {});
  }
  void edge(size_t from, size_t to) {
    tasks[from].precede(tasks[to]);
    ++edges;
  }
};

// Builds `shape` at the sizes `pto-wsp bench` uses by default; false if the name is unknown.
bool build(const std::string& shape, Graph& g) {
  if (shape == "chain") {
    g.add_tasks(1000000);
    for (size_t i = 1; i < g.tasks.size(); ++i) g.edge(i - 1, i);
  } else if (shape == "tree") {
    const size_t n = (size_t{1} << 20) - 1;
    g.add_tasks(n);
    for (size_t p = 0; p < n; ++p)
      for (size_t c : {2 * p + 1, 2 * p + 2})
        if (c < n) g.edge(p, c);
  } else if (shape == "independent") {
    g.add_tasks(1000000);
  } else if (shape == "wavefront") {
    const size_t s = 1000;
    g.add_tasks(s * s);
    for (size_t i = 0; i < s; ++i)
      for (size_t j = 0; j < s; ++j) {
        if (i > 0) g.edge((i - 1) * s + j, i * s + j);
        if (j > 0) g.edge(i * s + j - 1, i * s + j);
      }
  } else if (shape == "random") {
    // random:1000:1000 with the default seed: 1 to 4 distinct predecessors in the previous
    // level (Floyd's sampling), as `random_preds` in shapes.rs.
    const uint32_t width = 1000, levels = 1000;
    const uint64_t seed = 0x5EED;
    g.add_tasks(size_t{width} * levels);
    for (uint64_t t = width; t < uint64_t{width} * levels; ++t) {
      const uint64_t level = t / width;
      Draws d(seed, t);
      const uint32_t k = d.below(width < 4 ? width : 4) + 1;
      uint32_t picks[4];
      for (uint32_t n = 0, j = width - k; j < width; ++j, ++n) {
        const uint32_t r = d.below(j + 1);
        bool taken = false;
        for (uint32_t q = 0; q < n; ++q) taken |= picks[q] == r;
        picks[n] = taken ? j : r;
      }
      for (uint32_t n = 0; n < k; ++n) g.edge((level - 1) * width + picks[n], t);
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s THREADS REPEAT SHAPE...\n", argv[0]);
    return 2;
  }
  const unsigned threads = static_cast<unsigned>(std::atoi(argv[1]));
  const int repeat = std::atoi(argv[2]);
  tf::Executor executor(threads);
  for (int a = 3; a < argc; ++a) {
    const std::string shape = argv[a];
    double best = 1e300;
    size_t tasks = 0, edges = 0;
    for (int r = 0; r < repeat; ++r) {
      Graph g;
      const auto start = std::chrono::steady_clock::now();
      if (!build(shape, g)) {
        std::fprintf(stderr, "unknown shape `%s`\n", shape.c_str());
        return 2;
      }
      executor.run(g.flow).get();
      const auto end = std::chrono::steady_clock::now();
      tasks = g.tasks.size();
      edges = g.edges;
      const double ns = std::chrono::duration<double, std::nano>(end - start).count() / tasks;
      if (ns < best) best = ns;
    }
    std::printf("taskflow %s threads %u tasks %zu edges %zu best %.1f ns/task\n", shape.c_str(),
                threads, tasks, edges, best);
  }
  return 0;
}
