"""Graded relevance between captions and images, and how far it agrees with people.

Pure Python, numpy and scipy (no Django). `proxies` names every caption–caption proxy
(`lexical`, `cider`, `rouge`, `neural`, `meteor` compute them), `images` turns a proxy into
image–caption relevance, `calibration` compares proxies with human ratings and fits the
calibrated combination (its features: `context`, `coverage`), `calibrated` keeps it as a
relevance source; the metrics on top are in `mitl.graded_metrics`. WordNet is read
offline by `wordnet`; `words` tags and lemmatises caption words with it. See
docs/relevance.md.
"""
