"""Read a DeepSpeed config file exactly as DeepSpeed 0.19.8 does: hjson 3.1.0 plus a duplicate-key refusal.

DeepSpeed (deepspeed.initialize -> load_ds_config / DeepSpeedConfig) reads a config path with
`hjson.load(open(path), object_pairs_hook=dict_raise_error_on_duplicate_keys)`, so `//`, `#` and `/* */`
comments, trailing commas, unquoted keys, a root without braces and quoteless values are all valid, and
a quoteless value runs to the end of its line (`"device": cpu,` is the string "cpu,").

This is a line-by-line port of the hjson-py 3.1.0 decoder (MIT licence, hjson/decoder.py), quirks
included, standard library only. Checked against hjson and DeepSpeed by tests/data/deepspeed_cases.json.
Errors carry hjson's own message and a 1-based line and column.
"""

from __future__ import annotations

import re

# =====================================================================================
# Parser: port of hjson-py 3.1.0 decoder + DeepSpeed's duplicate-key hook
# =====================================================================================
class ConfigParseError(ValueError):
    """Raised where DeepSpeed's hjson load would raise. str(): 'LINE:COL: message'."""

    def __init__(self, msg, doc, pos, fatal=False):
        self.msg = msg
        # fatal: hjson itself raises something other than HjsonDecodeError here (IndexError,
        # OverflowError, the duplicate-key ValueError), which skips hjson's root fallback.
        self.fatal = fatal
        self.pos = pos
        self.line, self.col = _linecol(doc, pos)
        super().__init__(f"{self.line}:{self.col}: {msg}")


def _linecol(doc, pos):
    pos = max(0, min(pos, len(doc)))
    line = doc.count("\n", 0, pos) + 1
    col = pos + 1 if line == 1 else pos - doc.rindex("\n", 0, pos)
    return line, col


_WS = " \t\n\r"
_PUNCT = "{}[],:"
_NUMBER_RE = re.compile(r"[\t ]*(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?[\t ]*")
_CHUNK_RE = re.compile(r"(.*?)(['\"\\\x00-\x1f])", re.VERBOSE | re.MULTILINE | re.DOTALL)
_ESC = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class TooManyValues(ValueError):
    """More values than the caller's budget (read_with_marks(max_values=...)): hjson would go on; zeroplan
    stops, so a file's cost is bounded by the work it takes, not only by its bytes."""

    def __init__(self, limit):
        super().__init__(f"more than {limit:,} values")
        self.limit = limit


