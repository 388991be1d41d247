"""The storage side of a Xet upload, as ``hf_xet`` speaks it to the Hub's CAS service: the formats and their checks.

What ``hf_xet`` sends (see xet-core's spec: xorb.md, shard.md, api.md): *xorbs*, runs of content-defined chunks,
each behind an 8-byte header and stored raw, LZ4 (frame format) or byte-grouped then LZ4; and a *shard* naming
the files of the upload as terms (a xorb and a chunk range) with each file's SHA-256, plus the chunk listing of
every new xorb. ``XetStore`` keeps the xorbs, checks a shard against them and rebuilds every file it names, so a
test reads back what reached the stand-in byte for byte. Hashes are kept as the API's hex strings.

Every hash is checked as the CAS checks it (xet-core's spec, hashing.md): a xorb must hash to the name it is
uploaded under, a shard's chunk listing must give the stored chunks' hashes, a file's hash and each term's
verification hash must follow from those chunk hashes, and a rebuilt file must have the SHA-256 the shard gives
it (the Hub's commit names it by that). Neither BLAKE3 nor LZ4 is in the environment, so both are written out
below; the data here is a few MB, which pure Python hashes in seconds. The global-deduplication query is always
answered "not tracked" (the real CAS tracks only some chunks), so nothing is shared between uploads.
"""

from __future__ import annotations

import hashlib
import struct
import threading

import xxhash

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


# -- BLAKE3 (keyed mode only, 32-byte output): the hash under every Xet hash ---------------------------------
_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT, _KEYED = 1, 2, 4, 8, 16
_G = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15), (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13))
_G += ((3, 4, 9, 14),)


def _schedule() -> list[tuple[int, ...]]:
    """The message word order of each of the 7 rounds: the identity, then permuted once per round."""
    order, rounds = list(range(16)), []
    for _ in range(7):
        rounds.append(tuple(order))
        order = [order[p] for p in (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)]
    return rounds


_ROUNDS = _schedule()


def _compress(cv: tuple[int, ...], block: bytes, counter: int, length: int, flags: int) -> tuple[int, ...]:
    m = struct.unpack("<16I", block.ljust(64, b"\0"))
    v = [*cv, *_IV[:4], counter & 0xFFFFFFFF, counter >> 32, length, flags]
    for order in _ROUNDS:
        for g, (a, b, c, d) in enumerate(_G):
            x, y = m[order[2 * g]], m[order[2 * g + 1]]
            va = (v[a] + v[b] + x) & 0xFFFFFFFF
            vd = v[d] ^ va
            vd = (vd >> 16 | vd << 16) & 0xFFFFFFFF
            vc = (v[c] + vd) & 0xFFFFFFFF
            vb = v[b] ^ vc
            vb = (vb >> 12 | vb << 20) & 0xFFFFFFFF
            va = (va + vb + y) & 0xFFFFFFFF
            vd ^= va
            vd = (vd >> 8 | vd << 24) & 0xFFFFFFFF
            vc = (vc + vd) & 0xFFFFFFFF
            vb ^= vc
            v[a], v[b], v[c], v[d] = va, (vb >> 7 | vb << 25) & 0xFFFFFFFF, vc, vd
    return tuple(v[i] ^ v[i + 8] for i in range(8))


def blake3_keyed(key: bytes, data: bytes) -> bytes:
    """BLAKE3's keyed hash: 1 KiB chunks of 64-byte blocks, their chaining values merged in a left-full tree."""
    key_words = struct.unpack("<8I", key)
    stack: list[tuple[int, ...]] = []  # chaining values of complete subtrees, left to right
    count = max(1, -(-len(data) // 1024))
    for index in range(count):
        chunk = data[index * 1024 : (index + 1) * 1024]
        cv, blocks = key_words, [chunk[i : i + 64] for i in range(0, len(chunk), 64)] or [b""]
        for j, block in enumerate(blocks[:-1]):
            cv = _compress(cv, block, index, 64, _KEYED | (_CHUNK_START if j == 0 else 0))
        start = _CHUNK_START if len(blocks) == 1 else 0
        # the last node is held back, uncompressed, until we know whether it is the root
        node = (cv, blocks[-1], index, len(blocks[-1]), _KEYED | start | _CHUNK_END)
        if index == count - 1:
            break
        cv, done = _compress(*node), index + 1
        while done % 2 == 0:  # a completed pair of subtrees becomes one parent
            cv = _compress(key_words, struct.pack("<16I", *stack.pop(), *cv), 0, 64, _KEYED | _PARENT)
            done //= 2
        stack.append(cv)
    while stack:
        node = (key_words, struct.pack("<16I", *stack.pop(), *_compress(*node)), 0, 64, _KEYED | _PARENT)
    cv, block, counter, length, flags = node
    return struct.pack("<8I", *_compress(cv, block, counter, length, flags | _ROOT))


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


def _lz4_block(src: bytes, out: bytearray) -> None:
    """Decode one LZ4 block onto ``out``; matches may reach into earlier blocks of the frame (linked blocks)."""
    i, n = 0, len(src)
    while i < n:
        token = src[i]
        i += 1
        length = token >> 4
        if length == 15:
            while True:
                extra = src[i]
                i += 1
                length += extra
                if extra != 255:
                    break
        out += src[i : i + length]
        i += length
        if i >= n:  # the last sequence of a block has literals only
            break
        offset = src[i] | src[i + 1] << 8
        i += 2
        length = token & 15
        if length == 15:
            while True:
                extra = src[i]
                i += 1
                length += extra
                if extra != 255:
                    break
        length += 4
        if offset == 0 or offset > len(out):
            raise XetFormatError("LZ4 match points before the start of the data")
        start = len(out) - offset
        if offset >= length:
            out += out[start : start + length]
        else:  # an overlapping match repeats the last `offset` bytes
            pattern = bytes(out[start:])
            out += (pattern * (length // offset + 1))[:length]


def lz4_frame_decode(data: bytes) -> bytes:
    """An LZ4 frame (magic, descriptor, blocks, end mark, optional checksums) to its content."""
    if data[:4] != b"\x04\x22\x4d\x18":
        raise XetFormatError("LZ4 chunk without the LZ4 frame magic")
    flags = data[4]
    if flags >> 6 != 1:
        raise XetFormatError("LZ4 frame of an unknown version")
    i = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if xxhash.xxh32(data[4:i]).digest()[2:3] != data[i : i + 1]:
        raise XetFormatError("LZ4 frame descriptor checksum does not match")
    i += 1
    out = bytearray()
    while True:
        (size,) = struct.unpack_from("<I", data, i)
        i += 4
        if size == 0:
            break
        raw, size = size & 0x80000000, size & 0x7FFFFFFF
        block = data[i : i + size]
        i += size + (4 if flags & 0x10 else 0)
        if raw:
            out += block
        else:
            _lz4_block(block, out)
    if flags & 0x04 and xxhash.xxh32(bytes(out)).intdigest() != struct.unpack_from("<I", data, i)[0]:
        raise XetFormatError("LZ4 frame content checksum does not match")
    return bytes(out)


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
