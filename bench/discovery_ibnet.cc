// Benchmark: reading a 10,000-node `ibnetdiscover` dump (250 scalable units of 40 nodes,
// 8 rails, 25 pods of 8 spines, 8 cores: 80,000 HCAs), generated in the real format by the
// test helper, into a switch tree. Target (issue 3): under 1 s in Release.
#include <benchmark/benchmark.h>

#include "../tests/support/ibnet_generator.h"
#include "formats/ibnetdiscover.h"

namespace {

const std::string& dump_10k() {
  static const std::string text = [] {
    toposched::IbnetGeneratorSpec s;
    s.scalable_units = 250;
    s.nodes_per_su = 40;
    s.rails = 8;
    s.sus_per_pod = 10;
    s.spines = 8;
    s.cores = 8;
    return toposched::generate_ibnetdiscover(s);
  }();
  return text;
}

void BM_ReadIbnetdiscover10k(benchmark::State& state) {
  const std::string& text = dump_10k();
  toposched::IbnetOptions o;
  if (state.range(0)) o.hca_regex = "mlx5_[0-7]";
  std::size_t nodes = 0;
  for (auto _ : state) {
    auto r = toposched::read_ibnetdiscover(text, "generated.ibnet", o);
    if (!r) {
      state.SkipWithError(r.error().to_string().c_str());
      return;
    }
    nodes = r->topology.nodes.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_ReadIbnetdiscover10k)->Arg(0)->Arg(1)->ArgName("hca_filter")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
