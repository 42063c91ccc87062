"""A Keras classifier under TensorFlow's distribution strategies, run by scaletune from the
TF_CONFIG it sets for each task:

- MultiWorkerMirroredStrategy (the default, `distribution.strategy = "allreduce"`): every
  task is a worker that trains on its own ~1/N of the rows; gradients are all-reduced.
- ParameterServerStrategy (`strategy = "parameter_server"`, `parameter_servers = K`): the
  chief runs the training loop and dispatches steps to the workers, which read their part
  of the chief's rows (by path: one machine or a shared folder); variables live on the
  parameter servers. Workers and servers only serve, until scaletune ends them.

Keras 3 does not run these strategies (keras-team/keras#20585): this script uses tf_keras.
Outside scaletune, give it TF_CONFIG and SCALETUNE_CHANNEL_* yourself."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter
# tf.keras is tf_keras too, the Keras this script uses: TensorFlow then skips importing Keras 3
# (a third of its import time, in every task of every trial).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np
import tensorflow as tf
import tf_keras as keras

from scaletune.keras import ReportCallback, restore


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--batch_size", type=int, default=64, help="per worker")
    parser.add_argument("--hidden_units", type=int, default=128)
    parser.add_argument("--checkpoint_every", type=int, default=0, help="epochs; 0: never")
    return parser.parse_args()


def channel(name: str) -> tuple[Path, Path]:
    folder = Path(os.environ[f"SCALETUNE_CHANNEL_{name.upper()}"])
    return folder / "features.npy", folder / "labels.npy"


class ValidationAccuracy(keras.callbacks.Callback):
    """The validation channel's accuracy at each epoch's end, into the logs reported after
    it (computed where the model is: on the chief, or on each mirrored worker)."""

    def __init__(self, features: np.ndarray, labels: np.ndarray) -> None:
        super().__init__()
        self.features, self.labels = features, labels

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        logits = self.model(self.features, training=False)
        predicted = np.argmax(np.asarray(logits), axis=1)
        if logs is not None:
            logs["val_accuracy"] = float(np.mean(predicted == self.labels))


class EpochTimer(keras.callbacks.Callback):
    """Each epoch's time and steps on stdout (benchmarks read per-step time from it)."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps, self.started = steps, 0.0

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self.started = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        seconds = time.perf_counter() - self.started
        print(f"epoch {epoch + 1} took {seconds:.4f} s for {self.steps} steps", flush=True)


def serve(resolver: tf.distribute.cluster_resolver.ClusterResolver) -> None:
    """A worker or parameter server of ParameterServerStrategy: serve the chief."""
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol="grpc",
        start=True,
    )
    print(f"serving as {resolver.task_type} {resolver.task_id}", flush=True)
    server.join()


def npy_rows(path: Path, dtype: tf.DType, columns: int | None) -> tf.Tensor:
    """A .npy file read by TensorFlow ops, so that the task running them reads it (under
    ParameterServerStrategy, the workers run the chief's dataset_fn)."""
    offset = np.load(path, mmap_mode="r").offset  # the header's length
    raw = tf.io.read_file(str(path))
    values = tf.io.decode_raw(tf.strings.substr(raw, offset, -1), tf.float32)
    shaped = tf.reshape(values, [-1, columns]) if columns else values
    return tf.cast(shaped, dtype)


def main() -> None:
    args = arguments()
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    cluster = config.get("cluster", {})
    print(f"TF_CONFIG task {json.dumps(config.get('task'))} in {json.dumps(cluster)}", flush=True)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    parameter_servers = "ps" in cluster
    if parameter_servers and resolver.task_type in ("worker", "ps"):
        serve(resolver)
        return
    strategy = (
        tf.distribute.ParameterServerStrategy(resolver)
        if parameter_servers
        else tf.distribute.MultiWorkerMirroredStrategy()
    )
    workers = len(cluster.get("worker", [])) or 1
    train_features, train_labels = channel("train")
    features = np.load(train_features, mmap_mode="r")
    validation = [np.load(path) for path in channel("validation")]
    classes = int(max(np.max(np.load(train_labels)), np.max(validation[1]))) + 1
    total_rows = int(os.environ["SCALETUNE_CHANNEL_TRAIN_TOTAL_ROWS"])
    # An epoch sees every row once. Mirrored: each step takes a batch on every worker (and
    # every worker as many steps, as they wait on each other). Parameter servers: a step is
    # one batch on one worker, so the workers share the epoch's steps.
    rows_per_step = args.batch_size * (1 if parameter_servers else workers)
    steps_per_epoch = max(1, total_rows // rows_per_step)

    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((features.shape[1],)),
                keras.layers.Dense(args.hidden_units, activation="relu"),
                keras.layers.Dense(classes),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.SGD(args.learning_rate, momentum=args.momentum),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )

    if parameter_servers:

        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            rows = tf.data.Dataset.from_tensor_slices(
                (
                    npy_rows(train_features, tf.float32, features.shape[1]),
                    npy_rows(train_labels, tf.int32, None),
                )
            )
            part = rows.shard(context.num_input_pipelines, context.input_pipeline_id)
            return part.shuffle(10_000, seed=0).repeat().batch(args.batch_size).prefetch(2)

        data = keras.utils.experimental.DatasetCreator(dataset_fn)
    else:  # this worker's own rows (scaletune sharded them): no sharding by TensorFlow
        rows = tf.data.Dataset.from_tensor_slices(
            (np.asarray(features), np.load(train_labels).astype("int32"))
        )
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        data = rows.shuffle(10_000, seed=0).repeat().batch(args.batch_size).with_options(options)

    report = ReportCallback(checkpoint_every=args.checkpoint_every or None)
    model.fit(
        data,
        epochs=args.epochs,
        steps_per_epoch=steps_per_epoch,
        initial_epoch=restore(model),
        callbacks=[
            EpochTimer(steps_per_epoch),
            ValidationAccuracy(validation[0], validation[1].astype("int64")),
            report,
        ],
        verbose=0,
    )
    weights = b"".join(np.asarray(w).tobytes() for w in model.get_weights())
    print(f"weights sha256 {hashlib.sha256(weights).hexdigest()}", flush=True)
    # Each task writes to its own SCALETUNE_MODEL_DIR; scaletune publishes only rank 0's.
    model.save_weights(str(Path(os.environ.get("SCALETUNE_MODEL_DIR", ".")) / "model.weights.h5"))


if __name__ == "__main__":
    main()
