"""``python -m posenc``: the command line, where the ``posenc`` script is not on the PATH."""

from posenc.cli import main

if __name__ == "__main__":
    main(prog_name="posenc")
