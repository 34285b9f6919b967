#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Small, valid (and a few nearly valid) inputs in each target's input format
(see the comment at the top of each fuzz/<target>.cc), made from scratch:
no third-party data. Deterministic; run it again after changing a format.
Findings that `make fuzz` turned up are kept beside these as
fuzz/corpus/<target>/regress-*, and are never written by this script.
"""

import gzip
import hashlib
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# The fixed key of fuzz/fuzz_key.h.
P = 11622412093331272307270950536558647285852019537494176736908119445275203080952376147517631544546667490588923481953287567537136886555637453054969981458985457
Q = 13351328751283432155579080874869494117433657673543645402781287399835550178119021882355245263661479187934052525839686458197203120859633787209035985562595209
N = P * Q
N2 = N * N


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)


def idx_pair(n, rows, cols, labels):
    images = struct.pack(">IIII", 0x803, n, rows, cols) + bytes(
        (i * 37) % 256 for i in range(n * rows * cols))
    lab = struct.pack(">II", 0x801, n) + bytes(labels)
    return images, lab


def idx_input(num_classes, images, labels):
    return bytes([num_classes]) + struct.pack("<I", len(images)) + images + labels


def idx():
    images, labels = idx_pair(2, 3, 3, [0, 1])
    write("fuzz_idx", "two-3x3", idx_input(0, images, labels))
    write("fuzz_idx", "two-3x3-classes", idx_input(10, images, labels))
    write("fuzz_idx", "gzipped", idx_input(0, gz(images), gz(labels)))
    images, labels = idx_pair(3, 2, 4, [9, 2, 5])
    write("fuzz_idx", "three-2x4", idx_input(0, images, labels))
    write("fuzz_idx", "truncated", idx_input(0, images[:-3], labels))


def cifar():
    def record(label, seed):
        return bytes([label]) + bytes((seed + i * 7) % 256 for i in range(3072))
    one = record(3, 1)
    write("fuzz_cifar", "one-record", one)
    write("fuzz_cifar", "two-files", one + b"\n--next-file--\n" + record(9, 5))
    write("fuzz_cifar", "gzipped", gz(one + record(0, 2)))
    write("fuzz_cifar", "bad-label", record(10, 3))


def csv():
    write("fuzz_csv", "classification", "c:label\nx,y,label\n1,2.5,0\n-3,4e-2,1\n0.5,\"6\",2\n")
    write("fuzz_csv", "regression", "r:t1,t2\na, b ,t1,t2\r\n1,2,3,4\r\n5,6,7,8.5\r\n")
    write("fuzz_csv", "quoted", "r:y\n\"a\"\"b\",y\n\"1\", 2\n\n+3,-4\n")
    write("fuzz_csv", "gzipped", b"c:y\n" + gz(b"\xef\xbb\xbfx,y\n1,1\n2,0\n"))


def availability():
    write("fuzz_availability", "trace", "# online intervals\nclient,start,end\n0,0,3600\n0,1800,7200\n63,5,6.5\n")
    write("fuzz_availability", "crlf", "client,start,end\r\n\r\n1,1e3,2e3\r\n1,2e3,3e3\r\n")


def config():
    write("fuzz_config", "default", "rounds = 3\nseed = 7\n")
    write("fuzz_config", "sections", """
