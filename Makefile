# paynotify: PGXS build.  `make`, `make install`, `make installcheck`;
# the whole suite (as root on Debian 12) is `test/run-all.sh`.

EXTENSION = paynotify
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = paynotify
OBJS = \
	src/paynotify.o \
	src/gateway.o \
	src/keys.o \
	src/json.o \
	src/settings.o \
	src/crypto.o \
	src/config.o \
	src/plans.o \
	src/secrets.o \
	src/lock.o \
	src/log.o \
	src/probe.o \
	src/notice.o \
	src/subxact.o \
	src/security.o \
	src/authors.o \
	src/state.o \
	src/ledger.o \
	src/event.o \
	src/apply.o \
	src/step.o \
	src/commit.o \
	src/handle.o \
	src/insert.o \
	src/query.o \
	src/billfetch.o \
	src/verify_wxpay.o \
	src/verify_alipay.o \
	src/verify_stripe.o \
	src/parse/form.o \
	src/parse/stripe_sig.o \
	src/parse/scan.o \
	src/parse/fields.o \
	src/parse/bill.o \
	src/bill.o \
	src/history.o \
	src/ops.o

DATA = paynotify--1.0.sql paynotify--1.0--1.1.sql paynotify--1.1--1.2.sql paynotify--1.2--1.3.sql paynotify--1.3--1.4.sql
DATA_built = paynotify--1.1.sql paynotify--1.2.sql paynotify--1.3.sql paynotify--1.4.sql
PGFILEDESC = "paynotify - exactly-once payment notifications"

PG_CPPFLAGS = -Isrc -Isrc/parse $(shell pkg-config --cflags openssl libarchive) -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
SHLIB_LINK = $(shell pkg-config --libs openssl libarchive)

REGRESS = setup config crypto state vectors samples pipeline hooks alipay stripe security states txn secrets privileges attacks types order_ref retry_commit table_code table_authors accounts catalog roles keys ledger relay ops notice distribute expect query bills bill_fetch agreements bounds fastpaths
REGRESS_OPTS = --temp-instance=tmp_check --temp-config=test/paynotify.conf

ISOLATION = fixture concurrent_delivery failed_then_retry lock_timeout row_lock two_notices_one_order illegal_transition refund_race stripe_concurrent notify_on_commit outbox_claim ledger_race batch_deadlock trade_two_orders relay_claim relay_lease purge_concurrent log_taken owner_race query_race agreement_race key_retyped key_recollated probe_squat
ISOLATION_OPTS = --inputdir=test --temp-instance=tmp_check_iso --temp-config=test/paynotify.conf

EXTRA_CLEAN = tmp_check tmp_check_iso output_iso results regression.diffs regression.out

# The expected files were made in C.UTF-8: the temporary instances take
# their collation and encoding from the environment, so pin them (a
# machine with another LANG, or none, would sort and encode otherwise).
# PN_TEST_LOCALE for a system that names that locale otherwise.
PN_TEST_LOCALE ?= C.UTF-8
installcheck check: export LANG := $(PN_TEST_LOCALE)
installcheck check: export LC_COLLATE := $(PN_TEST_LOCALE)
installcheck check: export LC_CTYPE := $(PN_TEST_LOCALE)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

paynotify--1.1.sql: paynotify--1.0.sql paynotify--1.0--1.1.sql
	cat $^ > $@

paynotify--1.2.sql: paynotify--1.0.sql paynotify--1.0--1.1.sql paynotify--1.1--1.2.sql
	cat $^ > $@

paynotify--1.3.sql: paynotify--1.0.sql paynotify--1.0--1.1.sql paynotify--1.1--1.2.sql paynotify--1.2--1.3.sql
	cat $^ > $@

paynotify--1.4.sql: paynotify--1.0.sql paynotify--1.0--1.1.sql paynotify--1.1--1.2.sql paynotify--1.2--1.3.sql paynotify--1.3--1.4.sql
	cat $^ > $@

# `make install` over the files of the Debian package postgresql-15-paynotify
# replaces them without a word from dpkg, and the package's next upgrade
# overwrites them and its removal deletes them: say so, on one line of
# stderr.  (The package's preinst says it the other way round.)  Not for a
# staged install (DESTDIR, as the package build does).
install: warn-if-packaged
warn-if-packaged:
	@if [ -z '$(DESTDIR)' ] && command -v dpkg-query >/dev/null 2>&1; then \
		for f in '$(datadir)/$(datamoduledir)/$(EXTENSION).control' '$(pkglibdir)/$(MODULE_big)$(DLSUFFIX)'; do \
			pkg=$$(dpkg-query -S "$$f" 2>/dev/null | sed -n '1s/: .*//p'); \
			if [ -n "$$pkg" ]; then \
				echo "make install: replacing $$f and the other files of the Debian package $$pkg, whose next upgrade overwrites them and whose removal deletes them; to use this build, apt-get remove $$pkg and make install again" >&2; \
				break; \
			fi; \
		done; \
	fi

# every object is rebuilt when a shared header changes
$(OBJS): $(wildcard src/*.h src/parse/*.h)

.PHONY: shim dist warn-if-packaged
shim:
	$(MAKE) -C shim

dist:
	git archive --format=tar.gz --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(EXTENSION)-$(EXTVERSION).tar.gz HEAD
