"""Generate specialised Python encode/decode functions for a schema struct at one version.

`codec` compiles each (api, version, direction) once through `compile_decoder` /
`compile_encoder`: runs of fixed-width fields become one `struct` call, string and array reads are
inlined, and fields absent from the version cost nothing on the wire. The generated source is kept
on each function as `__source__` for debugging.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable
from typing import Any

from . import primitives as _p
from .primitives import ProtocolError
from .schema import Field, default_for

__all__ = ["FrozenArray", "compile_decoder", "compile_encoder", "records_bytes"]

_FIXED = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "uuid": "16s",
}


# Records given as `bytes` at least this large are not copied into the encoded response.
_DETACH_BYTES = 8192


def _uuid_from(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


def _uuid_bytes(value: uuid.UUID) -> bytes:
    return value.bytes


# Arrays of fixed-width numbers shorter than this (replica lists, offsets) are packed and
# unpacked by a Struct made once per length, not by a format string built for each array.
_SMALL_ARRAY = 32


@functools.cache
def _small_array_packs(code: str) -> tuple[Callable[..., bytes], ...]:
    return tuple(struct.Struct(f">{n}{code}").pack for n in range(_SMALL_ARRAY))


@functools.cache
def _small_array_unpacks(code: str) -> tuple[Callable[..., tuple], ...]:
    return tuple(struct.Struct(f">{n}{code}").unpack_from for n in range(_SMALL_ARRAY))


def records_bytes(value: Any) -> bytes | bytearray | memoryview:
    """Records inside a buffer that must be contiguous: read a RecordsSource into memory."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value
    return value.read()


class FrozenArray(list):
    """A struct array that no one changes once built, shared by many responses (a topic's
    partitions in Metadata): each encoder that meets it keeps its encoding here and copies
    that bytes string the next time, instead of walking thousands of dicts again."""

    __slots__ = ("_encodings",)

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self._encodings: dict[_ArrayEncoder, bytes] = {}

    def encoded(self, encoder: _ArrayEncoder) -> bytes:
        done = self._encodings.get(encoder)
        if done is None:
            done = self._encodings[encoder] = bytes(encoder.fn(bytearray(), self, []))
        return done


class _ArrayEncoder:
    """One struct-array field at one version, compiled on the first FrozenArray it encodes."""

    def __init__(self, f: Field, version: int, flexible: bool) -> None:
        self.field, self.version, self.flexible = f, version, flexible
        self._fn: Callable[..., bytearray] | None = None

    @property
    def fn(self) -> Callable[..., bytearray]:
        if self._fn is None:
            c = _Compiler(self.version, self.flexible)
            c.emit(0, "def encode(out, v, parts):")
            c.write_field(1, "out", "v", self.field, detach=False, frozen=False)
            c.emit(1, "return out")
            self._fn = c.build("encode")
        return self._fn


def _holds_records(fields: tuple[Field, ...]) -> bool:
    return any(
        f.type == "records" or ((f.is_struct or f.is_struct_array) and _holds_records(f.fields))
        for f in fields
    )


