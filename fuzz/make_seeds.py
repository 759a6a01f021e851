#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/), in the input layout each
<target>_fuzz.cc documents. Run again after a format changes; the output is deterministic."""
import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def config_seeds():
    # Byte = index in config_variables() (runtime/config_fields.cc); 27 = an unknown name.
    write("config", "defaults", b"\x00arctopk\n\x01" + b"0.01\n\x02" + b"4\n\x03none")
    write("config", "ef21m", b"\x03ef21m\n\x04" + b"0.1\n\x05" + b"100\n\x07" + b"42")
    write("config", "numbers", b"\x08" + b"1048576\n\x09" + b"2.5\n\x0a" + b"0\n\x0c" + b"30\n\x0d" + b"0")
    write("config", "choices", b"\x0edebug\n\x0fring\n\x10row\n\x11zero\n\x12" + b"1\n\x15" + b"0")
    write("config", "wait", b"\x13" + b"64\n\x14" + b"32\n\x16" + b"2\n\x17mpi\n\x18yield\n\x19" + b"200\n\x1a" + b"0")
    write("config", "bad", b"\x01" + b"1.5\n\x1b" + b"x")


def words(*args):
    return b"\0".join(a.encode() for a in args)


def arcrun_seeds():
    write("arcrun", "simple", words("-np", "4", "./train", "--epochs", "3"))
    write("arcrun", "hosts", words("-np", "4", "-H", "a:2,b:2", "--oversubscribe", "--", "./t"))
    write("arcrun", "flags", words("-n", "2", "--compress-ratio", "0.01", "--sketch-rank", "8",
                                   "--fusion-threshold-mb", "64", "--seed", "7", "./t"))
    write("arcrun", "mpi", words("-np", "2", "--mpi-args", "--mca btl tcp,self 'a b'", "-x",
                                 "FOO=bar", "--mpi-flavor", "mpich", "--ssh-port", "2222",
                                 "--network-interface", "eth0", "--dry-run", "./t"))
    write("arcrun", "help", words("--help"))


def hostfile_seeds():
    write("hostfile", "file", b"\x00# cluster\nnode1 slots=2\nnode2\n\nnode1 slots=1  # again\n")
    write("hostfile", "list", b"\x01a:2,b:4,c")
    write("hostfile", "bad", b"\x00node1 slots=0\n")


def vec(fmt, values):
    return struct.pack("<Q", len(values)) + b"".join(struct.pack("<" + fmt, v) for v in values)


def text(s):
    return struct.pack("<Q", len(s)) + s.encode()


def state_seeds():
    # StateStore::save's layout (compressors/tensor_state.cc); first byte 0: the target appends
    # the checksum.
    def tensor(name, n, ef):
        body = text(name) + struct.pack("<QQQB", n, 5, 3, 1 if ef else 0)
        body += vec("f", [0.5] * n if ef else [])  # e
        body += vec("f", [])  # h
        body += vec("f", [])  # hbar
        body += vec("f", [])  # v
        body += struct.pack("<Q", 1) + text("oktopk.residual") + vec("f", [1.0, 2.0])
        body += struct.pack("<Q", 1) + text("oktopk.bounds") + vec("q", [0, 4])
        body += struct.pack("<Q", 1) + text("oktopk.threshold") + vec("d", [0.25])
        return body

    header = b"ARCSTATE" + struct.pack("<Iii", 2, 0, 1)
    write("state", "two_tensors", b"\x00" + header + struct.pack("<Q", 2) + tensor("a", 4, True)
          + tensor("b.weight", 3, False))
    write("state", "empty", b"\x00" + header + struct.pack("<Q", 0))
    v1 = b"ARCSTATE" + struct.pack("<Iii", 1, 1, 2) + struct.pack("<Q", 1)
    v1 += text("w") + struct.pack("<QQQB", 2, 1, 1, 1) + vec("f", []) + vec("f", [1, 2]) \
        + vec("f", [3, 4]) + vec("f", [])
    write("state", "version1", b"\x00" + v1)


def signature(dtype, shape, comp="arctopk", ratio=0.01, ef="none", gran="", coll=0, root=0):
    s = struct.pack("<i", dtype) + struct.pack("<Q", len(shape))
    s += b"".join(struct.pack("<q", d) for d in shape)
    s += struct.pack("<ii", 0, 1) + text(comp) + struct.pack("<d", ratio) + text(ef) + text(gran)
    return s + struct.pack("<ii", coll, root)


def message_seeds():
    req = struct.pack("<Q", 3)
    req += text("layer.0.weight") + signature(0, [3, 4]) + struct.pack("<d", 1.5)
    req += text("layer.0.weight") + signature(0, [4, 4]) + struct.pack("<d", 0.0)
    req += text("emb") + signature(3, [7], "topk", 0.1, "ef21", "row", 1, 2) + struct.pack("<d", 0.25)
    write("message", "requests", b"\x00" + req)
    resp = struct.pack("<Q", 2)
    resp += text("a") + struct.pack("<i", 0) + text("") + signature(0, [3, 0, 7])
    resp += text("b") + struct.pack("<i", 2) + text("tensor 'b' differs") + signature(0, [])
    write("message", "responses", b"\x01" + resp + text(""))
    write("message", "abort", b"\x01" + struct.pack("<Q", 0) + text("stalled: 'x' missing from rank 1"))


def idx_seeds():
    labels = struct.pack(">II", 0x801, 5) + bytes([0, 1, 2, 9, 4])
    images = struct.pack(">IIII", 0x803, 2, 3, 2) + bytes(range(12))
    write("idx", "labels", b"\x00" + labels)
    write("idx", "images", b"\x01" + images)
    write("idx", "labels_gz", b"\x00" + gzip.compress(labels, mtime=0))
    write("idx", "images_gz", b"\x01" + gzip.compress(images, mtime=0))


if __name__ == "__main__":
    config_seeds()
    arcrun_seeds()
    hostfile_seeds()
    state_seeds()
    message_seeds()
    idx_seeds()
