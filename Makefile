# flashstep. `make run` starts the app, `make test` runs every test; both set
# up what they need first.

GO      ?= go
ADDR    ?= localhost:8080
VENDOR  := static/vendor

.PHONY: run build test check generate check-generated assets tools bench fuzz clean

run: build
	./bin/server -addr $(ADDR)

build: assets
	$(GO) build -o bin/server ./cmd/server

# Browser libraries come from npm (package.json) and are copied into
# static/vendor, which the server embeds. Never committed.
assets: $(VENDOR)/.stamp

$(VENDOR)/.stamp: package.json package-lock.json
	scripts/need npm
	npm ci --no-audit --no-fund --loglevel=error
	rm -rf $(VENDOR)
	mkdir -p $(VENDOR)/katex $(VENDOR)/d3
	cp -r node_modules/katex/dist/katex.min.js node_modules/katex/dist/katex.min.css node_modules/katex/dist/fonts $(VENDOR)/katex/
	cp node_modules/d3-color/dist/d3-color.min.js node_modules/d3-interpolate/dist/d3-interpolate.min.js \
	   node_modules/d3-scale-chromatic/dist/d3-scale-chromatic.min.js $(VENDOR)/d3/
	touch $@

test: assets check-generated
	scripts/need chromium
	$(GO) vet ./...
	$(GO) test ./...

# Regenerate the templ components and the trace ABI files (kernels/trace_abi.h,
# static/js/trace_abi.js) from their sources.
generate:
	$(GO) tool templ generate
	$(GO) test ./instrument -run TestGeneratedABI -update

# Fails when a generated file is stale: templ output, the trace ABI files.
check-generated:
	$(GO) tool templ generate
	@git diff --exit-code -- templates || { echo "templ output was stale: regenerated, commit it"; exit 1; }
	$(GO) test ./instrument -run TestGeneratedABI

bench: assets
	$(GO) test ./kernels ./web -run XXX -bench . -benchtime 20x

fuzz:
	$(GO) test ./instrument -run XXX -fuzz FuzzDecode -fuzztime 60s
	$(GO) test ./kernels -run XXX -fuzz FuzzParseConfig -fuzztime 60s
	$(GO) test ./web -run XXX -fuzz FuzzStepperQuery -fuzztime 60s

clean:
	rm -rf bin $(VENDOR) node_modules
