from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from mitl.synthetic.files import write
from mitl.synthetic.generation import generate


def demo_dataset_dir(n_images: int, seed: int) -> Path:
    """Return the folder the demo writes the synthetic dataset of this size and seed to."""
    return Path(settings.VAR_DIR) / "synthetic" / f"synthetic-{n_images}-s{seed}"


def default_model_dir(n_images: int, seed: int) -> Path:
    """Return where the demo's CLIP model is trained to unless --out says otherwise."""
    return Path(settings.VAR_DIR) / "models" / f"clip-synthetic-{n_images}-s{seed}"


class Command(BaseCommand):
    help = (
        "Train a tiny open_clip model on the synthetic demo dataset, on the CPU, so the "
        "`open_clip` annotator has real weights without downloading any. The dataset "
        "(captions.tsv and images/) is written to VAR_DIR/synthetic/synthetic-<images>-s<seed> "
        "first when it is not there yet, the folder `manage.py demo` uses. The model is "
        "trained into VAR_DIR/models/clip-synthetic-<images>-s<seed> "
        "(or --out; `manage.py demo` uses that folder): model_config.json, checkpoint.pt "
        "and training.json. When checkpoint.pt already exists training is skipped unless "
        "--force. Prints the checkpoint path, the final loss, the caption-to-image recall@5 "
        "on the training images, and the annotator config to register it with: "
        "python manage.py annotator_create NAME --kind open_clip --config '<json>'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--images", type=int, default=300, help="synthetic images to train on (default 300)"
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="dataset and training seed (default 0)"
        )
        parser.add_argument(
            "--epochs",
            type=int,
            default=None,
            help="passes over every caption (default: mitl.clip_training.DEFAULT_EPOCHS)",
        )
        parser.add_argument(
            "--out",
            type=Path,
            default=None,
            help="output folder (default VAR_DIR/models/clip-synthetic-<images>-s<seed>)",
        )
        parser.add_argument(
            "--force", action="store_true", help="train again even if a checkpoint exists"
        )

    def handle(self, *args: object, **options: object) -> None:
        # Imported here so `manage.py help` and other commands do not load torch.
        from mitl import clip_training

        n_images, seed = int(options["images"]), int(options["seed"])
        epochs = options["epochs"] or clip_training.DEFAULT_EPOCHS
        if n_images < 2 or epochs < 1:
            raise CommandError("--images must be at least 2 and --epochs at least 1")
        out_dir = Path(options["out"] or default_model_dir(n_images, seed)).resolve()
        checkpoint = out_dir / clip_training.CHECKPOINT_FILE
        if checkpoint.is_file() and not options["force"]:
            self.stdout.write(
                f"Checkpoint {checkpoint} exists; training skipped (--force redoes it)"
            )
            report = clip_training.read_training_report(out_dir)
            model_name = str(report.get("model_name", clip_training.TINY_MODEL_NAME))
            self._summary(report, clip_training.trained_model_config(out_dir, model_name))
            return
        dataset_dir = self._dataset(n_images, seed)
        with tqdm(desc="training", unit="step", dynamic_ncols=True) as bar:

            def on_step(step: int, total: int) -> None:
                bar.total = total
                bar.update(step - bar.n)

            try:
                trained = clip_training.train_tiny_clip(
                    dataset_dir / "captions.tsv",
                    dataset_dir / "images",
                    out_dir,
                    epochs=epochs,
                    seed=seed,
                    progress=on_step,
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(f"Trained {trained.epochs} epochs in {trained.seconds:.1f} s")
        self._summary(clip_training.read_training_report(out_dir), trained.annotator_config())

    def _dataset(self, n_images: int, seed: int) -> Path:
        """Return the dataset folder, writing the synthetic dataset first if it is missing."""
        folder = demo_dataset_dir(n_images, seed)
        if (folder / "captions.tsv").is_file() and (folder / "images").is_dir():
            return folder
        self.stdout.write(f"Writing the synthetic dataset to {folder}")
        dataset = generate(n_images=n_images, seed=seed)
        with tqdm(total=n_images, desc="images", unit="img", dynamic_ncols=True) as bar:
            write(dataset, folder, progress=lambda done, _total: bar.update(1))
        return folder

    def _summary(self, report: dict, config: dict[str, str]) -> None:
        out = self.stdout
        out.write(f"Checkpoint   {config['checkpoint']}")
        if "final_loss" in report:
            out.write(f"Final loss   {report['final_loss']:.4f}")
        if "recall_at_5" in report:
            out.write(
                f"Recall@5     {report['recall_at_5']:.3f} (caption → image on the "
                f"{report.get('images', '?')} training images; chance "
                f"{5 / max(1, int(report.get('images', 0) or 1)):.3f})"
            )
        out.write("Register it as an annotator:")
        out.write(
            "  python manage.py annotator_create clip-tiny --kind open_clip "
            f"--config '{json.dumps(config)}'"
        )
