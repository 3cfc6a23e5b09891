import re
import subprocess
import sys
import tomllib

from cardrag.app.command import APP_MODULES
from cardrag.ingest.settings import PROJECT_ROOT


def _run_without(module: str) -> subprocess.CompletedProcess[str]:
    """The command's entry point in a fresh interpreter where ``module`` cannot be imported."""
    code = (
        f"import sys; sys.modules[{module!r}] = None;"
        "from cardrag.app.command import main; sys.exit(main(['ask', 'Can I take it with food?']))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_without_the_app_extra_the_command_names_it_in_one_line_and_exits_2() -> None:
    done = _run_without("langgraph")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "cardrag: the card app needs its extra (no module 'langgraph'): "
        "pip install 'cardrag[app]'\n"
    )


def test_a_missing_module_of_our_own_is_a_real_error_not_a_missing_extra() -> None:
    done = _run_without("cardrag.app.graph")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("ModuleNotFoundError: import of cardrag.app")


def test_the_modules_named_are_exactly_the_app_and_chroma_extras_packages() -> None:
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {
        re.split(r"[<>=\[ ]", requirement)[0].replace("-", "_")
        for requirement in extras["app"] + extras["chroma"]
        if not requirement.startswith("cardrag")
    }
    assert names == APP_MODULES
