"""``python -m app.cli``: the same entry as the ``codec-lens`` script."""

from app.cli import entry

if __name__ == "__main__":
    entry()
