"""The lab's RBD client: writes, reads and checks image data with librbd (python3-rbd), run
inside a cluster's network namespace from the Ceph root filesystem.

Every command prints one JSON object on stdout. A failed librbd call exits non-zero with the
error on stderr, except in `load`, which stops at its first failed write, logs it and counts it
in its answer ("errors"), and exits 0.

  fill      write a file at offset 0 (or --offset) of an image; its sha256 and size
  checksum  sha256 of a whole image (read-only open: works on a non-primary image)
  load      write 4 KiB blocks round-robin until --stop-file exists, logging every
            acknowledged write (seq, block, start, end) to --log
  verify    read back every block of a load log: each must hold its last acknowledged write
  token     a peer bootstrap token with its mon_host replaced
"""

import argparse
import base64
import hashlib
import json
import os
import struct
import sys
import time

BLOCK = 4096
CHUNK = 4 << 20


def open_image(args, read_only=False):
    import rados
    import rbd

    cluster = rados.Rados(conffile=args.conf, rados_id=args.id)
    cluster.connect(timeout=30)
    ioctx = cluster.open_ioctx(args.pool)
    image = rbd.Image(ioctx, args.image, read_only=read_only)
    return cluster, ioctx, image


def close(cluster, ioctx, image):
    image.close()
    ioctx.close()
    cluster.shutdown()


def fill(args):
    cluster, ioctx, image = open_image(args)
    digest = hashlib.sha256()
    written = 0
    with open(args.file, "rb") as data:
        while True:
            chunk = data.read(CHUNK)
            if not chunk:
                break
            image.write(chunk, args.offset + written)
            digest.update(chunk)
            written += len(chunk)
    image.flush()
    close(cluster, ioctx, image)
    return {"sha256": digest.hexdigest(), "bytes": written}


def checksum(args):
    cluster, ioctx, image = open_image(args, read_only=True)
    size = image.size()
    digest = hashlib.sha256()
    offset = 0
    while offset < size:
        length = min(CHUNK, size - offset)
        digest.update(image.read(offset, length))
        offset += length
    close(cluster, ioctx, image)
    return {"sha256": digest.hexdigest(), "bytes": size}


def block_data(seq, block):
    return struct.pack("<QQ", seq, block) * (BLOCK // 16)


def load(args):
    cluster, ioctx, image = open_image(args)
    seq = 0
    errors = 0
    with open(args.log, "w") as log:
        while not os.path.exists(args.stop_file):
            seq += 1
            block = seq % args.blocks
            start = time.time()
            try:
                image.write(block_data(seq, block), block * BLOCK)
            except Exception as error:  # every librbd error counts, none is retried
                errors += 1
                log.write("error %d %d %r\n" % (seq, block, error))
                log.flush()
                break
            end = time.time()
            log.write("ok %d %d %.6f %.6f\n" % (seq, block, start, end))
            if seq % 50 == 0:
                log.flush()
    close(cluster, ioctx, image)
    return {"writes": seq - errors, "errors": errors}


def verify(args):
    last = {}
    with open(args.log) as log:
        for line in log:
            fields = line.split()
            if fields and fields[0] == "ok":
                last[int(fields[2])] = int(fields[1])
    cluster, ioctx, image = open_image(args, read_only=True)
    mismatches = []
    for block, seq in sorted(last.items()):
        if image.read(block * BLOCK, BLOCK) != block_data(seq, block):
            mismatches.append(block)
    close(cluster, ioctx, image)
    return {"blocks": len(last), "mismatches": mismatches}


def token(args):
    with open(args.file) as source:
        raw = source.read().strip()
    fields = json.loads(base64.b64decode(raw))
    was = fields.get("mon_host")
    fields["mon_host"] = args.mon_host
    encoded = base64.b64encode(json.dumps(fields).encode()).decode()
    return {"token": encoded, "was": was, "fsid": fields.get("fsid")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("fill", "checksum", "load", "verify"):
        command = commands.add_parser(name)
        command.add_argument("--conf", required=True)
        command.add_argument("--id", default="admin")
        command.add_argument("--pool", required=True)
        command.add_argument("--image", required=True)
    commands.choices["fill"].add_argument("--file", required=True)
    commands.choices["fill"].add_argument("--offset", type=int, default=0)
    commands.choices["load"].add_argument("--blocks", type=int, required=True)
    commands.choices["load"].add_argument("--log", required=True)
    commands.choices["load"].add_argument("--stop-file", required=True)
    commands.choices["verify"].add_argument("--log", required=True)
    command = commands.add_parser("token")
    command.add_argument("--file", required=True)
    command.add_argument("--mon-host", required=True)
    args = parser.parse_args()
    result = globals()[args.command](args)
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
