"""Imports of datasets, object instances and positive sets, from the command line or the web.

One module per concern:

- `datasets`: a captions file with optional images, labels and instances becomes a dataset
  (`dataset_import_check`, then `dataset_import`; `dataset_import_tsv` for a local folder);
- `instances`: COCO object instances stored on a dataset's images (`instances_import`);
- `positives`: ECCV Caption or CxC SITS files become a positive set (`positives_import`
  chooses the format; `positives_import_eccv`, `positives_import_cxc`);
- `image_sources`: the image files, read from a folder, a zip or S3, each checked;
- `requests`: a web request's parameters and uploads, checked by field;
- `staging`: where a web request's uploads wait for their job, and their clean-up;
- `jobs`: a web request checked and staged at once, then run as a job with progress.

The file readers (captions, positives, instances) are Django-free, in `mitl/formats/`.
Queueing a job is the task module's (`annotation.tasks.import_job_submit`).
"""
