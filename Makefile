# The two things people do with Shinken's source tree.
#   make demo   installs what is needed, builds, and runs Shinken's main job
#   make check  installs what is needed, builds, and runs every test
.PHONY: all deps build demo check bench clean

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	@[ -f build/release/build.ninja ] || meson setup build/release -Dtests=false >/dev/null
	@ninja -C build/release >/dev/null

demo: build
	@sh scripts/demo.sh build/release/shinken

check: deps
	@sh scripts/check.sh

bench: build
	@sh bench/run-all.sh build/release/shinken

clean:
	rm -rf build
