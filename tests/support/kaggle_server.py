"""A loopback stand-in for Kaggle's dataset download API: the FileServer, behind HTTP basic auth.

``KaggleServer(root, username, key)`` answers ``GET /api/v1/datasets/download/<owner>/<dataset>`` with the file
at that path under ``root`` (the dataset's zip), and 401 with ``WWW-Authenticate: Basic`` when the
Authorization header does not carry those credentials, as Kaggle does. ``api_url`` is the API base.
"""

from __future__ import annotations

import base64
from pathlib import Path

from tests.support.file_server import FileServer, _FileHandler


class _KaggleHandler(_FileHandler):
    server_version = "kaggle-test-server/1.0"

    def _serve(self, method: str) -> None:
        srv = self.srv
        if self.headers.get("Authorization") != srv.expected_auth:
            srv.unauthorized += 1
            return self._error(401, {"WWW-Authenticate": 'Basic realm="kaggle"'})
        super()._serve(method)


class KaggleServer(FileServer):
    handler_class = _KaggleHandler

    def __init__(self, root: str | Path, username: str, key: str) -> None:
        super().__init__(root)
        self.expected_auth = "Basic " + base64.b64encode(f"{username}:{key}".encode()).decode()
        self.unauthorized = 0

    @property
    def api_url(self) -> str:
        return self.base_url + "api/v1"
