"""The source layer through the real HTTP client against a loopback file server."""

import hashlib
import zipfile

import pytest

from suber_data.errors import ChecksumError, SourceError
from suber_data.sources import Release, blob_path, cached_path, extract_zip, fetch, get_release
from suber_data.sources.download import _remember
from tests.support.file_server import FileServer

SMALL_SHA = "696d65a3dfceac7c45750ad32df2c259311949efec81f0f144fdfb91ebc9e436"


def test_download_through_http_mirror_is_verified_and_cached(env, shared_movielens, monkeypatch):
    with FileServer(shared_movielens) as fs:
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        path = fetch("ml-latest-small", progress=False)
        assert path == blob_path(SMALL_SHA, "ml-latest-small.zip")
        assert path.stat().st_size == 978_202
        assert fs.requests_by_path["ml-latest-small.zip"] == 1
        assert fetch("ml-latest-small", progress=False) == path  # second time: the cache, no request
        assert fs.requests == 1


def test_cut_transfer_resumes_with_range(env, shared_movielens, monkeypatch):
    with FileServer(shared_movielens) as fs:
        fs.cut_after("ml-latest-small.zip", 400_000)
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        path = fetch("ml-latest-small", progress=False)
        assert cached_path(get_release("ml-latest-small")) == path
        resumed = [h for h in fs.range_headers if h]
        assert resumed and resumed[0].startswith("bytes=") and int(resumed[0][6:].rstrip("-")) > 0


def test_transient_status_is_retried(env, shared_movielens, monkeypatch):
    with FileServer(shared_movielens) as fs:
        fs.fail("ml-latest-small.zip", times=2, status=503)
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        path = fetch("ml-latest-small", progress=False)
        assert path == blob_path(SMALL_SHA, "ml-latest-small.zip")
        assert fs.requests_by_path["ml-latest-small.zip"] == 3  # two 503s, then the file


def test_corrupted_file_is_deleted_and_retried_once(env, shared_movielens, monkeypatch):
    with FileServer(shared_movielens) as fs:
        fs.corrupt("ml-latest-small.zip", times=1)
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        assert fetch("ml-latest-small", progress=False).exists()
        assert fs.requests_by_path["ml-latest-small.zip"] == 2


def test_corrupted_twice_fails_clearly_and_keeps_nothing(env, shared_movielens, monkeypatch):
    release = Release("ml-test-corrupt", "http://127.0.0.1:9/none/ml-latest-small.zip", "movielens", sha256=SMALL_SHA)
    with FileServer(shared_movielens) as fs:
        fs.corrupt("ml-latest-small.zip", times=5)
        monkeypatch.setenv("SUBER_DATA_MIRROR", fs.base_url)
        with pytest.raises(ChecksumError, match="sha256") as info:
            fetch(release, progress=False)
    assert "ml-latest-small.zip" in str(info.value)
    assert cached_path(release) is None
    assert not any((env / "cache" / "partial").iterdir())


def test_offline_missing_file_names_file_checksum_and_place(env, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    with pytest.raises(SourceError) as info:
        fetch("ml-latest-small", progress=False)
    message = str(info.value)
    assert "ml-latest-small.zip" in message and SMALL_SHA in message and "SUBER_DATA_MIRROR" in message


def test_local_folder_mirror_works_offline(env, shared_movielens, monkeypatch):
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(shared_movielens))
    assert fetch("ml-latest-small", progress=False).name == "ml-latest-small.zip"


def _zip(path, members: dict[str, bytes], link: str | None = None):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo("innocent-link")
            info.external_attr = 0o120777 << 16  # a symbolic link
            zf.writestr(info, link)
    return path


@pytest.mark.parametrize(
    "members,link,match",
    [
        ({"../evil.txt": b"x"}, None, r"\.\."),
        ({"/etc/evil.txt": b"x"}, None, "absolute"),
        ({"ok.txt": b"x"}, "/etc/passwd", "symbolic link"),
    ],
)
def test_unsafe_archives_are_refused_and_leave_nothing(tmp_path, members, link, match):
    archive = _zip(tmp_path / "bad.zip", members, link)
    with pytest.raises(SourceError, match=match):
        extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "evil.txt").exists()


def test_truncated_zip_is_a_clear_error(tmp_path, shared_movielens):
    data = (shared_movielens / "ml-latest-small.zip").read_bytes()
    (tmp_path / "cut.zip").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match="zip"):
        extract_zip(tmp_path / "cut.zip", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_damaged_unpinned_zip_on_a_mirror_never_enters_the_cache(env, shared_movielens, monkeypatch):
    """Issue 25, item 6: an unpinned release (no checksum to hold it to) must still be a whole zip before it is
    cached; the error names the mirror file and the fix, and the corrected mirror is read on the next run."""
    release = Release("ml-test-unpinned", "https://example.invalid/ml-unpinned.zip", "movielens")
    whole = (shared_movielens / "ml-latest-small.zip").read_bytes()
    mirror = env / "mirror"
    mirror.mkdir()
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(mirror))
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF  # same size, one member's data damaged: its CRC fails
    for damaged in (whole[: len(whole) // 3], bytes(flipped)):
        (mirror / "ml-unpinned.zip").write_bytes(damaged)
        with pytest.raises(SourceError) as info:
            fetch(release, progress=False)
        message = str(info.value)
        assert "\n" not in message and "not a whole zip archive" in message, message
        assert f"replace {mirror / 'ml-unpinned.zip'} with a whole copy of {release.url}" in message, message
        assert cached_path(release) is None
        assert not (env / "cache" / "sha256").exists() or not any((env / "cache" / "sha256").rglob("*.zip"))
    (mirror / "ml-unpinned.zip").write_bytes(whole)  # the mirror corrected: picked up, nothing to delete by hand
    assert fetch(release, progress=False) == blob_path(SMALL_SHA, "ml-unpinned.zip")


def test_a_damaged_unpinned_zip_already_cached_is_dropped_and_fetched_again(env, shared_movielens, monkeypatch):
    """A damaged copy that an older version let into the cache is thrown away on use, not served again."""
    release = Release("ml-test-unpinned", "https://example.invalid/ml-unpinned.zip", "movielens")
    whole = (shared_movielens / "ml-latest-small.zip").read_bytes()
    cut = whole[: len(whole) // 3]
    sha = hashlib.sha256(cut).hexdigest()
    blob_path(sha, release.filename).parent.mkdir(parents=True)
    blob_path(sha, release.filename).write_bytes(cut)
    _remember(release, sha)
    (env / "mirror").mkdir()
    (env / "mirror" / "ml-unpinned.zip").write_bytes(whole)
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_MIRROR", str(env / "mirror"))
    assert fetch(release, progress=False) == blob_path(SMALL_SHA, "ml-unpinned.zip")
    assert not blob_path(sha, release.filename).exists()
