# flashstep. `make run` starts the app, `make test` runs every test; both set
# up what they need first.

GO      ?= go
ADDR    ?= localhost:8080
VENDOR  := static/vendor

.PHONY: run build test test-long test-prep check generate check-generated assets tools bench fuzz clean ptx check-ptx gpu loadtest bench-gpu bench-backward lab-gpu-build lab-gpu-test perf-pages lighthouse site

run: build
	./bin/server -addr $(ADDR)

build: assets
	$(GO) build -o bin/server ./cmd/server

# Browser libraries come from npm (package.json) and are copied into
# static/vendor, which the server embeds; CodeMirror's packages (the lab's
# editor) are bundled into one module there by esbuild. Never committed. axe-core (a dev
# dependency) stays in node_modules: the accessibility test
# (cmd/server/a11y_test.go) loads it into the pages it checks.
assets: $(VENDOR)/.stamp

$(VENDOR)/.stamp: package.json package-lock.json scripts/codemirror-entry.js
	scripts/need npm
	npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(VENDOR)
	mkdir -p $(VENDOR)/katex $(VENDOR)/d3 $(VENDOR)/chart $(VENDOR)/codemirror
	cp -r node_modules/katex/dist/katex.min.js node_modules/katex/dist/katex.min.css node_modules/katex/dist/fonts $(VENDOR)/katex/
	cp node_modules/d3-color/dist/d3-color.min.js node_modules/d3-interpolate/dist/d3-interpolate.min.js \
	   node_modules/d3-scale-chromatic/dist/d3-scale-chromatic.min.js $(VENDOR)/d3/
	cp node_modules/chart.js/dist/chart.umd.min.js $(VENDOR)/chart/
	node_modules/.bin/esbuild scripts/codemirror-entry.js --bundle --format=esm --minify --log-level=warning \
	   --outfile=$(VENDOR)/codemirror/codemirror.js
	touch $@

