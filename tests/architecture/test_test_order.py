"""The files that take longest start first: each file LONGEST_FIRST names exists, and `make test` keeps the order."""

from tests.conftest import LONGEST_FIRST, REPO


def test_the_longest_files_exist_and_make_test_hands_them_out_first():
    assert [path for path in LONGEST_FIRST if not (REPO / path).is_file()] == []
    runs = [line for line in (REPO / "Makefile").read_text().splitlines() if "-m pytest" in line and " -n " in line]
    assert len(runs) == 2 and all("--dist loadfile --no-loadscope-reorder" in line for line in runs), runs


def test_the_collection_starts_with_them(request):
    files = list(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in request.session.items))
    present = [path for path in LONGEST_FIRST if path in files]
    assert files[:len(present)] == present
