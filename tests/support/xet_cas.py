"""The storage side of a Xet upload, as ``hf_xet`` speaks it to the Hub's CAS service: the formats and their checks.

What ``hf_xet`` sends (see xet-core's spec: xorb.md, shard.md, api.md): *xorbs*, runs of content-defined chunks,
each behind an 8-byte header and stored raw, LZ4 (frame format) or byte-grouped then LZ4; and a *shard* naming
the files of the upload as terms (a xorb and a chunk range) with each file's SHA-256, plus the chunk listing of
every new xorb. ``XetStore`` keeps the xorbs, checks a shard against them and rebuilds every file it names, so a
test reads back what reached the stand-in byte for byte. Hashes are kept as the API's hex strings.

Every hash is checked as the CAS checks it (xet-core's spec, hashing.md): a xorb must hash to the name it is
uploaded under, a shard's chunk listing must give the stored chunks' hashes, a file's hash and each term's
verification hash must follow from those chunk hashes, and a rebuilt file must have the SHA-256 the shard gives
it (the Hub's commit names it by that); BLAKE3 and LZ4 come from their packages (the dev extra). The
global-deduplication query is always answered "not tracked" (the real CAS tracks only some chunks), so nothing
is shared between uploads.
"""

from __future__ import annotations

import hashlib
import struct
import threading

import blake3
import lz4.frame

# the 32-byte magic that opens every shard: "HFRepoMetaData\0", then 17 fixed bytes
SHARD_TAG = bytes.fromhex("48465265706f4d6574614461746100556967456a7b815783a5bdd95ccdd14aa9")
BOOKEND = b"\xff" * 32  # ends the file section and the xorb section of a shard
WITH_VERIFICATION = 1 << 31
WITH_METADATA_EXT = 1 << 30
MAX_XORB_BYTES = 64 * 1024 * 1024  # the CAS refuses a larger serialised xorb
MAX_CHUNK_BYTES = 128 * 1024


class XetFormatError(ValueError):
    """What the CAS answers with a 400: the body is not what its route accepts."""


def hash_hex(raw: bytes) -> str:
    """A 32-byte hash as the API spells it: four little-endian u64s, each as 16 hex digits."""
    return "".join(f"{value:016x}" for value in struct.unpack("<4Q", raw))


def blake3_keyed(key: bytes, data: bytes) -> bytes:
    """BLAKE3's keyed hash, the hash under every Xet hash."""
    return blake3.blake3(data, key=key).digest()


# -- Xet's hashes, from xet-core's spec (hashing.md) ----------------------------------------------------------
DATA_KEY = bytes([102, 151, 245, 119, 91, 149, 80, 222, 49, 53, 203, 172, 165, 151, 24, 28])
DATA_KEY += bytes([157, 228, 33, 16, 155, 235, 43, 88, 180, 208, 176, 75, 147, 173, 242, 41])
NODE_KEY = bytes([1, 126, 197, 199, 165, 71, 41, 150, 253, 148, 102, 102, 180, 138, 2, 230])
NODE_KEY += bytes([93, 221, 83, 111, 55, 199, 109, 210, 248, 99, 82, 230, 74, 83, 113, 63])
VERIFICATION_KEY = bytes([127, 24, 87, 214, 206, 86, 237, 102, 18, 127, 249, 19, 231, 165, 195, 243])
VERIFICATION_KEY += bytes([164, 205, 38, 213, 181, 219, 73, 230, 65, 36, 152, 127, 40, 251, 148, 195])


def chunk_hash(chunk: bytes) -> bytes:
    return blake3_keyed(DATA_KEY, chunk)


def merkle_root(leaves: list[tuple[bytes, int]]) -> bytes:
    """Xet's aggregated hash of (hash, size) pairs: groups of 2 to 9 nodes, cut after a node whose last u64 is
    a multiple of 4 (from the third on), each group hashed as its "hex : size" lines; repeated to one node."""
    if not leaves:
        return bytes(32)
    level = list(leaves)
    while len(level) > 1:
        merged, i = [], 0
        while i < len(level):
            end = min(i + 9, len(level)) if len(level) - i > 2 else len(level)
            for k in range(i + 2, end):
                if int.from_bytes(level[k][0][24:], "little") % 4 == 0:
                    end = k + 1
                    break
            group = level[i:end]
            lines = "".join(f"{hash_hex(h)} : {size}\n" for h, size in group)
            merged.append((blake3_keyed(NODE_KEY, lines.encode()), sum(size for _, size in group)))
            i = end
        level = merged
    return level[0][0]


