"""Fashion-MNIST from its four IDX files (gzip'd or plain) as torch tensors."""
import gzip
import os
import struct

import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


class DataError(Exception):
    """A missing or malformed data file; the message names the file and the problem."""


def read_idx(path):
    """Returns the IDX file at ``path`` (or ``path``.gz) as a uint8 tensor of its shape."""
    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            break
    else:
        raise DataError(f"{path}[.gz]: no such file (Debian: apt-get install dataset-fashion-mnist, "
                        "or pass --data-dir)")
    opener = gzip.open if candidate.endswith(".gz") else open
    try:
        with opener(candidate, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{candidate}: cannot read: {e}") from e
    if len(data) < 4:
        raise DataError(f"{candidate}: {len(data)} bytes, shorter than an IDX header")
    zero, dtype, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08 or not 1 <= dims <= 3:
        raise DataError(f"{candidate}: not an IDX file of unsigned bytes (magic {data[:4].hex()}, "
                        "expected 000008 followed by 01-03)")
    header = 4 + 4 * dims
    shape = struct.unpack(f">{dims}I", data[4:header])
    count = 1
    for d in shape:
        count *= d
    if len(data) - header != count:
        raise DataError(f"{candidate}: shape {list(shape)} needs {count} bytes of data, the file "
                        f"has {len(data) - header}")
    return torch.frombuffer(bytearray(data[header:]), dtype=torch.uint8).reshape(shape)


def load(split, data_dir=DEFAULT_DIR, limit=None):
    """(images float32 [N, 1, 28, 28] normalised, labels int64 [N]) of "train" or "test"."""
    image_file, label_file = FILES[split]
    images = read_idx(os.path.join(data_dir, image_file))
    labels = read_idx(os.path.join(data_dir, label_file))
    if images.dim() != 3 or images.shape[1:] != (28, 28):
        raise DataError(f"{image_file}: shape {list(images.shape)}, expected [N, 28, 28]")
    if labels.dim() != 1 or labels.shape[0] != images.shape[0]:
        raise DataError(f"{label_file}: {list(labels.shape)} labels for {images.shape[0]} images")
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    # Fashion-MNIST's training-set mean and standard deviation.
    x = (images.float() / 255.0 - 0.2860) / 0.3530
    return x.unsqueeze(1).contiguous(), labels.long()
