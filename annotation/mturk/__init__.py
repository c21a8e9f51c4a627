"""Amazon Mechanical Turk: one module per concern (docs/mturk.md).

Pure, without Django or boto3: `errors`, `protocol` (endpoints, ids, tokens, the
ExternalQuestion and URL checks), `hit_type` (HIT type settings and their request),
`feedback` (what a rejected worker reads) and `offline_csv` (the offline path's files).
At the ORM edge: `client` (boto3 calls, retried), `state` (Batch.mturk), `links` (signed
URLs), `hit_settings` (a batch's settings and cost), `publish`, `sandbox` (reset),
`hit_page`, `confirmation`, `sync` with `sync_assignments`, `repost` and `sync_report`,
`payments`, `offline` with `layout` (a Django template, no database), and `selectors`.

Nothing is re-exported here: import from the module that holds the name.
"""
