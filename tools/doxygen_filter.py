#!/usr/bin/env python3
"""doxygen_filter.py HEADER - Doxygen's INPUT_FILTER for nabla's headers.

nabla's headers document each declaration with a plain C comment, written
as preformatted text (the style of the codebases in STYLE.md); Doxygen
reads only its own markers. This filter prints the header with those
comments marked, and changes nothing else. Line numbers are kept, so
Doxygen's warnings point at the source.

- The file's opening comment becomes its @file documentation.
- A comment directly above a declaration (no blank line between) documents
  it. When it sits above a run of one-line declarations, it documents them
  all: a member group, whose text Doxygen copies to each member
  (DISTRIBUTE_GROUP_DOC).
- A comment after a declaration or member, on the same line, documents
  that declaration or member ("/**<").
- Section rules ("/* ---- ... */") and comments followed by a blank line
  stay plain comments.

Each comment's first line becomes its @brief (special characters
escaped), and the whole comment its @details as @verbatim, so the layout
of its code examples and tables is kept.
"""
import os
import re
import sys

SPECIAL = re.compile(r"([\\@<>&#%$])")


def escape(text):
    """A brief's text with Doxygen's special characters taken literally
    (a double quote would open a quoted span that swallows what follows)."""
    return SPECIAL.sub(r"\\\1", text.replace('"', "'"))


def main():
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    n = len(lines)
    out = list(lines)

    def comment_end(i, col):
        """(line, column past the "*/") of the comment that starts at lines[i][col]."""
        j, c = i, lines[i].find("*/", col + 2)
        while c < 0:
            j += 1
            if j >= n:
                return None
            c = lines[j].find("*/")
        return j, c + 2

    def is_decl(line):
        s = line.strip()
        if not s or s.startswith(("/*", "//", "}", "#if", "#endif", "#else", "#elif", "#include", "#ifdef", "#ifndef")):
            return False
        return True

    def one_line_decl(line):
        s = line.strip()
        if s.endswith("\\"):  # a macro continued on the next line
            return False
        return (s.endswith(";") and "(" in s and not s.startswith(("typedef struct", "typedef enum", "struct", "enum"))) \
            or s.startswith("#define")

    def several_declarators(code):
        """A field or variable line declaring more than one name: a comma
        outside brackets and parentheses, before its semicolon."""
        code = code.strip()
        if not code.endswith(";") or code.startswith("#"):
            return False
        depth = 0
        for ch in code:
            depth += ch in "([{"
            depth -= ch in ")]}"
            if ch == "," and depth == 0:
                return True
        return False

    def undecorated(k):
        """Line k of a comment without its leading " * " decoration."""
        return re.sub(r"^(\s*)\*(?!/) ?", r"\1", lines[k])

    def first_sentence(i, col, j, c):
        """The comment's text up to its first full stop (at most 300 characters)."""
        parts = [lines[i][col + 2 : c - 2 if i == j else None]]
        parts += [undecorated(k) for k in range(i + 1, j)]
        if j > i:
            parts.append(undecorated(j)[: len(undecorated(j)) - (len(lines[j]) - c) - 2])
        text = " ".join(p.strip() for p in parts if p.strip())
        m = re.search(r"(?<!e\.g)(?<!i\.e)(?<!et al)\.(\s|$)", text)
        if m:
            text = text[: m.start() + 1]
        return text if len(text) <= 300 else text[:297] + "..."

    def mark(i, col, j, c, marker, extra_close=""):
        """Rewrites the comment lines[i][col:] .. lines[j][:c] as a Doxygen block."""
        brief = escape(first_sentence(i, col, j, c))
        if i == j:
            out[i] = lines[i][:col] + "/*" + marker + " @brief " + brief + " */" + extra_close + lines[i][c:]
            return
        out[i] = lines[i][:col] + "/*" + marker + " @brief " + brief + " @details @verbatim " + lines[i][col + 2 :]
        for k in range(i + 1, j):  # the text keeps its layout, without the " * " margin
            out[k] = undecorated(k)
        last = undecorated(j)
        cut = len(last) - (len(lines[j]) - c)  # where "*/" ends in the undecorated line
        out[j] = last[: cut - 2] + " @endverbatim */" + extra_close + last[cut:]

    i = 0
    first = True
    while i < n:
        line = lines[i]
        s = line.lstrip()
        col = len(line) - len(s)
        if s.startswith("/*") and not s.startswith("/**"):
            end = comment_end(i, col)
            if end is None:
                break
            j, c = end
            rest = lines[j][c:].strip()
            rule = re.match(r"/\*\s*-{3,}", s) is not None
            if first and i < 3:
                mark(i, col, j, c, "* @file " + os.path.basename(sys.argv[1]).replace(".in", ""))
            elif not rule and not rest and j + 1 < n and is_decl(lines[j + 1]):
                k = j + 1  # the run of one-line declarations below it
                while k < n and lines[k].strip() and one_line_decl(lines[k]) and "/*" not in lines[k]:
                    k += 1
                if k - (j + 1) > 1:
                    mark(i, col, j, c, "*@{*/ /**")
                    if lines[k - 1].lstrip().startswith("#define"):  # after a macro it would join its body
                        out[k] = "/**@}*/ " + out[k]
                    else:
                        out[k - 1] = out[k - 1] + " /**@}*/"
                else:
                    mark(i, col, j, c, "*")
            first = False
            i = j + 1
            continue
        # a comment after code on its line documents that code
        m = re.search(r"(;|,|\{|[A-Za-z0-9_)\]])\s*/\*(?!\*)", line)
        if m and line[: m.start() + 1].strip() and (not s.startswith(("#", "/*")) or s.startswith("#define")):
            at = line.index("/*", m.start())
            end = comment_end(i, at)
            if end is not None:
                j, c = end
                code = line[:at]
                if j == i and several_declarators(code):
                    # "int64_t stride, padding; /* text */": the text goes before,
                    # as a group's, so that each declarator gets it
                    text = escape(line[at + 2 : c - 2].strip())
                    out[i] = "/**@{*/ /** @brief " + text + " */ " + code.rstrip() + " /**@}*/" + line[c:]
                else:
                    mark(i, at, j, c, "*<")
                i = j + 1
                first = False
                continue
        if s:
            first = False
        i += 1
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
