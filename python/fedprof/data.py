"""Data sets from NumPy arrays or torch Datasets, held in memory by the
engine (data.name = memory) and shared by the clients without copies."""

import numpy as np

from . import _fedprof

__all__ = ["Dataset"]


def _inputs(x, what):
    x = np.asarray(x)
    if x.dtype == np.uint8:
        # As the IDX reader scales pixel bytes: exactly byte / 255 in float32.
        x = x.astype(np.float32) / np.float32(255)
    elif x.dtype.kind not in "fiu" or x.dtype.kind == "f" and x.dtype.itemsize > 8:
        raise TypeError(f"{what}: expected numbers, got {x.dtype}")
    x = np.array(x, dtype=np.float32, order="C")  # the one copy: the engine shares it
    if x.ndim == 3:  # [n, height, width]: one channel
        x = x.reshape(x.shape[0], 1, x.shape[1], x.shape[2])
    if x.ndim not in (2, 4):
        raise ValueError(f"{what}: expected [n, features], [n, height, width] or [n, channels, height, width], "
                         f"got shape {x.shape}")
    return x


def _targets(y, classification, what):
    y = np.asarray(y)
    if classification:
        if y.dtype.kind not in "iu":
            raise TypeError(f"{what}: class labels must be integers, got {y.dtype}")
        return np.array(y.reshape(-1), dtype=np.int64)
    y = np.array(y, dtype=np.float32, order="C")
    return y.reshape(y.shape[0], -1)


def _materialise(dataset, what):
    """A torch.utils.data.Dataset's samples stacked into (x, y) arrays."""
    xs, ys = [], []
    for i in range(len(dataset)):
        x, y = dataset[i]
        xs.append(x.numpy() if hasattr(x, "numpy") else np.asarray(x))
        ys.append(y.numpy() if hasattr(y, "numpy") else np.asarray(y))
    if not xs:
        raise ValueError(f"{what}: the dataset is empty")
    return np.stack(xs), np.stack(ys)


class Dataset:
    """A training and a test set from arrays, for fedprof.simulate(data=...).

    train, test  (x, y) pairs of arrays, or torch.utils.data.Dataset objects
                 (materialised once: every sample stacked)
    x            uint8 images are scaled to [0, 1] as the IDX reader does
                 (byte / 255); other numbers are taken as float32.
                 [n, features] is tabular, [n, h, w] one-channel images,
                 [n, c, h, w] images.
    y            integer class labels [n], or float regression targets
                 ([n] or [n, targets]) when num_classes is 0
    num_classes  default: max label + 1 for integer labels, else 0
    partition    optional: for each client, the rows of the training set it
                 holds (a natural partition, e.g. one client per writer);
                 runs take it with partition.kind = "given" (set for you
                 when the run does not name another kind)

    The arrays are copied once, into read-only arrays the engine shares
    (train_x, train_y, test_x, test_y); clients take their rows from them. Its key, the digest of
    the contents, goes into the run's config.toml, so a run names the data
    it ran on and resumes only on the same (pass it to fedprof.resume).
    """

    def __init__(self, train, test, num_classes=None, partition=None):
        train_x, train_y = _materialise(train, "train") if hasattr(train, "__getitem__") and not isinstance(
            train, (tuple, list)) else train
        test_x, test_y = _materialise(test, "test") if hasattr(test, "__getitem__") and not isinstance(
            test, (tuple, list)) else test
        train_y, test_y = np.asarray(train_y), np.asarray(test_y)
        classification = train_y.dtype.kind in "iu" if num_classes is None else num_classes > 0
        if num_classes is None:
            num_classes = int(max(train_y.max(), test_y.max())) + 1 if classification else 0
        self.train_x = _inputs(train_x, "train x")
        self.test_x = _inputs(test_x, "test x")
        self.train_y = _targets(train_y, classification, "train y")
        self.test_y = _targets(test_y, classification, "test y")
        self.num_classes = int(num_classes)
        self.partition = None
        if partition is not None:
            self.partition = [np.asarray(rows, dtype=np.int64).reshape(-1).tolist() for rows in partition]
        for a in (self.train_x, self.train_y, self.test_x, self.test_y):
            a.flags.writeable = False  # the engine holds these very values under the data's key
        self._handle = _fedprof.register_data(self.train_x, self.train_y, self.test_x, self.test_y,
                                              self.num_classes, self.partition or [], "fedprof.Dataset")

    @property
    def key(self):
        """The engine's key for this data (data.memory_key)."""
        return self._handle.key

    def _assignments(self):
        out = ["data.name=memory", f"data.memory_key={self.key}"]
        return out

    def __repr__(self):
        return (f"Dataset({len(self.train_x)} training and {len(self.test_x)} test samples of shape "
                f"{self.train_x.shape[1:]}, {self.num_classes} classes"
                + (f", {len(self.partition)} clients given" if self.partition else "") + ")")
