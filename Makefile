# gpu-workbench: one entry point. Components live in their folders; each folder's objects
# become one archive, every binary is its folder's main.c linked against the archives.
#
#   make            build bin/gwb-server, bin/gwb-worker, bin/kubesim, bin/gwbctl, bin/gwb-load, bin/gwb-lab
#   make test       build and run every test (T=name runs the cases with a word of their name starting with it)
#   make check      banned-function check, -Werror + ASan/UBSan build, then the tests
#   make fuzz       libFuzzer drivers for the parsers of outside bytes, FUZZ_SECONDS each
#   make valgrind   unit tests and an integration subset under valgrind (no leak, no invalid access)
#   make test-faults  the fault suite's long forms under load, with a table of their figures
#   make test-props   the API's long property-based pass against docs/openapi.yaml
#   make bench      benchmarks (figures and an in-run baseline; never part of the tests)
#   make lab        the lab's experiments on a private stack, evidence in .runtime/evidence/
#   make demo       start the system locally (see README)
#   make deps       install the Debian packages (idempotent, as root)

CC       ?= cc
BUILD    ?= build
BIN      ?= bin
PKGS     := libevent hiredis libcurl msgpack sqlite3 jansson yaml-0.1 libcrypto
SAN      ?=
WERROR   ?=

CPPFLAGS += -D_GNU_SOURCE -I. -MMD -MP
# OPT is the optimisation level; CFLAGS given on the command line would replace every flag
# below (make's command-line variables win over +=), so builds choose OPT instead.
OPT      ?= -O2 -g
CFLAGS   += $(OPT) -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wvla -Wno-format-nonliteral -Wno-format-truncation -fno-omit-frame-pointer \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm
ifneq ($(SAN),)
CFLAGS   += -fsanitize=$(SAN) -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=$(SAN)
endif
ifneq ($(WERROR),)
CFLAGS   += -Werror
endif

# Components: each folder's objects (all but main.c) form one archive. A component links only
# the archives it depends on, so one folder's work in progress never breaks another's build.
COMPONENTS := lib config queue server server/api server/store server/recon server/kube worker \
              tools/kubesim tools/gwbctl tools/gwb-load tools/gwb-lab
DEPS_lib           := lib
DEPS_config        := config lib
DEPS_queue         := queue config lib
# The server's layers (api, recon, kube, store) call each other through narrow contexts, so
# their archives are linked as one group (see link_group).
SERVER_LAYERS      := server server/api server/recon server/kube server/store
DEPS_server        := $(SERVER_LAYERS) queue config lib
DEPS_worker        := worker lib
DEPS_tools/kubesim := tools/kubesim lib
DEPS_tools/gwbctl  := tools/gwbctl queue config lib
DEPS_tools/gwb-load := tools/gwb-load lib
DEPS_tools/gwb-lab := tools/gwb-lab lib

