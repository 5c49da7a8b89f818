"""make test-portable: nbval under each CPU code path, one job per (path, notebook), each job with
that path's environment on its own copy of the notebook."""

import nbformat
import pytest

from lmcore.course.build import portable


def test_the_paths_vary_pytorchs_kernels_and_mkls_path():
    assert portable.PATHS["default"] == {"ATEN_CPU_CAPABILITY": "default"}
    assert portable.PATHS["avx2-mkl"] == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": portable.mkl_path()}


@pytest.mark.parametrize(
    "capability, path",
    [("AVX512", "AVX2"), ("avx512_vnni", "AVX2"), ("AVX2", "COMPATIBLE"), ("DEFAULT", "COMPATIBLE")],
)
def test_mkl_is_moved_off_the_machines_own_path(capability, path):
    assert portable.mkl_path(capability) == path


def test_mkl_path_refuses_a_capability_that_is_not_a_string():
    with pytest.raises(TypeError, match="capability"):
        portable.mkl_path(512)


def test_notebooks_are_chosen_by_glob_and_a_glob_that_matches_none_is_refused(tmp_path):
    for name in ("03_a.ipynb", "05_b.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in portable._notebooks(tmp_path, ["03_*"])] == ["03_a.ipynb"]
    assert len(portable._notebooks(tmp_path, ["*"])) == 2
    with pytest.raises(ValueError, match="match no notebook"):
        portable._notebooks(tmp_path, ["99_*"])


def _env_notebook(path, printed):
    cell = nbformat.v4.new_code_cell(
        "import os\nprint(os.environ['LMCORE_PATH_TEST'], os.environ['OMP_NUM_THREADS'])"
    )
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)


@pytest.mark.slow  # four kernels, two at a time: about 15 s
def test_each_job_runs_nbval_with_its_paths_environment_and_a_failure_is_reported(tmp_path):
    _env_notebook(tmp_path / "a.ipynb", "one 1\n")
    _env_notebook(tmp_path / "b.ipynb", "two 1\n")
    paths = {"one": {"LMCORE_PATH_TEST": "one"}, "two": {"LMCORE_PATH_TEST": "two"}}
    notebooks = [tmp_path / "a.ipynb", tmp_path / "b.ipynb"]
    said = []
    results = portable.run_paths(notebooks, tmp_path / "out", paths, jobs=2, cwd=tmp_path, log=said.append)
    passed = {key for key, (code, _, summary) in results.items() if code == 0 and "1 passed" in summary}
    assert passed == {("one", "a.ipynb"), ("two", "b.ipynb")}, results
    assert results[("one", "b.ipynb")][0] == 1 and "1 failed" in results[("one", "b.ipynb")][2]
    assert "one 1" in (tmp_path / "out" / "one" / "b.log").read_text()  # what the kernel printed
    assert len(said) == 4 and sum(line.startswith("FAIL") for line in said) == 2