class _Parser:

    def __init__(self, s, collect_duplicates=False, max_values=None):
        self.s = s
        self.max_values = max_values
        self.values = 0
        # The last (position, line, position of the newline before it) a key was placed at: keys come in file
        # order, so each one's line and column is counted from the last, not from the start (linear, not
        # quadratic, in the number of keys).
        self._last = (0, 1, -1)
        # Where each key sits: key path -> (line, column) of its first occurrence; the path of a key
        # inside a list holds the item's index as text.
        self.path: list[str] = []
        self.marks: dict[tuple[str, ...], tuple[int, int]] = {}
        # collect_duplicates: record (path, (line, column) of the second occurrence) instead of raising,
        # so a checker can report every duplicate; the last value wins, as without DeepSpeed's hook.
        self.collect_duplicates = collect_duplicates
        self.duplicates: list[tuple[tuple[str, ...], tuple[int, int]]] = []

    def linecol(self, pos):
        """_linecol(self.s, pos), counted on from the previous key's position when it is not behind it."""
        last_pos, line, newline = self._last
        if pos < last_pos:
            found_line, col = _linecol(self.s, pos)
            return found_line, col
        pos = min(pos, len(self.s))
        line += self.s.count("\n", last_pos, pos)
        found = self.s.rfind("\n", last_pos, pos)
        newline = found if found >= 0 else newline
        self._last = (pos, line, newline)
        return line, pos - newline

    def err(self, msg, pos, fatal=False):
        # hjson's errmsg replaces %r with repr of the char at pos
        return ConfigParseError(msg.replace("%r", repr(self.s[pos:pos + 1])), self.s, pos, fatal)

    # -- whitespace and comments (getNext) --
    def next(self, end):
        s = self.s
        while True:
            ch = s[end:end + 1]
            while ch in _WS:
                if ch == "":
                    return ch, end
                end += 1
                ch = s[end:end + 1]
            ch2 = s[end + 1:end + 2]
            if ch == "#" or (ch == "/" and ch2 == "/"):
                end = self.eol(end)
            elif ch == "/" and ch2 == "*":
                start = end
                end += 2
                # hjson indexes s[end] / s[end+1] here and dies with IndexError when
                # the comment is not closed; DeepSpeed then fails with that IndexError.
                if end >= len(s):
                    raise self.err("Unterminated /* comment (hjson: IndexError string index out of range)", start, True)
                ch = s[end]
                while ch != "" and not (ch == "*" and s[end + 1:end + 2] == "/"):
                    if ch == "*" and end + 1 >= len(s):
                        raise self.err("Unterminated /* comment (hjson: IndexError string index out of range)", start, True)
                    end += 1
                    if end >= len(s):
                        raise self.err("Unterminated /* comment (hjson: IndexError string index out of range)", start, True)
                    ch = s[end]
                end += 2
            else:
                break
        return ch, end

    def eol(self, end):
        s = self.s
        while True:
            ch = s[end:end + 1]
            if ch in ("\r", "\n", ""):
                return end
            end += 1

    def skip_indent(self, end, n):
        s = self.s
        ch = s[end:end + 1]
        while ch != "" and ch in " \t\r" and (n > 0 or n < 0):
            end += 1
            n -= 1
            ch = s[end:end + 1]
        return end

    # -- strings --
    def string(self, end):
        """end: index after the opening quote (either ' or ")."""
        s = self.s
        chunks = []
        begin = end - 1
        exit_ch = s[begin]
        while True:
            m = _CHUNK_RE.match(s, end)
            if m is None:
                raise self.err("Unterminated string starting at", begin)
            end = m.end()
            content, term = m.groups()
            if content:
                chunks.append(content)
            if term == exit_ch:
                break
            if term in "\"'":
                chunks.append(term)
                continue
            if term != "\\":
                raise self.err("Invalid control character %r at", end)
            if end >= len(s):
                raise self.err("Unterminated string starting at", begin)
            esc = s[end]
            if esc != "u":
                if esc not in _ESC:
                    raise self.err("Invalid \\X escape sequence %r", end)
                ch = _ESC[esc]
                end += 1
            else:
                msg = "Invalid \\uXXXX escape sequence"
                esc = s[end + 1:end + 5]
                if len(esc) != 4 or esc[1:2] in ("x", "X"):
                    raise self.err(msg, end - 1)
                try:
                    uni = int(esc, 16)
                except ValueError:
                    raise self.err(msg, end - 1) from None
                end += 5
                if uni & 0xFC00 == 0xD800 and s[end:end + 2] == "\\u":
                    esc2 = s[end + 2:end + 6]
                    if len(esc2) == 4 and esc2[1:2] not in ("x", "X"):
                        try:
                            uni2 = int(esc2, 16)
                        except ValueError:
                            raise self.err(msg, end) from None
                        if uni2 & 0xFC00 == 0xDC00:
                            uni = 0x10000 + (((uni - 0xD800) << 10) | (uni2 - 0xDC00))
                            end += 6
                ch = chr(uni)
            chunks.append(ch)
        return "".join(chunks), end

    def ml_string(self, end):
        """''' multiline string; end points at the first quote."""
        s = self.s
        string = ""
        triple = 0
        indent = 0
        while True:  # (negative indexes wrap exactly as in hjson)
            ch = s[end - indent - 1]
            if ch == "\n":
                break
            indent += 1
        end = self.skip_indent(end + 3, -1)
        ch = s[end] if end < len(s) else ""
        if ch == "\n":
            end = self.skip_indent(end + 1, indent)
        while True:
            ch = s[end:end + 1]
            if ch == "":
                raise self.err("Bad multiline string", end)
            elif ch == "'":
                triple += 1
                end += 1
                if triple == 3:
                    if string and string[-1] == "\n":
                        string = string[:-1]
                    return string, end
                continue
            else:
                while triple > 0:
                    string += "'"
                    triple -= 1
            if ch == "\n":
                string += ch
                end = self.skip_indent(end + 1, indent)
            else:
                if ch != "\r":
                    string += ch
                end += 1

    # -- quoteless values: true/false/null/number/string-to-end-of-line (scantfnns) --
    def tfnns(self, end):
        s = self.s
        chf, begin = self.next(end)
        end = begin
        if chf in _PUNCT:  # note: '' is "in" every string, as in hjson
            raise self.err("Found a punctuator character when expecting a quoteless string (check your syntax)", end)
        while True:
            ch = s[end:end + 1]
            is_eol = ch in ("\r", "\n", "")
            if (is_eol or ch in (",", "}", "]", "#")
                    or (ch == "/" and s[end + 1:end + 2] in ("/", "*"))):
                m = None
                word = s[begin:end].strip()
                if chf == "n" and word == "null":
                    return None, end
                if chf == "t" and word == "true":
                    return True, end
                if chf == "f" and word == "false":
                    return False, end
                if chf == "-" or "0" <= chf <= "9":
                    m = _NUMBER_RE.match(s, begin)
                if m is not None and m.end() == end:
                    integer, frac, exp = m.groups()
                    try:
                        if frac or exp:
                            res = float(integer + (frac or "") + (exp or ""))
                            # hjson: integral floats below 1e10 become int; int(inf) -> OverflowError
                            if int(res) == res and abs(res) < 1e10:
                                res = int(res)
                        else:
                            res = int(integer)
                    except (OverflowError, ValueError) as e:
                        raise self.err(f"Number not representable ({type(e).__name__}: {e})", begin, True) from None
                    return res, end
                if is_eol:
                    return s[begin:end].strip(), end
            end += 1

    def key(self, end):
        s = self.s
        ch, end = self.next(end)
        if ch in ('"', "'"):
            return self.string(end + 1)
        begin = end
        space = -1
        while True:
            ch = s[end:end + 1]
            if ch == "":
                raise self.err("Bad key name (eof)", end)
            elif ch == ":":
                if begin == end:
                    raise self.err("Found ':' but no key name (for an empty key name use quotes)", begin)
                elif space >= 0:
                    if space != end - 1:
                        raise self.err("Found whitespace in your key name (use quotes to include)", space)
                    return s[begin:end].rstrip(), end
                return s[begin:end], end
            elif ch in _WS:
                if space < 0 or space == end - 1:
                    space = end
            elif ch in "{}[],":
                raise self.err("Found '" + ch + "' where a key name was expected (check your syntax or use quotes "
                               "if the key name includes {}[],: or whitespace)", begin)
            end += 1

    def value(self, idx):
        s = self.s
        self.values += 1
        if self.max_values is not None and self.values > self.max_values:
            raise TooManyValues(self.max_values)
        if idx < 0 or idx >= len(s):
            raise self.err("Expecting value", idx)
        ch = s[idx]
        if ch in ('"', "'"):
            if s[idx:idx + 3] == "'''":
                return self.ml_string(idx)
            return self.string(idx + 1)
        if ch == "{":
            return self.obj(idx + 1)
        if ch == "[":
            return self.array(idx + 1)
        return self.tfnns(idx)

    def obj(self, end, without_braces=False):
        pairs = []
        start = end
        ch, end = self.next(end)
        if not without_braces and ch == "}":
            return {}, end + 1
        while True:
            key_pos = self.next(end)[1]
            k, end = self.key(end)
            ch, end = self.next(end)
            if ch != ":":
                raise self.err("Expecting ':' delimiter", end)
            ch, end = self.next(end + 1)
            key_path = (*self.path, k)
            if key_path not in self.marks:
                self.marks[key_path] = self.linecol(key_pos)
            self.path.append(k)
            v, end = self.value(end)
            self.path.pop()
            pairs.append((k, v, key_pos))
            ch, end = self.next(end)
            if ch == ",":
                ch, end = self.next(end + 1)
            if without_braces:
                if ch == "":
                    break
            elif ch == "}":
                end += 1
                break
            ch, end = self.next(end)
        return self.dedupe(pairs, start), end

    def dedupe(self, pairs, start):
        # DeepSpeed's object_pairs_hook=dict_raise_error_on_duplicate_keys
        d = {}
        dups = []
        first_dup_pos = None
        for k, v, pos in pairs:
            if k in d and k not in dups:
                dups.append(k)
                first_dup_pos = pos if first_dup_pos is None else first_dup_pos
            d[k] = v
        if dups and self.collect_duplicates:
            seen = set()
            for k, _, pos in pairs:
                if k in seen:
                    self.duplicates.append(((*self.path, k), _linecol(self.s, pos)))
                seen.add(k)
            return d
        if dups:
            order = []
            for k, _, _ in pairs:  # Counter order == first-occurrence order
                if k in dups and k not in order:
                    order.append(k)
            raise self.err("Duplicate keys in DeepSpeed config: {}".format(order), first_dup_pos, True)
        return d

    def array(self, end):
        values: list = []
        ch, end = self.next(end)
        if ch == "]":
            return values, end + 1
        if ch == "":
            raise self.err("End of input while parsing an array (did you forget a closing ']'?)", end)
        while True:
            self.path.append(str(len(values)))
            v, end = self.value(end)
            self.path.pop()
            values.append(v)
            ch, end = self.next(end)
            if ch == ",":
                ch, end = self.next(end + 1)
            if ch == "]":
                end += 1
                break
            ch, end = self.next(end)
        return values, end

    def document(self):
        s = self.s
        idx = 0
        if s[:1] == "\ufeff":
            idx = 1
        elif s[:3] == "\xef\xbb\xbf":
            idx = 3
        start = idx
        ch, idx = self.next(idx)
        if start == 0 and ch == "":
            return {}, 0
        if ch in ("{", "["):
            return self.value(idx)
        try:  # root object without braces
            return self.obj(idx, without_braces=True)
        except ConfigParseError as e:
            if e.fatal:
                raise
            self.path, self.marks, self.duplicates, self.values, self._last = [], {}, [], 0, (0, 1, -1)
            try:  # single value (true/false/null/number/string)
                return self.value(idx)
            except Exception:
                raise e from None


