"""A deterministic synthetic image-caption dataset whose truth is known for every pair.

Each image is a scene of one to three groups of identical coloured shapes, drawn with Pillow.
Five captions per image describe the scene at varying detail, the way COCO annotators do:
some name every group with count, colour and position, others only the main group or only
the shapes. Loose captions ("A picture of red circles.") truly fit many other images, so a
retrieval benchmark built from the original one-image-per-caption links has many false
negatives for the platform to find. About 5% of captions are deliberately noisy: they get
one detail wrong for their own image, like real annotation errors.

Pure Python: no Django import. Everything is deterministic from
(n_images, seed, captions_per_image), down to the PNG bytes.

Modules
    scenes.py      the vocabulary and the data: ObjectGroup, Scene, Phrase, CaptionSpec,
                   SyntheticDataset
    generation.py  `generate`: seeded scenes and the captions annotators would write
    captions.py    how a caption's phrases are worded
    truth.py       the truth rule: `judge` one pair, `truth_matrix` for every pair
    images.py      `render` a scene with Pillow
    meta.py        `synthetic_meta`, the parameters synthetic.json records, and `regenerate`
                   the dataset from them
    files.py       `write` captions.tsv, labels.json, synthetic.json and images/
"""