[data]
name = "csv"
train_file = "t.csv"
targets = "y"
[strategy]
name = "fedprof"
fraction = 0.25
[fedprof]
alpha = 1e-3
[report]
progress = false
""")
    write("fuzz_config", "set-lines", "threads = 2\n#set model.hidden=32,16\n#set train.lr=0.5\n")
    write("fuzz_config", "free-text", 'data.dir = "some \\"dir\\" \\t"\nmodel.hidden = "8"\n')
    write("fuzz_config", "inline", "data = { name = \"mnist\", holdout_share = 0.1 }\n")


def profile():
    p = {"version": 3, "layer": "fc1", "mean": [0.5, -1.25, 0], "var": [1, 0.25, 1e-8]}
    q = {"version": 3, "layer": "fc1", "mean": [0.4, -1, 0.1], "var": [2, 0.5, 1e-3]}
    write("fuzz_profile_json", "one", json.dumps(p))
    write("fuzz_profile_json", "pair", json.dumps(p) + "\n\0\n" + json.dumps(q))
    write("fuzz_profile_json", "extremes", json.dumps(
        {"version": 0, "layer": "", "mean": [1e300, -1e300], "var": [1e-300, 1e300]}))


def checkpoint_file(round_, params, fingerprint="ab" * 32, training_models=()):
    history = []
    for r in range(1, round_ + 1):
        history.append({"round": r, "lr": 0.01, "selected": 2, "returned": 2, "refused": 0,
                        "timed_out": 0, "train_loss": 1.5, "evaluated": True,
                        "accuracy": 0.5, "loss": "nan", "rmse": 0, "round_time_s": 1,
                        "virtual_time_s": r, "round_energy_wh": 0.1,
                        "profiling_time_s": 0, "profiling_energy_wh": 0,
                        "energy_wh": 0.1 * r, "wall_s": 0.5 * r})
    header = {"round": round_, "num_params": len(params), "times_selected": [1, 0, 2],
              "virtual_time_s": 2.5, "energy_j": "inf", "strategy_state": "{}",
              "client_states": "", "config_fingerprint": fingerprint, "history": history}
    models = struct.pack("<%df" % len(params), *params)
    if training_models:
        # An asynchronous run's: clients in training, and the older models they train on.
        header["dispatches"] = 5
        header["training"] = [[0, 1, 4, 1.5], [2, 2, 5, 2.0]]
        header["training_models"] = [1]
        for model in training_models:
            models += struct.pack("<%df" % len(model), *model)
    body = (b"FEDPROF-CHECKPOINT 2\n" + json.dumps(header, separators=(",", ":")).encode() +
            b"\n" + models)
    return body


def checkpoint():
    body = checkpoint_file(2, [0.5, -1, 2])
    # Flag 1: the target appends the checksum; flag 0: the whole file.
    write("fuzz_checkpoint", "sealed", b"\x01" + body)
    write("fuzz_checkpoint", "sealed-empty", b"\x01" + checkpoint_file(0, []))
    write("fuzz_checkpoint", "whole", b"\x00" + body + hashlib.sha256(body).digest())
    write("fuzz_checkpoint", "format-1", b"\x01FEDPROF-CHECKPOINT 1\n{}\n")
    write("fuzz_checkpoint", "asynchronous",
          b"\x01" + checkpoint_file(2, [0.5, -1, 2], training_models=[[0.25, -1, 1.5]]))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, wire_type, payload):
    key = varint((number << 3) | wire_type)
    if wire_type == 0:
        return key + varint(payload)
    if wire_type == 1:
        return key + payload
    if wire_type == 5:
        return key + payload
    return key + varint(len(payload)) + payload


def values_dense(vals):
    return field(1, 0, len(vals)) + field(2, 2, struct.pack("<%df" % len(vals), *vals))


def values_quantised(length, kept, bits, low, high, packed, index_bits=0, levels=0):
    msg = field(1, 0, length) + field(3, 0, bits) + field(5, 0, kept)
    if index_bits:
        msg += field(4, 0, index_bits)
    msg += field(6, 5, struct.pack("<f", low)) + field(7, 5, struct.pack("<f", high))
    msg += field(8, 2, packed)
    if levels:
        msg += field(9, 0, levels)
    return msg


def transfer():
    dense = values_dense([1.0, -2.0, 0.5])
    write("fuzz_transfer", "gradient-dense", b"\x00" + field(1, 0, 3) + field(2, 0, 8) + field(3, 2, dense))
    # 4 values, all kept, 2-bit codes 0,1,2,3 (little-endian bit stream).
    q = values_quantised(4, 4, 2, -1.0, 1.0, bytes([0b11100100]))
    write("fuzz_transfer", "feature-quantised", b"\x01" + field(1, 0, 1) + field(2, 0, 7) + field(3, 2, q))
    # 8 values, 2 kept at indices 1 and 6 (3 index bits each), 8-bit codes.
    bits = (1 | (6 << 3)) | (17 << 6) | (200 << 14)
    packed = bits.to_bytes(3, "little")
    s = values_quantised(8, 2, 8, -3.0, 3.0, packed, index_bits=3, levels=255)
    write("fuzz_transfer", "download-sparse", b"\x02" + field(1, 0, 9) + field(2, 2, s))
    f32 = values_quantised(2, 2, 32, 0, 0, struct.pack("<ff", 1.5, -7.25))
    write("fuzz_transfer", "values-float32", b"\x03" + f32)


def wire():
    train = field(1, 0, 2) + field(2, 0, 32) + field(3, 1, struct.pack("<d", 0.01))
    task = (field(1, 0, 1) + field(2, 0, 7) + field(3, 0, 3) + field(4, 0, 2) + field(5, 0, 64) +
            field(6, 0, 1) + field(10, 0, 16) + field(11, 2, train) + field(12, 0, 99))
    write("fuzz_wire", "task-header", b"\x00" + task)
    prof = (field(1, 0, 2) + field(2, 2, b"fc1") +
            field(3, 2, struct.pack("<dd", 0.5, 1.0)) + field(4, 2, struct.pack("<dd", 1.0, 2.0)))
    result = (field(1, 0, 1) + field(2, 0, 3) + field(3, 2, b"session") + field(4, 0, 7) +
              field(5, 0, 1) + field(7, 0, 64) + field(8, 0, 100) +
              field(9, 1, struct.pack("<d", 0.7)) + field(11, 2, prof) +
              field(12, 2, struct.pack("<ff", 0.1, 0.2)))
    write("fuzz_wire", "result-header", b"\x01" + result)
    spec = (field(1, 2, b"lenet5") + field(2, 2, varint(1) + varint(28) + varint(28)) +
            field(3, 0, 10) + field(4, 2, varint(64)) + field(6, 1, struct.pack("<d", 1.0)))
    write("fuzz_wire", "model-spec", b"\x02" + spec)

    def frame(msg):
        return struct.pack("<H", len(msg)) + msg
    chunks = frame(field(1, 2, result))
    for part in range(2):
        chunks += frame(field(2, 2, struct.pack("<32f", *[0.01 * i for i in range(32)])))
    write("fuzz_wire", "result-stream", b"\x03" + chunks)
    tasks = frame(field(1, 0, 1)) + frame(field(2, 2, task))
    tasks += frame(field(3, 2, struct.pack("<16f", *range(16))))
    write("fuzz_wire", "task-stream", b"\x04" + tasks)
    relayed = b"".join(field(4, 2, field(1, 0, k) + field(2, 0, 100 + k) +
                                  field(3, 1, struct.pack("<d", 1.5))) for k in (2, 5, 9))
    write("fuzz_wire", "relay-sync", b"\x05" + field(1, 0, 1) + field(2, 0, 0) + relayed)
    batch = field(1, 0, 3) + field(2, 1, struct.pack("<d", 60.0)) + field(4, 0, 64)
    for k in (2, 5):
        batch += field(3, 2, field(1, 0, k) + field(2, 2, task))
    write("fuzz_wire", "relay-batch", b"\x06" + batch)
    # Two models of weight 100 + 105, every value 0.25 · 205 in units of 2^-64.
    total = struct.pack("<qq", 2, 205) + b"".join(
        (int(0.25 * 205 * 2**64)).to_bytes(16, "little", signed=True) for _ in range(64))
    head = field(1, 2, field(1, 0, 1) + field(2, 0, 0) + field(3, 2, b"0" * 32) + field(4, 0, 3) +
                 field(5, 2, varint(2) + varint(5)) + field(6, 0, len(total)))
    sums = frame(head) + frame(field(2, 2, total[:600])) + frame(field(2, 2, total[600:]))
    write("fuzz_wire", "relay-sum", b"\x07" + sums)


def enc(m, r):
    return (pow(N + 1, m % N, N2) * pow(r, N, N2)) % N2


def be(v, length):
    return v.to_bytes(length, "big")


CT = (N2.bit_length() + 7) // 8


def paillier():
    nb = be(N, (N.bit_length() + 7) // 8)
    write("fuzz_paillier", "public-key", b"\x00" + nb)
    write("fuzz_paillier", "ciphertext", b"\x01" + be(enc(42, 12345), CT))
    write("fuzz_paillier", "ciphertext-negative", b"\x01" + be(enc(-7, 99991), CT))
    pb, qb = be(P, 64), be(Q, 64)
    write("fuzz_paillier", "secret-key",
          b"\x02" + struct.pack(">I", len(pb)) + pb + struct.pack(">I", len(qb)) + qb)
    write("fuzz_paillier", "decimal", b"\x03-123456789012345678901234567890")


def secure_reference():
    # One unit of w = 1/2 (σ_V² = 1), w·μ = 0, c = ½ log 1 + 0 − ½, at the
    # scales of privacy/secure_matching.h (server 128 bits, c at 224).
    w = 1 << 127
    c = -(1 << 223)
    layer = b"fc1"
    ref = (b"FPSR" + bytes([1]) + struct.pack(">Q", 5) + struct.pack(">I", len(layer)) + layer +
           struct.pack(">I", 1) + struct.pack(">I", CT) +
           be(enc(w, 3), CT) + be(enc(0, 5), CT) + be(enc(c, 7), CT))
    write("fuzz_secure_reference", "one-unit", b"\x00" + ref)
    # Enc(q·div) at 224 bits for q = 1, div = 0.25.
    write("fuzz_secure_reference", "divergence", b"\x01\x00" + be(enc(1 << 222, 11), CT))


def model_sum():
    def s128(v):
        return (v & ((1 << 128) - 1)).to_bytes(16, "little")
    two = struct.pack("<qq", 2, 300) + s128(150 << 64) + s128(-(75 << 63)) + s128(0)
    write("fuzz_model_sum", "two-models", two)
    write("fuzz_model_sum", "empty", struct.pack("<qq", 0, 0))
    write("fuzz_model_sum", "one-model", struct.pack("<qq", 1, 10) + s128(3 << 64))


def secagg():
    def ids(number, values):
        return field(number, 2, b"".join(varint(v) for v in values))

    def advertise(client):
        return (field(1, 0, client) + field(2, 2, bytes([client + 1]) * 32) +
                field(3, 2, bytes([client + 9]) * 32) + field(4, 2, b"\x5a" * 64) +
                field(5, 2, bytes([client + 17]) * 32))

    sealed = lambda peer: field(1, 0, peer) + field(2, 2, bytes(range(110)))
    write("fuzz_secagg", "advertise-keys", b"\x00" + advertise(3))
    write("fuzz_secagg", "advertise-short-key", b"\x00" + field(1, 0, 3) + field(2, 2, b"k" * 31))
    nonces = b"".join(field(3, 2, bytes([n]) * 32) for n in range(4))
    write("fuzz_secagg", "key-directory",
          b"\x01" + field(2, 2, advertise(1)) + field(2, 2, advertise(2)) + nonces +
          field(4, 2, b"\x21" * 64) + field(4, 2, b"\x22" * 64))
    write("fuzz_secagg", "share-keys", b"\x02" + field(1, 0, 2) + field(2, 2, b"c" * 32) +
          field(3, 2, sealed(0)) + field(3, 2, sealed(1)))
    write("fuzz_secagg", "share-bundle", b"\x03" + field(1, 2, sealed(0)) + field(1, 2, sealed(3)))
    write("fuzz_secagg", "survivor-list", b"\x04" + ids(1, [0, 1, 3]))
    write("fuzz_secagg", "negative-survivor", b"\x04" + ids(1, [(1 << 64) - 1]))
    signature = lambda client: field(1, 0, client) + field(2, 2, b"\x11" * 64)
    write("fuzz_secagg", "consistency-signature", b"\x05" + signature(2))
    request = (ids(1, [0, 1, 2, 3]) + ids(2, []) + field(3, 2, signature(0)) +
               field(3, 2, signature(2)))
    write("fuzz_secagg", "unmask-request", b"\x06" + request)
    share = lambda owner, kind: field(1, 0, owner) + field(2, 0, kind) + field(3, 2, b"\x01" * 33)
    response = field(1, 0, 0) + field(2, 2, share(1, 0)) + field(2, 2, share(2, 0)) + ids(3, [3])
    write("fuzz_secagg", "unmask-response", b"\x07" + response)
    write("fuzz_secagg", "unmask-response-bad-kind", b"\x07" + field(1, 0, 0) +
          field(2, 2, share(1, 5)))
    # A task's setup for clients 0, 1 and 2 of a 2-value model (3 words):
    # SecAgg+ with the k = 2, t = 2 the default tolerance gives.
    keys = field(9, 2, b"\x01" * 32) + field(9, 2, b"\x02" * 32) + field(9, 2, b"\x03" * 32)
    ids_and_run = ids(8, [0, 1, 2]) + field(11, 2, b"\x07" * 32) + field(12, 2, b"\x08" * 32)
    setup = (field(2, 0, 1) + field(5, 0, 2) + field(6, 0, 2) + field(7, 0, 3) + ids_and_run + keys +
             field(10, 1, struct.pack("<d", 90.0)))
    write("fuzz_secagg", "task-setup", b"\x0b" + setup)
    write("fuzz_secagg", "task-setup-server-threshold", b"\x0b" + field(2, 0, 1) + field(5, 0, 2) +
          field(6, 0, 1) + field(7, 0, 3) + ids_and_run + keys)
    write("fuzz_secagg", "task-setup-short-key", b"\x0b" + field(7, 0, 3) + ids(8, [0, 1]) +
          field(9, 2, b"\x01" * 31) + field(9, 2, b"\x02" * 32))
    # Client 0's advertisement to a deployment's session, and a masked-input
    # chunk out of turn.
    write("fuzz_secagg", "request-advertise", b"\x0c" + field(1, 0, 1) + field(4, 0, 1) +
          field(5, 2, advertise(0)))
    write("fuzz_secagg", "request-masked-early", b"\x0c" + field(4, 0, 1) +
          field(7, 2, field(1, 0, 0) + field(2, 0, 0) + field(3, 0, 3) + field(4, 2, b"\x00" * 48)))

    roster = ids(1, [0, 1, 2, 3]) + b"".join(field(2, 2, bytes([c]) * 32) for c in range(4))
    write("fuzz_secagg", "roster", b"\x0d" + roster)
    write("fuzz_secagg", "roster-signature", b"\x0e" + field(1, 0, 2) + field(2, 2, b"\x33" * 64) +
          field(3, 2, b"\x44" * 32))
    write("fuzz_secagg", "client-roster", b"\x0f" + roster)
    write("fuzz_secagg", "client-roster-small", b"\x0f" + ids(1, [1, 2]) + field(2, 2, b"\x01" * 32) +
          field(2, 2, b"\x02" * 32))
    write("fuzz_secagg", "client-directory", b"\x10" + nonces + field(2, 2, advertise(0)))

    def chunk(first, words):
        body = (field(1, 0, 4) + field(2, 0, first) + field(3, 0, 8) +
                field(4, 2, bytes(range(16 * words))))
        return struct.pack("<H", len(body)) + body
    write("fuzz_secagg", "masked-input", b"\x08" + chunk(0, 5) + chunk(5, 3))
    write("fuzz_secagg", "masked-input-gap", b"\x08" + chunk(0, 4) + chunk(5, 3))
    write("fuzz_secagg", "client-request", b"\x09" + request)
    write("fuzz_secagg", "client-request-both", b"\x09" + ids(1, [0, 1, 2, 3]) + ids(2, [2]))
    write("fuzz_secagg", "server-response", b"\x0a" + response)
    write("fuzz_secagg", "server-response-all",
          b"\x0a" + field(1, 0, 0) + field(2, 2, share(1, 0)) + field(2, 2, share(2, 0)) +
          field(2, 2, share(3, 0)))


def main():
    for make in (idx, cifar, csv, availability, config, profile, checkpoint, transfer, wire, paillier,
                 secure_reference, model_sum, secagg):
        make()
    return 0


if __name__ == "__main__":
    sys.exit(main())