class ParsedConfig:
    """A DeepSpeed config file as DeepSpeed reads it, with where each key sits and every duplicate key."""

    def __init__(self, data, marks, duplicates):
        self.data = data
        self.marks: dict[tuple[str, ...], tuple[int, int]] = marks
        self.duplicates: list[tuple[tuple[str, ...], tuple[int, int]]] = duplicates


def _normalise(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")  # DeepSpeed opens the file in text mode


def _parse(text, collect_duplicates, max_values=None):
    p = _Parser(text, collect_duplicates, max_values)
    obj, end = p.document()
    ch, end = p.next(end)
    if end != len(text):
        raise p.err("Extra data", end)
    return obj, p


def read_deepspeed_config(text):
    """Parse config file text the way DeepSpeed 0.19.8 does (hjson 3.1.0 + duplicate-key refusal).

    `text` may be raw file text: newlines are translated as Python's text-mode open() does.
    Returns the parsed value (a dict for any usable config; DeepSpeed refuses lists and scalars later).
    Raises ConfigParseError (a ValueError) whose str() starts with 'LINE:COL:'.
    """
    return _parse(_normalise(text), False)[0]


def read_with_marks(text, max_values=None) -> ParsedConfig:
    """Like read_deepspeed_config, but duplicate keys are collected (ParsedConfig.duplicates), not raised.

    A file with duplicates is still one DeepSpeed refuses: the caller reports them. max_values: raise
    TooManyValues past that many values (keys' values, array items, the root).
    """
    text = _normalise(text)
    data, parser = _parse(text, True, max_values)
    return ParsedConfig(data, parser.marks, parser.duplicates)
