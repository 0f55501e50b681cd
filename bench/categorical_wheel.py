"""Build `.whl/cb.tar.xz`: CatBoost's wheel cut down to fit the device tool's carry, so that
`bench/categorical_check.sh` can time CatBoost's GPU mode on the lent machines.

    python bench/categorical_wheel.py catboost-1.2.10-cp312-cp312-manylinux2014_x86_64.whl \
        [--keep 2:90] [--out .whl/cb.tar.xz]

The wheel (97 MB, 276 MB unpacked) is mostly the CUDA device code of `_catboost.so`: its
`.nv_fatbin` section holds, for every kernel module, PTX for sm_35..sm_90 and SASS for
sm_61..sm_90 (214 MB). The lent machines are Hopper (H100 / H200, sm_90), which run the sm_90
SASS as it is; the other entries' payloads are zeroed in place (the section's layout, and so
every offset the runtime registers, stays the same; zeros compress to nothing). Symbol tables
are stripped. The result is a tar.xz (xz -9e) of a site tree: `catboost/` and its dist-info
(the Jupyter widget left out), unpacked and put first on PYTHONPATH. It needs Python 3.12
(the wheel's ABI) and numpy, pandas, scipy and six, which the machines' image has.

A fatbin (CUDA's container of device code) is a sequence of blobs, each a 16-byte header
(magic 0xBA55ED50, version u16, header size u16, payload size u64) and entries; an entry
header holds its kind (u16 at +0: 1 PTX, 2 SASS), its header size (u32 at +4), its payload
size (u64 at +8) and its target architecture (u32 at +28, e.g. 90 for sm_90).
"""

from __future__ import annotations

import argparse
import collections
import struct
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
KIND_NAMES = {1: "PTX", 2: "SASS"}


def section(path: Path, name: str) -> tuple[int, int]:
    """(file offset, size) of ELF section `name` (from readelf)."""
    out = subprocess.check_output(["readelf", "-S", "-W", str(path)], text=True)
    for line in out.splitlines():
        if f" {name} " in line:
            fields = line.split("]", 1)[1].split()
            return int(fields[3], 16), int(fields[4], 16)
    raise ValueError(f"{path} has no {name} section")


def fatbin_entries(data: bytes | bytearray, offset: int, size: int
                   ) -> list[tuple[int, int, int, int]]:
    """(kind, sm, payload offset, payload size) of every entry of the fatbin section."""
    entries = []
    pos, end = offset, offset + size
    while pos < end:
        magic, _version, header, blob = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:  # blobs are 8-byte aligned, padding between them
            pos += 8
            continue
        e, blob_end = pos + header, pos + header + blob
        while e < blob_end:
            kind, _ver, entry_header, payload = struct.unpack_from("<HHIQ", data, e)
            sm = struct.unpack_from("<I", data, e + 28)[0]
            entries.append((kind, sm, e + entry_header, payload))
            e += entry_header + payload
        pos = blob_end
    return entries


def prune(path: Path, keep: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Zero the payload of every fatbin entry of `path` whose (kind, sm) is not in `keep`;
    returns the bytes per (kind, sm) before. Raises when a blob would be left without a kept
    entry (a kernel module the machine could not load)."""
    data = bytearray(path.read_bytes())
    offset, size = section(path, ".nv_fatbin")
    entries = fatbin_entries(data, offset, size)
    sizes: dict[tuple[int, int], int] = collections.Counter()
    for kind, sm, start, length in entries:
        sizes[(kind, sm)] += length
        if (kind, sm) not in keep:
            data[start:start + length] = bytes(length)
    counts = collections.Counter((k, s) for k, s, _, _ in entries)
    kept = sum(counts[k] for k in keep)
    blobs = max(counts.values())
    if kept < blobs:
        raise ValueError(f"only {kept} of {blobs} kernel modules have a kept entry {keep}")
    path.write_bytes(bytes(data))
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel")
    ap.add_argument("--keep", default="2:90", help="kind:sm entries kept (1 PTX, 2 SASS)")
    ap.add_argument("--out", default=".whl/cb.tar.xz")
    a = ap.parse_args()
    keep = {tuple(int(x) for x in k.split(":")) for k in a.keep.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        with zipfile.ZipFile(a.wheel) as z:
            members = [m for m in z.namelist()
                       if not m.startswith("catboost/widget/") and ".data/" not in m]
            z.extractall(site, members)
        lib = site / "catboost" / "_catboost.so"
        for (kind, sm), n in sorted(prune(lib, keep).items()):
            state = "kept" if (kind, sm) in keep else "zeroed"
            print(f"{KIND_NAMES.get(kind, kind)} sm_{sm}: {n / 2**20:.1f} MiB {state}")
        for so in site.rglob("*.so"):
            subprocess.check_call(["strip", "--strip-unneeded", str(so)])
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        with open(part, "wb") as f:
            xz = subprocess.Popen(["xz", "-9e", "-T2", "-c"], stdin=subprocess.PIPE, stdout=f)
            assert xz.stdin is not None
            with tarfile.open(fileobj=xz.stdin, mode="w|") as tar:
                for top in sorted(site.iterdir()):
                    tar.add(top, arcname=top.name)
            xz.stdin.close()
            if xz.wait():
                raise RuntimeError("xz failed")
        part.replace(out)
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
