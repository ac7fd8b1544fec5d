# The two things people do with Shinken's source tree.
#   make demo   installs what is needed, builds, and runs Shinken's main job
#   make check  installs what is needed, builds, and runs every test
#   make bench  builds in release mode and runs every benchmark against its peer;
#               each says what it could not measure, and one that fails does
#               not stop the others (the status is 1 at the end)
.PHONY: all deps build demo check bench install clean

SHINKEN := build/release/src/cli/shinken

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	@[ -f build/release/build.ninja ] || meson setup build/release -Dbuildtype=release -Dtests=false >/dev/null
	@ninja -C build/release >/dev/null

# The policy `shinken run` asks comes from the environment or the installed
# copy, never from where the binary was built: the source tree's, here.
POLICY_DIR := $(CURDIR)/policies

demo: build
	@SHINKEN_POLICY_DIR=$${SHINKEN_POLICY_DIR:-$(POLICY_DIR)} sh scripts/demo.sh $(SHINKEN)

check: deps
	@sh scripts/check.sh

bench: build
	@failed=""; \
	for b in cedar run egress cap panel; do \
	  echo "== bench/$$b"; \
	  SHINKEN=$(CURDIR)/$(SHINKEN) SHINKEN_POLICY_DIR=$${SHINKEN_POLICY_DIR:-$(POLICY_DIR)} sh bench/$$b/run.sh $(CURDIR)/$(SHINKEN) || \
	    { echo "== bench/$$b did not finish (above)"; failed="$$failed $$b"; }; \
	done; \
	if [ -n "$$failed" ]; then echo "benchmarks that did not finish:$$failed"; exit 1; fi

install: build
	@meson install -C build/release

clean:
	rm -rf build