def file_hash(leaves: list[tuple[bytes, int]]) -> bytes:
    """A file's hash: the aggregated hash of its chunks, hashed once more with an all-zero key."""
    return blake3_keyed(bytes(32), merkle_root(leaves)) if leaves else bytes(32)


def _crc64_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x9A6C9329AC4BC9B5 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC64 = _crc64_table()


def crc64nvme(data: bytes) -> int:
    """CRC-64/NVME (reflected, all-ones init and xorout): the checksum a xorb upload grant is asked for."""
    crc = 0xFFFFFFFFFFFFFFFF
    table = _CRC64
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def lz4_frame_decode(data: bytes) -> bytes:
    """An LZ4 frame to its content (the lz4 package checks the frame's own checksums)."""
    if data[:4] != b"\x04\x22\x4d\x18":
        raise XetFormatError("LZ4 chunk without the LZ4 frame magic")
    try:
        return lz4.frame.decompress(data)
    except RuntimeError as exc:
        raise XetFormatError(f"LZ4 frame does not decode: {exc}") from exc


def bg4_ungroup(grouped: bytes) -> bytes:
    """Undo byte grouping: the four groups (every 4th byte from offsets 0..3) back into place."""
    n = len(grouped)
    out = bytearray(n)
    start = 0
    for k in range(4):
        size = n // 4 + (1 if k < n % 4 else 0)
        out[k::4] = grouped[start : start + size]
        start += size
    return bytes(out)


def parse_xorb(body: bytes) -> list[bytes]:
    """A serialised xorb to its chunks, uncompressed, checking every header against what it announces."""
    if len(body) > MAX_XORB_BYTES:
        raise XetFormatError(f"xorb of {len(body)} bytes is over the 64 MiB limit")
    chunks, i = [], 0
    while i < len(body):
        if i + 8 > len(body):
            raise XetFormatError("xorb ends inside a chunk header")
        version, scheme = body[i], body[i + 4]
        stored = int.from_bytes(body[i + 1 : i + 4], "little")
        size = int.from_bytes(body[i + 5 : i + 8], "little")
        data = body[i + 8 : i + 8 + stored]
        if version != 0 or len(data) != stored or not 0 < size <= MAX_CHUNK_BYTES:
            raise XetFormatError(f"xorb chunk {len(chunks)}: bad header")
        if scheme == 0:
            chunk = data
        elif scheme == 1:
            chunk = lz4_frame_decode(data)
        elif scheme == 2:
            chunk = bg4_ungroup(lz4_frame_decode(data))
        else:
            raise XetFormatError(f"xorb chunk {len(chunks)}: unknown compression scheme {scheme}")
        if len(chunk) != size:
            raise XetFormatError(f"xorb chunk {len(chunks)}: {len(chunk)} bytes, header says {size}")
        chunks.append(chunk)
        i += 8 + stored
    if not chunks:
        raise XetFormatError("empty xorb")
    return chunks


def parse_shard(body: bytes) -> tuple[list[dict], list[dict]]:
    """A shard to its files (hash, terms with their verification hashes, sha256) and its new xorbs' chunk listings
    (hash, total size, and per chunk: hash, offset in the xorb, size). Hashes stay raw (32 bytes) here."""
    if len(body) < 48 or body[:32] != SHARD_TAG:
        raise XetFormatError("not a shard: the header tag is missing")
    version, _footer_size = struct.unpack_from("<QQ", body, 32)
    if version != 2:
        raise XetFormatError(f"shard header version {version}, expected 2")
    i = 48

    def entry() -> tuple[bytes, bytes]:
        """The next 48-byte entry: its 32-byte hash and the 16 bytes after it."""
        nonlocal i
        if i + 48 > len(body):
            raise XetFormatError("shard ends before its bookend")
        i += 48
        return body[i - 48 : i - 16], body[i - 16 : i]

    files = []
    while True:
        raw_hash, rest = entry()
        if raw_hash == BOOKEND:
            break
        flags, count = struct.unpack_from("<II", rest)
        terms = []
        for _ in range(count):
            xorb, fields = entry()
            _cas_flags, size, first, end = struct.unpack("<4I", fields)
            terms.append({"xorb": hash_hex(xorb), "bytes": size, "chunks": (first, end), "verification": None})
        if flags & WITH_VERIFICATION:
            for term in terms:
                term["verification"] = entry()[0]
        sha256 = entry()[0] if flags & WITH_METADATA_EXT else None
        files.append({"hash": raw_hash, "terms": terms, "sha256": sha256})

    xorbs = []
    while True:
        raw_hash, rest = entry()
        if raw_hash == BOOKEND:
            break
        _cas_flags, count, total, _on_disk = struct.unpack("<4I", rest)
        chunks = []
        for _ in range(count):
            chunk, fields = entry()
            start, size, _, _ = struct.unpack("<4I", fields)
            chunks.append((chunk, start, size))
        xorbs.append({"hash": hash_hex(raw_hash), "bytes": total, "chunks": chunks})
    return files, xorbs


