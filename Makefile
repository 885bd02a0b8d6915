# toposched front door. `make demo` and `make test` work on a fresh Debian 12 machine:
# both install what they need through scripts/install-deps first.
.PHONY: all deps build debug test kube demo bench bench-k8s fuzz mutations soak clean format

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
MUTATIONS ?= 10000
SOAK_SECONDS ?= 900
SOAK_SEED ?= 1

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS) --target toposched

debug: deps
	@cmake --preset debug >/dev/null
	@cmake --build --preset debug -j $(JOBS)

# Sanitizer build (ASan + UBSan), then every unit and end-to-end test, real Slurm and a real
# Kubernetes control plane included (kube-apiserver, kube-scheduler and kubectl are built from
# Go modules once, into a cached folder: scripts/install-k8s-test-binaries).
# The control plane's Go build runs beside the C++ build (its module downloads and its
# `nice`d compile fill the C++ build's idle time); both must succeed.
test: deps
	@scripts/install-k8s-test-binaries & go_build=$$!; \
	  cmake --preset debug >/dev/null && cmake --build --preset debug -j $(JOBS); cxx=$$?; \
	  wait $$go_build; go=$$?; \
	  [ $$cxx -eq 0 ] && [ $$go -eq 0 ]
	@scripts/build-kube
	@ctest --preset debug -j $(JOBS)

# The Go module kube/ (docs/kubernetes.md): the test control plane (built once, cached), the
# lifecycle controller into build/kube/, and the module's Go tests.
kube:
	@scripts/install-k8s-test-binaries
	@scripts/build-kube

# libFuzzer targets (clang 14, ASan + UBSan), every reader for FUZZ_SECONDS each; crashes
# are kept in tests/data/fuzz-regressions/ (docs/robustness.md). Then the option-space fuzz.
fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(JOBS) scripts/fuzz
	@# Option-space fuzz (issue 35): 100,000 random POST /v1/jobs dry runs and 2,000 `place`
	@# runs over every flag and policy, against the debug (sanitizer) build.
	@cmake --preset debug >/dev/null
	@cmake --build --preset debug -j $(JOBS) --target toposched
	@TOPOSCHED=$(CURDIR)/build/debug/toposched python3 tests/e2e/option_space.py --cases 100000 --cli-cases 2000

# `toposched serve` under churn with crashes, SOAK_SECONDS per store (SQLite, then 3 etcd
# members and 2 replicas), Release build; a 12-second version runs in `make test`
# (tests/soak/soak.py, docs/service.md "Soak test").
soak: build
	@TOPOSCHED=$(CURDIR)/build/release/toposched python3 tests/soak/soak.py --store both --seconds $(SOAK_SECONDS) --seed $(SOAK_SEED) --max-rss-mb 512

# MUTATIONS random mutations of the fixtures through the sanitizer build of the CLI.
mutations: debug
	@TOPOSCHED=$(CURDIR)/build/debug/toposched python3 tests/e2e/cli_mutations.py --count $(MUTATIONS) --jobs $(JOBS)

demo: build
	@scripts/demo build/release/toposched

# SCALE_JOBS: the job counts of bench/scale-runs.py (issue 34's simulations on 100,000
# GPUs, every policy in its own process; the 1,000,000-job runs take 3-6 minutes each).
SCALE_JOBS ?= 100000,1000000
bench: build
	@cmake --build --preset release -j $(JOBS)
	@scripts/run-benchmarks build/release/bench
	@bench/scale-runs.py build/release/toposched --jobs $(SCALE_JOBS)

# The Kubernetes benchmarks (docs/performance.md, docs/kubernetes.md): the default
# kube-scheduler, the extender and the plugin build on one queue of a DGX H100 SuperPOD and
# of GB200 NVL72 racks (placement quality), then the throughput on 5,000 pods over 1,000
# fake nodes. Each starts the test control plane (minutes); not part of `make bench`.
bench-k8s: build kube
	@bench/k8s/placement-compare.py build/release/toposched
	@bench/k8s/scheduler-throughput.py build/release/toposched --pods 5000 --nodes 1000 --precreate

format:
	@clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')

clean:
	@rm -rf build
