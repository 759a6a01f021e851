"""The text corpus of the character-level language model: Debian's `fortunes` package.

Why this corpus: it installs with `apt-get install fortunes` (no download outside the
distribution), it is 2.4 MB of real English prose, verse, quotations and dialogue written by
people (about twice Tiny Shakespeare), and it is plain text in files of their own. The files are
read in name order; `ascii-art` (pictures drawn with characters, not language) is left out. The
cookies' `%` separator lines become blank lines. Validation is the last tenth of the text,
training the rest, so no cookie is in both.
"""
import os

DEFAULT_DIR = "/usr/share/games/fortunes"
SKIPPED = {"ascii-art"}


class CorpusError(Exception):
    pass


def read_corpus(directory=DEFAULT_DIR):
    """Returns the corpus as one string; raises CorpusError naming the directory or file."""
    if not os.path.isdir(directory):
        raise CorpusError(f"{directory}: no such directory (apt-get install fortunes)")
    names = sorted(n for n in os.listdir(directory)
                   if "." not in n and n not in SKIPPED
                   and os.path.isfile(os.path.join(directory, n)))
    if not names:
        raise CorpusError(f"{directory}: no fortune files in it (apt-get install fortunes)")
    parts = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise CorpusError(f"{path}: {e.strerror}") from e
        parts.append("\n".join("" if line == "%" else line for line in text.split("\n")))
    return "\n".join(parts)


class Vocabulary:
    """Characters of the corpus, sorted: the same ids on every rank."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        return [self.index[c] for c in text]


def split(ids, validation_fraction=0.1):
    cut = int(len(ids) * (1 - validation_fraction))
    return ids[:cut], ids[cut:]