class XetStore:
    """The CAS stand-in's state: xorbs by hash, grants in flight, and the files each accepted shard names."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.xorbs: dict[str, list[bytes]] = {}  # hex hash -> its chunks, uncompressed
        self.chunk_hashes: dict[str, list[bytes]] = {}  # hex hash -> its chunks' hashes, raw
        self.grants: dict[str, dict] = {}  # grant id -> {"xorb", "length", "crc", "data"}
        self.files: dict[str, bytes] = {}  # sha256 -> content, for the Hub's commit to resolve lfsFile oids
        self.shards: list[dict] = []  # per accepted shard: its files (hash, sha256, size) and new xorbs

    def add_xorb(self, hex_hash: str, body: bytes) -> bool:
        """Check and keep a xorb; False when it was already there (not an error, as on the CAS)."""
        chunks = parse_xorb(body)
        hashes = [chunk_hash(chunk) for chunk in chunks]
        if hash_hex(merkle_root([(h, len(c)) for h, c in zip(hashes, chunks, strict=True)])) != hex_hash:
            raise XetFormatError(f"xorb {hex_hash}: its chunks do not hash to its name")
        with self.lock:
            if hex_hash in self.xorbs:
                return False
            self.xorbs[hex_hash], self.chunk_hashes[hex_hash] = chunks, hashes
            return True

    def add_shard(self, body: bytes) -> dict:
        """Check a shard against the stored xorbs and rebuild the files it names; returns what it listed."""
        files, xorbs = parse_shard(body)
        with self.lock:
            for listed in xorbs:  # each new xorb's chunk listing must describe the xorb that was uploaded
                if listed["hash"] not in self.xorbs:
                    raise XetFormatError(f"shard lists xorb {listed['hash']}, which was never uploaded")
                chunks, hashes = self.xorbs[listed["hash"]], self.chunk_hashes[listed["hash"]]
                offsets = [sum(len(c) for c in chunks[:k]) for k in range(len(chunks))]
                if listed["chunks"] != list(zip(hashes, offsets, map(len, chunks), strict=True)):
                    raise XetFormatError(f"shard's chunk listing of xorb {listed['hash']} does not match it")
                if listed["bytes"] != sum(map(len, chunks)):
                    raise XetFormatError(f"shard gives xorb {listed['hash']} the wrong size")
            rebuilt, named = {}, []
            for file in files:
                name = hash_hex(file["hash"])
                if file["sha256"] is None or any(term["verification"] is None for term in file["terms"]):
                    raise XetFormatError(f"file {name}: an uploaded shard needs each file's SHA-256 and term hashes")
                parts, leaves = [], []
                for term in file["terms"]:
                    chunks, hashes = self.xorbs.get(term["xorb"]), self.chunk_hashes.get(term["xorb"])
                    first, end = term["chunks"]
                    if chunks is None or not 0 <= first < end <= len(chunks):
                        raise XetFormatError(f"file {name}: term {term['chunks']} names chunks that are not stored")
                    if blake3_keyed(VERIFICATION_KEY, b"".join(hashes[first:end])) != term["verification"]:
                        raise XetFormatError(f"file {name}: a term's verification hash does not match its chunks")
                    parts += chunks[first:end]
                    leaves += [(h, len(c)) for h, c in zip(hashes[first:end], chunks[first:end], strict=True)]
                    if sum(map(len, chunks[first:end])) != term["bytes"]:
                        raise XetFormatError(f"file {name}: a term does not have the size it gives")
                if file_hash(leaves) != file["hash"]:
                    raise XetFormatError(f"file {name}: its chunks do not hash to its name")
                content, sha256 = b"".join(parts), hash_hex(file["sha256"])  # stored like the other hashes
                if hashlib.sha256(content).hexdigest() != sha256:
                    raise XetFormatError(f"file {name}: the rebuilt content does not have its SHA-256")
                rebuilt[sha256] = content
                named.append({"hash": name, "sha256": sha256, "bytes": len(content)})
            self.files.update(rebuilt)
            listing = {"files": named, "xorbs": [x["hash"] for x in xorbs]}
            self.shards.append(listing)
            return listing