class _Compiler:
    """Generates the source of one decode or encode function for a struct at one version."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.ns: dict[str, Any] = {
            "_PE": ProtocolError,
            "_ruv": _p.read_uvarint,
            "_wuv": _p.write_uvarint,
            "_skip": _p.skip_tagged_fields,
            "_i16": _p.INT16,
            "_i32": _p.INT32,
            "_i8": _p.INT8,
            "_uuid_from": _uuid_from,
            "_uuid_bytes": _uuid_bytes,
            "_rec_bytes": records_bytes,
            "_Frozen": FrozenArray,
            "_spack": struct.pack,
            "_sunpack": struct.unpack_from,
            "_UTF8": "utf-8",
        }
        self._n = 0
        self._consts: dict[tuple[type, Any], str] = {}

    # -- helpers ---------------------------------------------------------------------------

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, value: Any) -> str:
        try:
            key = (type(value), value)
            if key in self._consts:
                return self._consts[key]
        except TypeError:
            key = None
        name = self.var("_k")
        self.ns[name] = value
        if key is not None:
            self._consts[key] = name
        return name

    def emit(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)

    def present(self, f: Field) -> bool:
        return self.version in f.versions or self.is_tagged(f)

    def is_tagged(self, f: Field) -> bool:
        return self.flexible and f.tag is not None and self.version in f.tagged

    def nullable(self, f: Field) -> bool:
        return self.version in f.nullable or f.type == "records"

    def default_expr(self, f: Field) -> str:
        """An expression building a fresh default value for `f` (fresh, as dicts/lists mutate)."""
        if f.is_struct_array or f.is_primitive_array:
            d = default_for(f, self.version)
            return "None" if d is None else ("[]" if d == [] else f"list({self.const(tuple(d))})")
        if f.is_struct:
            d = default_for(f, self.version)
            if d is None:
                return "None"
            return self.struct_default_expr(f.fields)
        return self.const(default_for(f, self.version))

    def struct_default_expr(self, fields: tuple[Field, ...]) -> str:
        items = ", ".join(f"{f.name!r}: {self.default_expr(f)}" for f in fields)
        return "{" + items + "}"

    def default_value(self, f: Field) -> Any:
        """The default as a value, to compare tagged fields against before writing them."""
        if f.is_struct:
            d = default_for(f, self.version)
            if d is None:
                return None
            return {sub.name: self.default_value(sub) for sub in f.fields}
        return default_for(f, self.version)

    # -- decoding --------------------------------------------------------------------------

    def read_uvarint(self, ind: int, target: str) -> None:
        # One- and two-byte varints inline (lengths up to 16 KiB); longer ones call out.
        self.emit(ind, f"{target} = buf[pos]")
        self.emit(ind, f"if {target} < 128:")
        self.emit(ind + 1, "pos += 1")
        self.emit(ind, "elif buf[pos + 1] < 128:")
        self.emit(ind + 1, f"{target} = ({target} & 127) | (buf[pos + 1] << 7)")
        self.emit(ind + 1, "pos += 2")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{target}, pos = _ruv(buf, pos)")

    def read_length(self, ind: int, target: str, kind: str, nullable: bool, what: str) -> None:
        """Read a string/bytes length or array count into `target` (-1 = null), validated."""
        if self.flexible:
            self.read_uvarint(ind, target)
            self.emit(ind, f"{target} -= 1")
            if not nullable:
                self.emit(ind, f"if {target} < 0:")
                self.emit(ind + 1, f"raise _PE({what + ': null in a non-nullable field'!r})")
        else:
            fmt = "_i16" if kind == "string" else "_i32"
            size = 2 if kind == "string" else 4
            self.emit(ind, f"{target}, = {fmt}.unpack_from(buf, pos)")
            self.emit(ind, f"pos += {size}")
            cond = f"{target} < -1" if nullable else f"{target} < 0"
            self.emit(ind, f"if {cond}:")
            self.emit(ind + 1, f"raise _PE({what!r} + ': invalid length %d' % {target})")
        if kind == "array":
            self.emit(ind, f"if {target} > L - pos:")
            self.emit(ind + 1, f"raise _PE({what!r} + ': count %d too large' % {target})")

    def null_branch(self, ind: int, n: str, target: str) -> int:
        """`target = None` when the length `n` read says null; returns the indent of the rest."""
        self.emit(ind, f"if {n} < 0:")
        self.emit(ind + 1, f"{target} = None")
        self.emit(ind, "else:")
        return ind + 1

    def read_blob(self, ind: int, target: str, kind: str, nullable: bool, what: str) -> None:
        """string -> str, bytes -> bytes, records -> memoryview."""
        n = self.var("n")
        self.read_length(ind, n, "string" if kind == "string" else "bytes", nullable, what)
        inner = self.null_branch(ind, n, target) if nullable else ind
        e = self.var("e")
        self.emit(inner, f"{e} = pos + {n}")
        self.emit(inner, f"if {e} > L:")
        self.emit(inner + 1, f"raise _PE({what + ': truncated'!r})")
        if kind == "string":
            self.emit(inner, f"{target} = str(buf[pos:{e}], _UTF8)")
        elif kind == "bytes":
            self.emit(inner, f"{target} = bytes(buf[pos:{e}])")
        else:
            self.emit(inner, f"{target} = buf[pos:{e}]")
        self.emit(inner, f"pos = {e}")

    def read_scalar(self, ind: int, target: str, t: str, nullable: bool, what: str) -> None:
        if t in ("string", "bytes", "records"):
            self.read_blob(ind, target, t, nullable, what)
        else:
            s = self.const(struct.Struct(">" + _FIXED[t]))
            self.emit(ind, f"{target}, = {s}.unpack_from(buf, pos)")
            self.emit(ind, f"pos += {struct.calcsize('>' + _FIXED[t])}")
            if t == "uuid":
                self.emit(ind, f"{target} = _uuid_from({target})")

    def read_field(self, ind: int, target: str, f: Field) -> None:
        what = f.name
        nullable = self.nullable(f)
        if f.is_struct_array or f.is_primitive_array:
            n = self.var("n")
            self.read_length(ind, n, "array", nullable, what)
            inner = self.null_branch(ind, n, target) if nullable else ind
            if f.is_primitive_array and f.element_type in _FIXED and f.element_type != "uuid":
                code = _FIXED[f.element_type]
                width = struct.calcsize(">" + code)
                unpacks = self.const(_small_array_unpacks(code))
                self.emit(
                    inner,
                    f"{target} = list({unpacks}[{n}](buf, pos) if {n} < {_SMALL_ARRAY} "
                    f"else _sunpack('>%d{code}' % {n}, buf, pos))",
                )
                self.emit(inner, f"pos += {n} * {width}")
                return
            if f.is_struct_array and (fixed := self.fixed_width_fields(f.fields)):
                # The partitions of Fetch, ListOffsets, OffsetForLeaderEpoch (up to thousands).
                # One iter_unpack when every element's tagged-field section is empty (the usual
                # case), else the general loop below.
                inner = self.decode_fixed_array(inner, target, n, f.fields, fixed)
            self.emit(inner, f"{target} = []")
            ap = self.var("ap")
            self.emit(inner, f"{ap} = {target}.append")
            self.emit(inner, f"for _ in range({n}):")
            elem = self.var("x")
            if f.is_struct_array:
                self.decode_struct(inner + 1, elem, f.fields)
            else:
                self.read_scalar(inner + 1, elem, f.element_type, False, what)
            self.emit(inner + 1, f"{ap}({elem})")
        elif f.is_struct:
            if nullable:
                self.emit(ind, "if buf[pos] >= 128:")  # int8 -1 marks a null struct
                self.emit(ind + 1, "pos += 1")
                self.emit(ind + 1, f"{target} = None")
                self.emit(ind, "else:")
                self.emit(ind + 1, "pos += 1")
                self.decode_struct(ind + 1, target, f.fields)
            else:
                self.decode_struct(ind, target, f.fields)
        else:
            assert isinstance(f.type, str)
            self.read_scalar(ind, target, f.type, nullable, what)

    def fixed_width_fields(self, fields: tuple[Field, ...]) -> list[Field]:
        """The element's fields present at this version when every one is a fixed-width number
        on the wire (no tagged fields known to this version), so all elements have one size;
        else []."""
        present = [f for f in fields if self.present(f)]
        fixed = all(
            not self.is_tagged(f) and isinstance(f.type, str) and f.type in _FIXED
            and f.type != "uuid" for f in present
        )  # fmt: skip
        return present if fixed else []

    def decode_fixed_array(
        self, ind: int, target: str, n: str, fields: tuple[Field, ...], present: list[Field]
    ) -> int:
        """Emit the one-call decoding of `n` elements of the fixed-width `present` fields (the
        others take their defaults), guarded: returns the indent of the `else` branch, where
        the general loop goes."""
        fmt = ">" + "".join(_FIXED[str(f.type)] for f in present) + ("x" if self.flexible else "")
        width = struct.calcsize(fmt)
        s = self.const(struct.Struct(fmt))
        end = self.var("e")
        names = {f.name: self.var("f") for f in present}
        self.emit(ind, f"{end} = pos + {n} * {width}")
        # Flexible elements end with their tagged-field count: the last byte of each.
        empty = f" and not any(buf[pos + {width - 1}:{end}:{width}])" if self.flexible else ""
        self.emit(ind, f"if {end} <= L{empty}:")
        items = ", ".join(
            f"{f.name!r}: {names[f.name] if f.name in names else self.default_expr(f)}"
            for f in fields
        )
        unpacked = "".join(f"{names[f.name]}, " for f in present)
        self.emit(
            ind + 1, f"{target} = [{{{items}}} for {unpacked}in {s}.iter_unpack(buf[pos:{end}])]"
        )
        self.emit(ind + 1, f"pos = {end}")
        self.emit(ind, "else:")
        return ind + 1

    def decode_struct(self, ind: int, target: str, fields: tuple[Field, ...]) -> None:
        """Emit statements leaving the decoded dict in `target`."""
        items: list[tuple[str, str]] = []
        tagged: list[tuple[Field, str]] = []
        batch: list[tuple[Field, str]] = []

        def flush() -> None:
            if not batch:
                return
            fmt = ">" + "".join(_FIXED[str(bf.type)] for bf, _ in batch)
            s = self.const(struct.Struct(fmt))
            names = "".join(f"{v}, " for _, v in batch)
            self.emit(ind, f"{names}= {s}.unpack_from(buf, pos)")
            self.emit(ind, f"pos += {struct.calcsize(fmt)}")
            for bf, v in batch:
                if bf.type == "uuid":
                    self.emit(ind, f"{v} = _uuid_from({v})")
            batch.clear()

        for f in fields:
            if not self.present(f):
                items.append((f.name, self.default_expr(f)))
                continue
            v = self.var("v")
            items.append((f.name, v))
            if self.is_tagged(f):
                self.emit(ind, f"{v} = {self.default_expr(f)}")
                tagged.append((f, v))
            elif isinstance(f.type, str) and f.type in _FIXED:
                batch.append((f, v))
            else:
                flush()
                self.read_field(ind, v, f)
        flush()
        if self.flexible:
            self.decode_tagged_section(ind, tagged)
        body = ", ".join(f"{name!r}: {expr}" for name, expr in items)
        self.emit(ind, f"{target} = {{{body}}}")

    def decode_tagged_section(self, ind: int, tagged: list[tuple[Field, str]]) -> None:
        if not tagged:
            self.emit(ind, "if buf[pos] == 0:")
            self.emit(ind + 1, "pos += 1")
            self.emit(ind, "else:")
            self.emit(ind + 1, "pos = _skip(buf, pos)")
            return
        cnt = self.var("tc")
        self.read_uvarint(ind, cnt)
        self.emit(ind, f"if {cnt} > L - pos:")
        self.emit(ind + 1, "raise _PE('tagged field count too large')")
        self.emit(ind, f"for _ in range({cnt}):")
        tag, size, end = self.var("tg"), self.var("ts"), self.var("te")
        self.read_uvarint(ind + 1, tag)
        self.read_uvarint(ind + 1, size)
        self.emit(ind + 1, f"{end} = pos + {size}")
        self.emit(ind + 1, f"if {end} > L:")
        self.emit(ind + 2, "raise _PE('truncated tagged field')")
        for i, (f, v) in enumerate(sorted(tagged, key=lambda fv: fv[0].tag or 0)):
            self.emit(ind + 1, f"{'if' if i == 0 else 'elif'} {tag} == {f.tag}:")
            if isinstance(f.type, str) and f.type in _FIXED:
                self.read_scalar(ind + 2, v, f.type, False, f.name)
            else:
                self.read_field(ind + 2, v, f)
            self.emit(ind + 2, f"if pos != {end}:")
            self.emit(ind + 3, f"raise _PE({'tagged field ' + f.name + ': size mismatch'!r})")
        self.emit(ind + 1, "else:")
        self.emit(ind + 2, f"pos = {end}")

    # -- encoding --------------------------------------------------------------------------

    def write_uvarint(self, ind: int, out: str, expr: str) -> None:
        n = self.var("u")
        self.emit(ind, f"{n} = {expr}")
        self.emit(ind, f"if {n} < 128:")
        self.emit(ind + 1, f"{out}.append({n})")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"{out} += _wuv({n})")

    def write_length(self, ind: int, out: str, kind: str, expr: str) -> None:
        if self.flexible:
            self.write_uvarint(ind, out, f"{expr} + 1")
        elif kind == "string":
            self.emit(ind, f"{out} += _i16.pack({expr})")
        else:
            self.emit(ind, f"{out} += _i32.pack({expr})")

    def write_null(self, ind: int, out: str, kind: str) -> None:
        if self.flexible:
            self.emit(ind, f"{out}.append(0)")
        elif kind == "string":
            self.emit(ind, f"{out} += b'\\xff\\xff'")
        else:
            self.emit(ind, f"{out} += b'\\xff\\xff\\xff\\xff'")

    def write_scalar(
        self, ind: int, out: str, v: str, t: str, nullable: bool, detach: bool
    ) -> None:
        if t in _FIXED:
            if t == "uuid":
                self.emit(ind, f"{out} += {v}.bytes")
            else:
                s = self.const(struct.Struct(">" + _FIXED[t]))
                self.emit(ind, f"{out} += {s}.pack({v})")
            return
        inner = ind
        if nullable:
            self.emit(ind, f"if {v} is None:")
            self.write_null(ind + 1, out, t)
            self.emit(ind, "else:")
            inner = ind + 1
        if t == "string":
            b = self.var("b")
            self.emit(inner, f"{b} = {v}.encode()")
            self.write_length(inner, out, "string", f"len({b})")
            self.emit(inner, f"{out} += {b}")
        elif t == "bytes":
            self.write_length(inner, out, "bytes", f"len({v})")
            self.emit(inner, f"{out} += {v}")
        else:  # records
            if not detach:
                self.emit(inner, f"{v} = _rec_bytes({v})")
                self.write_length(inner, out, "bytes", f"len({v})")
                self.emit(inner, f"{out} += {v}")
                return
            # Large immutable records go out as their own part, uncopied, like a RecordsSource.
            self.emit(inner, f"if type({v}) is bytes and len({v}) >= {_DETACH_BYTES}:")
            self.write_length(inner + 1, out, "bytes", f"len({v})")
            self.emit(inner + 1, f"parts.append({out})")
            self.emit(inner + 1, f"parts.append({v})")
            self.emit(inner + 1, f"{out} = bytearray()")
            self.emit(inner, f"elif isinstance({v}, (bytes, bytearray, memoryview)):")
            self.write_length(inner + 1, out, "bytes", f"len({v})")
            self.emit(inner + 1, f"{out} += {v}")
            self.emit(inner, "else:")
            # A RecordsSource: write its length, then hand the object over as its own part.
            self.write_length(inner + 1, out, "bytes", f"{v}.size")
            self.emit(inner + 1, f"parts.append({out})")
            self.emit(inner + 1, f"parts.append({v})")
            self.emit(inner + 1, f"{out} = bytearray()")

    def write_field(
        self, ind: int, out: str, v: str, f: Field, detach: bool, frozen: bool = True
    ) -> None:
        nullable = self.nullable(f)
        if f.is_struct_array and frozen and not _holds_records(f.fields):
            # A FrozenArray is encoded once per field and version, then copied.
            arrays = self.const(_ArrayEncoder(f, self.version, self.flexible))
            self.emit(ind, f"if type({v}) is _Frozen:")
            self.emit(ind + 1, f"{out} += {v}.encoded({arrays})")
            self.emit(ind, "else:")
            ind += 1
        if f.is_struct_array or f.is_primitive_array:
            inner = ind
            if nullable:
                self.emit(ind, f"if {v} is None:")
                self.write_null(ind + 1, out, "array")
                self.emit(ind, "else:")
                inner = ind + 1
            self.write_length(inner, out, "array", f"len({v})")
            if f.is_primitive_array and f.element_type in _FIXED and f.element_type != "uuid":
                code = _FIXED[f.element_type]
                packs = self.const(_small_array_packs(code))
                self.emit(
                    inner,
                    f"{out} += {packs}[len({v})](*{v}) if len({v}) < {_SMALL_ARRAY} "
                    f"else _spack('>%d{code}' % len({v}), *{v})",
                )
                return
            elem = self.var("x")
            self.emit(inner, f"for {elem} in {v}:")
            if f.is_struct_array:
                self.encode_struct(inner + 1, out, elem, f.fields, detach)
            else:
                self.write_scalar(inner + 1, out, elem, f.element_type, False, detach)
        elif f.is_struct:
            if nullable:
                self.emit(ind, f"if {v} is None:")
                self.emit(ind + 1, f"{out}.append(255)")
                self.emit(ind, "else:")
                self.emit(ind + 1, f"{out}.append(1)")
                self.encode_struct(ind + 1, out, v, f.fields, detach)
            else:
                self.encode_struct(ind, out, v, f.fields, detach)
        else:
            assert isinstance(f.type, str)
            self.write_scalar(ind, out, v, f.type, nullable, detach)

    def get_expr(self, d: str, f: Field) -> str:
        default = default_for(f, self.version)
        if f.is_struct and default is not None:
            default = {}
        elif isinstance(default, list):
            default = ()
        return f"{d}.get({f.name!r}, {self.const(default)})"

    def encode_struct(
        self, ind: int, out: str, d: str, fields: tuple[Field, ...], detach: bool
    ) -> None:
        batch: list[Field] = []
        tagged: list[Field] = []

        def flush() -> None:
            if not batch:
                return
            fmt = ">" + "".join(_FIXED[str(bf.type)] for bf in batch)
            s = self.const(struct.Struct(fmt))
            args = []
            for bf in batch:
                expr = self.get_expr(d, bf)
                args.append(f"{expr}.bytes" if bf.type == "uuid" else expr)
            self.emit(ind, f"{out} += {s}.pack({', '.join(args)})")
            batch.clear()

        for f in fields:
            if not self.present(f):
                continue
            if self.is_tagged(f):
                tagged.append(f)
            elif isinstance(f.type, str) and f.type in _FIXED:
                batch.append(f)
            else:
                flush()
                v = self.var("v")
                self.emit(ind, f"{v} = {self.get_expr(d, f)}")
                self.write_field(ind, out, v, f, detach)
        flush()
        if self.flexible:
            self.encode_tagged_section(ind, out, d, tagged)

    def encode_tagged_section(self, ind: int, out: str, d: str, tagged: list[Field]) -> None:
        if not tagged:
            self.emit(ind, f"{out}.append(0)")
            return
        bufs: list[tuple[Field, str]] = []
        for f in sorted(tagged, key=lambda tf: tf.tag or 0):
            v, t = self.var("v"), self.var("t")
            bufs.append((f, t))
            self.emit(ind, f"{t} = None")
            default = self.default_value(f)
            if default is None:
                self.emit(ind, f"{v} = {d}.get({f.name!r})")
                cond = f"{v} is not None"
            elif isinstance(default, list) and not default:
                self.emit(ind, f"{v} = {d}.get({f.name!r})")
                cond = f"{v}"
            else:
                k = self.const(default)
                self.emit(ind, f"{v} = {d}.get({f.name!r}, {k})")
                cond = f"{v} is not {k} and {v} != {k}"
            self.emit(ind, f"if {cond}:")
            self.emit(ind + 1, f"{t} = bytearray()")
            self.write_field(ind + 1, t, v, f, detach=False)
        count = " + ".join(f"({t} is not None)" for _, t in bufs)
        self.write_uvarint(ind, out, count)
        for f, t in bufs:
            self.emit(ind, f"if {t} is not None:")
            self.emit(ind + 1, f"{out} += {self.const(_p.write_uvarint(f.tag or 0))}")
            self.write_uvarint(ind + 1, out, f"len({t})")
            self.emit(ind + 1, f"{out} += {t}")

    # -- assembling ------------------------------------------------------------------------

    def build(self, name: str) -> Callable[..., Any]:
        src = "\n".join(self.lines)
        code = compile(src, f"<odradek codec {name}>", "exec")
        exec(code, self.ns)  # noqa: S102 - source generated above from the schema
        fn = self.ns[name]
        fn.__source__ = src  # kept for debugging: print(fn.__source__)
        return fn


def compile_decoder(fields: tuple[Field, ...], version: int, flexible: bool, label: str):
    c = _Compiler(version, flexible)
    c.emit(0, "def decode(buf, pos):")
    c.emit(1, "L = len(buf)")
    c.decode_struct(1, "d", fields)
    c.emit(1, "return d, pos")
    fn = c.build("decode")
    fn.__qualname__ = f"decode[{label}]"
    return fn


def compile_encoder(fields: tuple[Field, ...], version: int, flexible: bool, label: str):
    c = _Compiler(version, flexible)
    c.emit(0, "def encode(out, d, parts):")
    c.encode_struct(1, "out", "d", fields, detach=True)
    c.emit(1, "return out")
    fn = c.build("encode")
    fn.__qualname__ = f"encode[{label}]"
    return fn