comp_srcs = $(filter-out $(1)/main.c,$(wildcard $(1)/*.c))
comp_lib  = $(BUILD)/lib$(subst /,-,$(1)).a
comp_libs = $(foreach d,$(DEPS_$(1)),$(call comp_lib,$(d)))
# Objects first, then every archive in one group: the server's layers refer to each other.
link_group = $(filter-out %.a,$(1)) -Wl,--start-group $(filter %.a,$(1)) -Wl,--end-group
ALL_SRCS := $(foreach c,$(COMPONENTS),$(wildcard $(c)/*.c))

# Each binary is built once its folder has a main.c.
BIN_MAINS := server:gwb-server worker:gwb-worker tools/kubesim:kubesim tools/gwbctl:gwbctl \
             tools/gwb-load:gwb-load tools/gwb-lab:gwb-lab
BINARIES  := $(foreach m,$(BIN_MAINS),$(if $(wildcard $(word 1,$(subst :, ,$(m)))/main.c),\
               $(BIN)/$(word 2,$(subst :, ,$(m)))))

# tests/unit/<component>/test_*.c link that component; integration and end-to-end tests drive
# the binaries and link only lib/ and the harness.
TEST_SRCS    := $(shell find tests -name 'test_*.c' 2>/dev/null | sort)
TEST_BINS    := $(patsubst tests/%.c,$(BIN)/tests/%,$(TEST_SRCS))
HARNESS_SRCS := $(wildcard tests/harness/*.c)
HARNESS_LIB  := $(BUILD)/libharness.a
BENCH_SRCS   := $(wildcard tests/bench/bench_*.c)
BENCH_BINS   := $(patsubst tests/%.c,$(BIN)/tests/%,$(BENCH_SRCS))
# Browser tests are Python (Debian's python3-selenium); they are installed as executables.
E2E_PY       := $(wildcard tests/e2e/test_*.py)
E2E_BINS     := $(patsubst tests/%.py,$(BIN)/tests/%,$(E2E_PY))
# Their shared modules (tests/e2e/gwb_*.py) are installed beside them, as modules.
E2E_BINS     += $(patsubst tests/%,$(BIN)/tests/%,$(wildcard tests/e2e/gwb_*.py))
# Shell end-to-end tests (the lab guide's commands) are installed with the repository's path.
E2E_SH       := $(wildcard tests/e2e/test_*.sh)
E2E_BINS     += $(patsubst tests/%.sh,$(BIN)/tests/%,$(E2E_SH))
test_comp     = $(firstword $(foreach c,$(COMPONENTS),$(if $(filter tests/unit/$(c)/%,$(1)),$(c))) lib)

.PHONY: all deps test test-faults test-props test-props-run check bench demo lab clean format lint fuzz valgrind
all: $(BINARIES) $(TEST_BINS) $(BENCH_BINS) $(E2E_BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

define archive_rule
$(call comp_lib,$(1)): $(patsubst %.c,$(BUILD)/%.o,$(call comp_srcs,$(1)))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach c,$(COMPONENTS),$(eval $(call archive_rule,$(c))))

# The page's assets (server/web/) become one generated C file in the server's archive: the
# binary serves them itself (server/api/api_web.c).
WEB_ASSETS := $(sort $(wildcard server/web/*.html server/web/*.css server/web/*.js))
WEB_GEN    := $(BUILD)/gen/web_assets.c
$(WEB_GEN): $(WEB_ASSETS) tools/web-embed.sh
	@mkdir -p $(dir $@)
	tools/web-embed.sh $@ $(WEB_ASSETS)
$(BUILD)/gen/web_assets.o: $(WEB_GEN)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(call comp_lib,server/api): $(BUILD)/gen/web_assets.o

# The API's OpenAPI document (docs/openapi.yaml) becomes JSON (served at /v1/openapi.json) and
# a generated C file of its bytes, in the server's archive and the test harness (which
# validates the tests' answers against it).
OPENAPI_GEN := $(BUILD)/gen/openapi_doc.c
$(OPENAPI_GEN): docs/openapi.yaml tools/openapi-json.py
	@mkdir -p $(dir $@)
	tools/openapi-json.py docs/openapi.yaml $(BUILD)/gen/openapi.json $@
$(BUILD)/gen/openapi_doc.o: $(OPENAPI_GEN)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(call comp_lib,server/api): $(BUILD)/gen/openapi_doc.o
$(HARNESS_LIB): $(BUILD)/gen/openapi_doc.o

$(HARNESS_LIB): $(patsubst %.c,$(BUILD)/%.o,$(HARNESS_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

define binary_rule
$(BIN)/$(2): $(BUILD)/$(1)/main.o $(call comp_libs,$(1))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$(call link_group,$$^) $$(LDLIBS)
endef
$(foreach m,$(BIN_MAINS),$(eval $(call binary_rule,$(word 1,$(subst :, ,$(m))),$(word 2,$(subst :, ,$(m))))))

define test_rule
$(patsubst tests/%.c,$(BIN)/tests/%,$(1)): $(patsubst %.c,$(BUILD)/%.o,$(1)) $(HARNESS_LIB) $(call comp_libs,$(call test_comp,$(1)))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$(call link_group,$$^) $$(LDLIBS)
endef
$(foreach t,$(TEST_SRCS) $(BENCH_SRCS),$(eval $(call test_rule,$(t))))

$(BIN)/tests/e2e/%: tests/e2e/%.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@

$(BIN)/tests/e2e/gwb_%.py: tests/e2e/gwb_%.py
	@mkdir -p $(dir $@)
	install -m 644 $< $@

$(BIN)/tests/e2e/%: tests/e2e/%.sh
	@mkdir -p $(dir $@)
	sed 's|@GWB_ROOT@|$(abspath .)|' $< >$@.tmp && chmod 755 $@.tmp && mv $@.tmp $@

# test, check and demo install missing packages first, then build in a fresh make so that
# pkg-config is asked after the install, not before.
test:
	@tools/deps.sh
	@$(MAKE) --no-print-directory all
	@GWB_BIN=$(abspath $(BIN)) tests/run.sh '$(T)'

# The sanitizer build lives apart from the normal one so both stay usable.
check: lint
	@tools/deps.sh
	$(MAKE) BUILD=build/check BIN=build/check/bin SAN=address,undefined WERROR=1 OPT='-O1 -g' all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  GWB_BIN=$(abspath build/check/bin) tests/run.sh '$(T)'

lint:
	@tools/check-banned.sh

bench: all
	@set -e; for b in $(BENCH_BINS); do echo "== $$b"; GWB_BIN=$(abspath $(BIN)) $$b; done

# The fault suite's long forms (the cases named faults_*; make test runs their short forms):
# each case's figures go to .runtime/faults/report.jsonl and into one table at the end.
FAULTS_REPORT := $(abspath .runtime/faults/report.jsonl)
test-faults:
	@tools/deps.sh
	@$(MAKE) --no-print-directory all
	@mkdir -p $(dir $(FAULTS_REPORT)) && rm -f $(FAULTS_REPORT)
	@GWB_FAULTS_LONG=1 GWB_FAULTS_REPORT=$(FAULTS_REPORT) GWB_BIN=$(abspath $(BIN)) \
	  tests/run.sh 'faults_$(T)'; rc=$$?; tools/faults-table.py $(FAULTS_REPORT); \
	  $(MAKE) --no-print-directory test-props-run || rc=1; exit $$rc

# The property-based pass over the API (tests/e2e/test_openapi.py, case props) in its long
# form: GWB_PROPS_COUNT requests (default 3000) generated from docs/openapi.yaml; make test
# runs a short one.
test-props:
	@tools/deps.sh
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-props-run
test-props-run:
	@GWB_PROPS_LONG=1 GWB_BIN=$(abspath $(BIN)) $(BIN)/tests/e2e/test_openapi props

# The unit tests and an integration subset with gwb-server under valgrind (memcheck).
valgrind:
	@tools/deps.sh
	@$(MAKE) --no-print-directory all
	@GWB_BIN=$(abspath $(BIN)) tools/valgrind.sh

# libFuzzer drivers for every parser of outside bytes (clang; FUZZ_SECONDS per driver).
fuzz:
	@tools/deps.sh
	@tools/fuzz.sh

demo:
	@tools/deps.sh
	@$(MAKE) --no-print-directory all
	@tools/demo.sh

# The lab's experiments in order on a private stack under .runtime/lab/; evidence, index and
# reports in .runtime/evidence/. LAB_ARGS passes flags (--only NAME, --expect ...).
lab:
	@tools/deps.sh
	@$(MAKE) --no-print-directory all
	@$(BIN)/gwb-lab $(LAB_ARGS)

deps:
	@tools/deps.sh

format:
	clang-format -i $(ALL_SRCS) $(shell find lib server config queue worker tools tests -name '*.h')

clean:
	rm -rf build bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
