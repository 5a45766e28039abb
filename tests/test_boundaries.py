import subprocess
import sys


def test_importing_the_core_pulls_in_no_web_framework() -> None:
    code = (
        "import sys, posenc; "
        "web = ('fastapi', 'pydantic', 'starlette', 'orjson'); "
        "print(sorted(m for m in web if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_public_surface_is_pinned() -> None:
    import posenc

    assert posenc.__all__ == sorted(posenc.__all__, key=lambda name: (not name.isupper(), name))
    assert all(hasattr(posenc, name) for name in posenc.__all__)
