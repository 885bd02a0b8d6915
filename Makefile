# toposched front door. `make demo` and `make test` work on a fresh Debian 12 machine:
# both install what they need through scripts/install-deps first.
.PHONY: all deps build debug test demo bench clean format

JOBS ?= $(shell nproc)

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS) --target toposched

debug: deps
	@cmake --preset debug >/dev/null
	@cmake --build --preset debug -j $(JOBS)

# Sanitizer build (ASan + UBSan), then every unit and end-to-end test, real Slurm included.
test: debug
	@ctest --preset debug -j $(JOBS)

demo: build
	@scripts/demo build/release/toposched

bench: build
	@cmake --build --preset release -j $(JOBS)
	@scripts/run-benchmarks build/release/bench

format:
	@clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')

clean:
	@rm -rf build
