"""Exact top-k retrieval in both directions from one annotator's similarity.

Image-to-text and text-to-image rankings come from the same `Annotator.similarity`, so a pair
has the same score whichever way it is retrieved, and ties are broken deterministically:
higher score first, then the lower target row. Pure Python: no Django import; torch is
imported only when a torch engine runs.

- `topk`: `TopK`, `topk_rows` (exact top-k of each row of a score matrix) and the chunked
  one-direction `retrieve_i2t` / `retrieve_t2i`;
- `both`: `retrieve_both`, both directions from one pass over blocks of the image x caption
  score matrix;
- `plan`: which image rows and caption columns one `retrieve_both` call scores;
- `engines`: how a block is scored (`Annotator.similarity`, or a torch matrix product for
  plain embeddings) and the engine interface; `threshold` ranks torch blocks on the CPU from
  bounds on each k-th score, `torch_topk` on CUDA with `torch.topk`.
"""
