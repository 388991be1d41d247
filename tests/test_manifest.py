"""The manifest refuses credentials but keeps ordinary settings whose names merely look alike."""

import pytest

from suber_data.artifacts import read_manifest, record_step
from suber_data.errors import SuberDataError


@pytest.mark.parametrize("name", ["api_key", "TMDB_API_KEY", "access_token", "bearer", "password", "client_secret"])
def test_credentials_are_refused(tmp_path, name):
    with pytest.raises(SuberDataError, match="credential"):
        record_step(tmp_path, "step", fingerprint="f", settings={"nested": {name: "x"}})
    assert not (tmp_path / "manifest.json").exists()


def test_settings_that_only_look_alike_are_kept(tmp_path):
    record_step(tmp_path, "step", fingerprint="f", settings={"max_tokens": 300, "tokenizer": "t5"})
    assert read_manifest(tmp_path)["steps"]["step"]["settings"] == {"max_tokens": 300, "tokenizer": "t5"}