# `make test` is the suite to run on every change: each test at its short
# size (-short: fewer random draws, one lesson of each kind in the browser,
# the sweep's shapes trimmed), every package, under 90 s on two cores.
# `make test-long` runs the same tests at full size (every lesson page in
# Chromium, every shape, every draw); CI runs both.
#
# Four tests of a package at a time (-parallel 4), not two: the browser
# tests and the body deadlines mostly wait on Chromium and the clock, not
# the CPU. The front end's Node tests run beside Go's, their report after.
# -vet=off: test-prep has run all of go vet; go test's own subset of it
# again costs about 1.5 s of the two cores.
test: test-prep
	@mkdir -p bin; node --test --test-reporter=spec jstest/*.test.mjs > bin/jstest.log 2>&1 & js=$$!; \
	  $(GO) test -short -vet=off -parallel 4 ./...; gostatus=$$?; \
	  wait $$js; jsstatus=$$?; cat bin/jstest.log; \
	  [ $$jsstatus = 0 ] || echo "make test: the front end's Node tests failed (above)"; \
	  [ $$gostatus = 0 ] && [ $$jsstatus = 0 ]

test-long: test-prep
	node --test --test-reporter=spec jstest/*.test.mjs
	$(GO) test -timeout 20m ./...

test-prep: assets check-generated check-ptx
	scripts/need chromium
	scripts/need chromium-headless-shell
	$(GO) vet ./...
	$(GO) vet -tags gpu ./cmd/gpuworker
	$(GO) build -tags gpu -o bin/gpuworker ./cmd/gpuworker

# Regenerate what is written from other sources: the templ components; the
# variant enum (instrument/variants.go) from the kernels' registry entries,
# then the trace ABI files (kernels/cuda/common/trace_abi.h,
# static/js/trace_abi.js) from it (two runs: the second compiles the
# first's output); the ladder bench's rungs (bench/ladder/rungs_gen.cuh);
# the front end's test fixtures, written by the Go encoder and registry
# (jstest/testdata); the formulas KaTeX typesets once for every page
# (lessons/maths_gen.json, static/js/formulas_gen.js).
generate:
	$(GO) tool templ generate
	$(GO) test ./instrument -run TestGeneratedVariants -update
	$(GO) test ./instrument -run TestGeneratedABI -update
	$(GO) test ./ladder -run TestGeneratedBenchRungs -update
	$(GO) test ./jstest -run TestFixtures -update
	$(GO) test ./lessons -run TestGeneratedMaths -update
	node scripts/katex-typeset.mjs --heads > static/js/formulas_gen.js

# Fails when templ's output is stale. The other generated files (the
# variant enum, the trace ABI files, the ladder bench's rungs, the Node
# tests' fixtures, the typeset formulas) are each held by a test of the
# suite that make test runs next (TestGeneratedVariants, TestGeneratedABI,
# TestGeneratedBenchRungs, TestFixtures, TestGeneratedMaths and
# jstest/maths.test.mjs), which names `make generate` when one is stale.
check-generated:
	$(GO) tool templ generate
	@git diff --exit-code -- templates || { echo "templ output was stale: regenerated, commit it"; exit 1; }

# The kernels' PTX, traced (-DFS_TRACE) and untraced, is committed so that a Go
# build needs no CUDA toolkit. It must come from Debian's nvcc 11.8, without
# -lineinfo (no absolute paths). ptxas.txt records registers, spills and
# shared memory per kernel for sm_90.
NVCC      ?= nvcc
NVCC_WANT := release 11.8,
PTXFLAGS  := -ptx -arch=compute_80 -std=c++17
# The sources sit in kernels/cuda by family (common headers, forward,
# hopper, backward). The Hopper rungs (first line "// needs: sm_90a") need
# nvcc 12 or newer: their PTX is built on the GPU machine by
# scripts/ptx-hopper and committed.
CUDA_CU   := $(wildcard kernels/cuda/*/*.cu)
HOPPER_CU := $(shell grep -l -x '// needs: sm_90a' $(CUDA_CU))
KERNEL_CU := $(filter-out $(HOPPER_CU),$(CUDA_CU))
COMMON_H  := $(wildcard kernels/cuda/common/*)
# The PTX is committed gzipped (a fifth of its size: the repository travels
# to the GPU machine whole, under a size limit); the .ptx beside it is
# ignored.
PTX       := $(foreach k,$(sort $(notdir $(KERNEL_CU:.cu=))),kernels/ptx/$(k).ptx.gz kernels/ptx/$(k)_traced.ptx.gz)
vpath %.cu $(sort $(dir $(KERNEL_CU)))

ptx: $(PTX) kernels/ptx/ptxas.txt

kernels/ptx/%_traced.ptx.gz: %.cu $(COMMON_H)
	@scripts/need-nvcc "$(NVCC)" "$(NVCC_WANT)"
	$(NVCC) $(PTXFLAGS) -DFS_TRACE -o $(@:.gz=) $<
	gzip -n -9 -f $(@:.gz=)

kernels/ptx/%.ptx.gz: %.cu $(COMMON_H)
	@scripts/need-nvcc "$(NVCC)" "$(NVCC_WANT)"
	$(NVCC) $(PTXFLAGS) -o $(@:.gz=) $<
	gzip -n -9 -f $(@:.gz=)

# A module whose .cu includes another rung's (decode_split.cu builds on
# decode_group.cu's block, decode_paged.cu on both) depends on it too.
kernels/ptx/decode_split.ptx.gz kernels/ptx/decode_split_traced.ptx.gz: kernels/cuda/forward/decode_group.cu
kernels/ptx/decode_paged.ptx.gz kernels/ptx/decode_paged_traced.ptx.gz: kernels/cuda/forward/decode_group.cu kernels/cuda/forward/decode_split.cu

kernels/ptx/ptxas.txt: $(PTX)
	mkdir -p bin; for f in $(PTX); do echo "== $$(basename $$f .gz)"; gzip -dc $$f > bin/ptxas-in.ptx; ptxas -v -arch=sm_90 -o /dev/null bin/ptxas-in.ptx 2>&1; done > $@

# Recompiles the PTX and fails if the committed files differ, or if an
# untraced build holds any trace code.
check-ptx:
	scripts/check-ptx "$(NVCC)" "$(NVCC_WANT)"

# The GPU worker: the one binary that links the CUDA driver.
gpu: assets
	$(GO) build -tags gpu -o bin/gpuworker ./cmd/gpuworker

bench: assets
	$(GO) test ./kernels ./web -run XXX -bench . -benchtime 20x

# On the GPU machine: the ladder's kernels beside PyTorch's SDPA on the same
# shapes, in one run, as one table (scripts/bench-gpu; docs/LADDER.md).
bench-gpu:
	scripts/bench-gpu

# The tensor-core backward beside SDPA's backward, on the GPU machine
# (scripts/bench-backward; docs/LADDER.md, "The backward pass").
bench-backward:
	scripts/bench-backward

# The lab's kernel track on a GPU, in two steps: `make lab-gpu-build` here
# (Go builds the GPU tests' binary into .gpu/, which the GPU machine, with
# no Go, runs), then `make lab-gpu-test` on the GPU machine: every kernel
# exercise's solution compiled by NVRTC and run in a process of its own,
# then kernels that loop forever, write out of bounds, trap, mask off by one,
# race on shared memory (under racecheck) or do not compile, each with its
# verdict (docs/GPU.md has the figures).
lab-gpu-build:
	mkdir -p .gpu
	$(GO) test -c -tags gpu -o .gpu/gpuworker.test ./cmd/gpuworker

lab-gpu-test:
	.gpu/gpuworker.test -test.run 'TestLab' -test.v -test.timeout 300s

# The lesson pages' main thread as they load, held to issue 30's goal
# (total blocking time under 200 ms on every lesson), measured with
# nothing else running: a speed goal, not part of make test, which holds
# the pages to 1 s beside its other tests.
perf-pages: test-prep
	$(GO) test ./cmd/server -run TestBrowserLessonBlockingTime -count=1 -v -blocking-bound 200ms

# Every page through Lighthouse 12 (desktop preset, throttling off,
# performance only) against bin/server in CPU mode on a free port: a table
# of score, total blocking time, LCP, CLS and transfer size; fails when a
# page scores under 90 or blocks 200 ms or more (issue 30). Slow (about
# 20 s a page): not part of make test. Lighthouse is installed into
# tools/lighthouse, apart from package.json; PATH... or LIGHTHOUSE_PAGES
# picks pages, LIGHTHOUSE_RUNS=k keeps each page's median of k runs.
lighthouse: build
	scripts/lighthouse

# A classroom under load: 300 students on loopback fetch the room's run's
# trace and follow the presenter stepping 10 times a second for 30 s; then
# 200 clients ask at once for 200 distinct heavy runs. Prints traces
# computed, delays, losses, busy answers, resident memory (cmd/loadgen).
loadtest: build
	$(GO) run ./cmd/loadgen -server bin/server
	$(GO) run ./cmd/loadgen -server bin/server -overload 200

fuzz:
	$(GO) test ./instrument -run XXX -fuzz FuzzDecode -fuzztime 60s
	$(GO) test ./kernels -run XXX -fuzz FuzzParseConfig -fuzztime 60s
	$(GO) test ./web -run XXX -fuzz FuzzStepperQuery -fuzztime 60s
	$(GO) test ./web -run XXX -fuzz FuzzPageQuery -fuzztime 60s

clean:
	rm -rf bin $(VENDOR) node_modules

# The static site: every page, the browser's files, the recordings and the
# WebAssembly that computes runs and grades in the browser, in site/ (or
# SITE=folder), served under SITE_BASE (/ by default; /flashstep/ for a
# project's GitHub Pages). Any static host serves it as it is:
# python3 -m http.server -d site. scripts/site says what it writes.
SITE ?= site
SITE_BASE ?= /
site: assets
	SITE_BASE=$(SITE_BASE) GO=$(GO) scripts/site $(SITE) $(SITE_BASE)
