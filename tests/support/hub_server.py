"""A loopback stand-in for the Hugging Face Hub's upload API, as ``huggingface_hub`` speaks it, by LFS or by Xet.

Endpoints: ``POST /api/repos/create``, ``GET /api/datasets/{repo}``, ``POST /api/validate-yaml``,
``POST /api/datasets/{repo}/preupload/{rev}`` (binary files go to LFS, text files inline),
``POST /api/datasets/{repo}/commit/{rev}`` (NDJSON: header, file, lfsFile). Every API call must carry
``Authorization: Bearer <token>`` (401 otherwise). Committed files are kept in ``repos[repo_id]["files"]``.

The large files reach storage one of two ways, as ``huggingface_hub`` picks (``HF_HUB_DISABLE_XET=1``: LFS):

- LFS: ``POST /datasets/{repo}.git/info/lfs/objects/batch`` (basic transfer: a PUT per object, then a verify);
  the PUT, like S3's presigned URL, carries no credentials.
- Xet: ``GET /api/datasets/{repo}/xet-write-token/{rev}`` gives a short-lived CAS token and the CAS address
  (``{url}/cas`` here); ``hf_xet`` then asks the CAS about its first chunk (``GET /v1/chunks/...``, never known
  here: 404), uploads each xorb through a grant (``POST /v1/xorb-grants/default/{hash}`` with its length and
  CRC-64/NVME, a PUT without credentials to the grant's URL, ``POST /v1/xorb-commits/...``), then the shard
  (``POST /v2/shards``, answered in NDJSON). ``xet`` (a ``XetStore``) checks each upload and rebuilds the files.
  The commit's ``lfsFile`` entries then name those files by SHA-256, as for LFS.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler

import yaml

from tests.support.loopback import LoopbackServer
from tests.support.xet_cas import XetFormatError, XetStore, crc64nvme

REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
HASH = r"(?P<hash>[0-9a-f]{64})"
BINARY = (".parquet", ".duckdb", ".png")
SIZE_CATEGORIES = ["n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B"]
SIZE_CATEGORIES += ["1B<n<10B", "10B<n<100B", "100B<n<1T", "n>1T"]


class HubHandler(BaseHTTPRequestHandler):
    hub: HubServer

    def log_message(self, *args) -> None:  # noqa: ANN002 - stdlib signature
        pass

    # -- plumbing --------------------------------------------------------------------------------------
    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while size := int(self.rfile.readline().strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return data
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, payload: dict | None = None) -> None:
        body = json.dumps(payload or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorised(self) -> bool:
        self.hub.log(self.command, self.path, self.headers.get("Authorization"))
        if self.headers.get("Authorization") == f"Bearer {self.hub.token}":
            return True
        self._send(401, {"error": "Invalid credentials in Authorization header"})
        return False

    # -- routes ----------------------------------------------------------------------------------------
    def _cas_authorised(self) -> bool:
        """The CAS takes the short-lived Xet token from the Hub, never the Hub token itself."""
        self.hub.log(self.command, self.path, self.headers.get("Authorization"))
        if self.headers.get("Authorization") == f"Bearer {self.hub.xet_token}":
            return True
        self._send(401, {"error": "Invalid Xet token"})
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith("/cas/"):
            if not self._cas_authorised():
                return
            if re.fullmatch(rf"/cas/v1/chunks/[\w-]+/{HASH}", path):
                return self._send(404, {"error": "chunk not tracked for deduplication"})  # nothing is shared here
            return self._send(404, {"error": f"no route {path}"})
        if not self._authorised():
            return
        if m := re.fullmatch(rf"/api/datasets/{REPO}/xet-write-token/(?P<rev>[^/]+)", path):
            return self._xet_token(m["repo"])
        if m := re.fullmatch(rf"/api/datasets/{REPO}", self.path):
            repo = self.hub.repos.get(m["repo"])
            if repo is None:
                return self._send(404, {"error": "Repository not found"})
            return self._send(200, {"id": m["repo"], "sha": repo["sha"], "private": repo["private"]})
        self._send(404, {"error": f"no route {self.path}"})

    def do_PUT(self) -> None:
        self.hub.log(self.command, self.path, self.headers.get("Authorization"))
        if m := re.fullmatch(r"/lfs-upload/(?P<oid>[0-9a-f]{64})", self.path):
            data = self._body()
            if hashlib.sha256(data).hexdigest() != m["oid"]:
                return self._send(400, {"error": "content does not match its oid"})
            self.hub.blobs[m["oid"]] = data
            return self._send(200)
        if m := re.fullmatch(r"/cas/xorb-uploads/(?P<grant>[0-9a-f]{32})", self.path):
            return self._grant_upload(m["grant"], self._body())
        self._send(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        if self.path.startswith("/lfs-verify/"):
            self.hub.log(self.command, self.path, self.headers.get("Authorization"))
            oid = json.loads(self._body())["oid"]
            return self._send(200 if oid in self.hub.blobs else 404)
        if self.path.startswith("/cas/"):
            return self._cas_post(self.path.split("?", 1)[0])
        if not self._authorised():
            return
        body = self._body()
        path = self.path.split("?", 1)[0]
        if path == "/api/repos/create":
            return self._create(json.loads(body))
        if path == "/api/validate-yaml":
            return self._validate(json.loads(body)["content"])
        if m := re.fullmatch(rf"/api/datasets/{REPO}/preupload/(?P<rev>[^/]+)", path):
            return self._preupload(m["repo"], json.loads(body))
        if m := re.fullmatch(rf"/datasets/{REPO}\.git/info/lfs/objects/batch", path):
            return self._batch(json.loads(body))
        if m := re.fullmatch(rf"/api/datasets/{REPO}/commit/(?P<rev>[^/]+)", path):
            return self._commit(m["repo"], m["rev"], body)
        self._send(404, {"error": f"no route {path}"})

    def _create(self, payload: dict) -> None:
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        url = f"{self.hub.url}/datasets/{repo_id}"
        with self.hub.lock:
            if repo_id in self.hub.repos:
                return self._send(409, {"error": "You already created this dataset repo", "url": url})
            private = payload.get("visibility") == "private" or bool(payload.get("private"))
            self.hub.repos[repo_id] = {"private": private, "files": {}, "commits": [], "sha": "0" * 40}
        self._send(200, {"url": url})

    def _validate(self, content: str) -> None:
        match = re.match(r"^---\n(.*?)\n---\n", content, re.DOTALL)
        try:
            meta = yaml.safe_load(match[1]) if match else None
        except yaml.YAMLError as exc:
            return self._send(400, {"errors": [{"message": f"YAML: {exc}"}]})
        if not isinstance(meta, dict):
            return self._send(400, {"errors": [{"message": "README.md has no YAML metadata block"}]})
        errors = []  # the checks of the Hub's metadata validation that a dataset card can trip on
        if meta.get("license") == "other" and not meta.get("license_name"):
            errors.append("license_name is required when license is 'other'")
        sizes = meta.get("size_categories", [])
        errors += [f"size_categories: '{c}' is not one of the Hub's" for c in sizes if c not in SIZE_CATEGORIES]
        for config in meta.get("configs", []):
            if not config.get("config_name") or not config.get("data_files"):
                errors.append(f"configs: {config} needs a config_name and data_files")
        if errors:
            return self._send(400, {"errors": [{"message": e} for e in errors]})
        self._send(200, {"errors": [], "warnings": []})

    def _preupload(self, repo_id: str, payload: dict) -> None:
        if repo_id not in self.hub.repos:
            return self._send(404, {"error": "Repository not found"})
        files = []
        for f in payload["files"]:
            sample = base64.b64decode(f["sample"])
            try:
                sample.decode("utf-8")
                text = True
            except UnicodeDecodeError:
                text = False
            mode = "lfs" if f["path"].endswith(BINARY) or not text else "regular"
            files.append({"path": f["path"], "uploadMode": mode, "shouldIgnore": False, "oid": None})
        self._send(200, {"files": files, "commitOid": self.hub.repos[repo_id]["sha"]})

    def _batch(self, payload: dict) -> None:
        objects = []
        for obj in payload["objects"]:
            actions = {
                "upload": {"href": f"{self.hub.url}/lfs-upload/{obj['oid']}"},
                "verify": {"href": f"{self.hub.url}/lfs-verify/{obj['oid']}"},
            }
            objects.append({"oid": obj["oid"], "size": obj["size"], "authenticated": True, "actions": actions})
        self._send(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def _commit(self, repo_id: str, revision: str, body: bytes) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._send(404, {"error": "Repository not found"})
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(item["value"] for item in lines if item["key"] == "header")
        files = {}
        for item in lines:
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "lfsFile":
                blob = self.hub.blobs.get(value["oid"]) or self.hub.xet.files.get(value["oid"])
                if blob is None or len(blob) != value["size"]:
                    return self._send(400, {"error": f"LFS or Xet object {value['oid']} was not uploaded"})
                files[value["path"]] = blob
        with self.hub.lock:
            repo["files"].update(files)
            repo["sha"] = hashlib.sha1(body).hexdigest()
            repo["commits"].append({"summary": header["summary"], "revision": revision, "paths": sorted(files)})
        url = f"{self.hub.url}/datasets/{repo_id}/commit/{repo['sha']}"
        self._send(200, {"commitUrl": url, "commitOid": repo["sha"], "pullRequestUrl": None})

    # -- Xet ---------------------------------------------------------------------------------------------
    def _xet_token(self, repo_id: str) -> None:
        if repo_id not in self.hub.repos:
            return self._send(404, {"error": "Repository not found"})
        # hf_xet reads the JSON body; huggingface_hub reads the same facts from these headers
        info = {"accessToken": self.hub.xet_token, "exp": int(time.time()) + 3600, "casUrl": f"{self.hub.url}/cas"}
        body = json.dumps(info).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Xet-Cas-Url", info["casUrl"])
        self.send_header("X-Xet-Access-Token", info["accessToken"])
        self.send_header("X-Xet-Token-Expiration", str(info["exp"]))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _cas_post(self, path: str) -> None:
        if not self._cas_authorised():
            return
        body = self._body()
        store = self.hub.xet
        try:
            if m := re.fullmatch(rf"/cas/v1/xorb-grants/default/{HASH}", path):
                return self._grant(m["hash"], json.loads(body))
            if m := re.fullmatch(rf"/cas/v1/xorb-commits/default/{HASH}/grant/(?P<grant>[0-9a-f]{{32}})", path):
                with store.lock:
                    grant = store.grants.get(m["grant"])
                if grant is None or grant["xorb"] != m["hash"] or grant["data"] is None:
                    return self._send(404, {"error": "no data was uploaded for this grant"})
                return self._send(200, {"was_inserted": store.add_xorb(m["hash"], grant["data"])})
            if path == "/cas/v2/shards":
                listing = store.add_shard(body)
                return self._ndjson(
                    [
                        {"type": "validating", "verified": len(listing["files"]), "total": len(listing["files"])},
                        {"type": "result"},
                    ]
                )
        except XetFormatError as exc:
            if path == "/cas/v2/shards":  # v2 reports a refused shard in the stream, not in the status
                return self._ndjson([{"type": "error", "message": str(exc), "retryable": False}])
            return self._send(400, {"error": str(exc)})
        self._send(404, {"error": f"no route {path}"})

    def _grant(self, xorb: str, request: dict) -> None:
        store = self.hub.xet
        checksum = request.get("checksum") or {}
        if checksum.get("algo") != "crc64nvme" or not isinstance(request.get("length"), int):
            return self._send(400, {"error": "a grant needs the xorb's length and its crc64nvme checksum"})
        with store.lock:
            if xorb in store.xorbs:
                return self._send(200, {})  # already stored: nothing to upload
            grant = secrets.token_hex(16)
            store.grants[grant] = {
                "xorb": xorb,
                "length": request["length"],
                "crc": int(checksum["value"]),
                "data": None,
            }
        # like an S3 presigned PUT: the URL is the credential, and the client must send exactly the grant's headers
        # (this checksum header is the stand-in's choice; the PUT fails without it)
        headers = {"x-amz-checksum-crc64nvme": base64.b64encode(int(checksum["value"]).to_bytes(8, "big")).decode()}
        url = f"{self.hub.url}/cas/xorb-uploads/{grant}"
        self._send(201, {"id": grant, "method": "PUT", "url": url, "headers": headers})

    def _grant_upload(self, grant_id: str, data: bytes) -> None:
        store = self.hub.xet
        with store.lock:
            grant = store.grants.get(grant_id)
        if grant is None:
            return self._send(403, {"error": "unknown or expired grant"})
        expected = base64.b64encode(grant["crc"].to_bytes(8, "big")).decode()
        if self.headers.get("x-amz-checksum-crc64nvme") != expected:
            return self._send(400, {"error": "the grant's checksum header is missing or altered"})
        if len(data) != grant["length"] or crc64nvme(data) != grant["crc"]:
            return self._send(400, {"error": "the body does not have the granted length and checksum"})
        with store.lock:
            grant["data"] = data
        self._send(200)

    def _ndjson(self, frames: list[dict]) -> None:
        body = b"".join(json.dumps(frame).encode() + b"\n" for frame in frames)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HubServer(LoopbackServer):
    handler_class = HubHandler
    handler_attr = "hub"

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token
        self.lock = threading.Lock()
        self.repos: dict[str, dict] = {}
        self.blobs: dict[str, bytes] = {}
        self.xet = XetStore()
        self.xet_token = f"xet_{secrets.token_hex(16)}"
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization header)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self, method: str, path: str, authorization: str | None) -> None:
        with self.lock:
            self.requests.append((method, path, authorization))
