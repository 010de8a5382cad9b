# Shortcuts for the scripts; everything real is in scripts/ (docs/fuzzing.md).
FUZZ_SECONDS ?= 600

.PHONY: test asan fuzz fuzz-regression

# The whole suite as CI runs it (with ASan/UBSan and the fuzz regression);
# `make test TELLER_TEST_QUICK=1` leaves those two out.
test:
	TELLER_TEST_QUICK=$(TELLER_TEST_QUICK) bash scripts/test.sh

# ASan + UBSan build (preset `asan`, build-asan/) and the unit and golden tests under it.
asan:
	bash scripts/asan.sh

# Every libFuzzer target for FUZZ_SECONDS each (default 10 minutes), one per core at a time.
fuzz:
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

# Every target for 30 seconds: the short regression check.
fuzz-regression:
	bash scripts/fuzz.sh 5
