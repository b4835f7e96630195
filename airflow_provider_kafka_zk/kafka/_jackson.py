"""Write JSON byte for byte as Kafka (Jackson over JVM maps) writes it into ZooKeeper.

Kafka serialises znodes with a default Jackson ``ObjectMapper``: compact output, no key sorting,
so the key order of every JSON object is the *iteration order of the JVM map* Kafka built. To make
an encoded znode compare equal to the real one (snapshots, golden files, "did anything change"
checks), each encoder builds its objects through the functions below, which reproduce those
iteration orders from the map's type, its keys and how it was filled:

* Scala 2.13 ``mutable.HashMap`` (``mutable.Map(...)``, ``+=``): buckets ascending, inside a bucket
  ascending improved hash.
* ``java.util.HashMap`` (``Collectors.toMap``): buckets ascending, inside a bucket insertion order.
* ``java.util.Properties`` on Java 9+ (a ``ConcurrentHashMap``): like HashMap, but it resizes one
  element earlier and a resize can reorder a bucket.
* Scala immutable ``Map``: insertion order up to 4 entries, CHAMP trie order from 5.
* ``LinkedHashMap`` and Jackson beans: insertion order (a plain ``dict``).

The model is Kafka's default Scala 2.13 build on Java 9+; a ``kafka_2.12`` build or Java 8 orders
some maps differently (the content is the same, only the bytes differ).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_INT_MASK = 0xFFFFFFFF
_LOAD_FACTOR = 0.75


def _to_int32(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """``String.hashCode``: ``31*h + c`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _INT_MASK
    return _to_int32(h)


def _spread(h: int) -> int:
    """``h ^ (h >>> 16)`` (java.util.HashMap.hash, Scala mutable improveHash), signed 32-bit."""
    u = h & _INT_MASK
    return _to_int32(u ^ (u >> 16))


def scala_improve_hash(h: int) -> int:
    """``scala.collection.Hashing.improve``, the hash of Scala 2.13's immutable (CHAMP) HashMap."""
    h &= _INT_MASK
    h = (h + (~(h << 9) & _INT_MASK)) & _INT_MASK
    h ^= h >> 14
    h = (h + (h << 4)) & _INT_MASK
    h ^= h >> 10
    return h  # unsigned view; only its bit fragments are used


def _table_size_for_java(capacity: int) -> int:
    """java.util.HashMap.tableSizeFor: the next power of two >= capacity."""
    n = 1
    while n < capacity:
        n *= 2
    return n


def _table_size_for_scala(capacity: int) -> int:
    """Scala 2.13 mutable.HashMap.tableSizeFor: ``highestOneBit(max(capacity-1, 4)) * 2``."""
    return 1 << max(capacity - 1, 4).bit_length()


def scala_mutable_map_literal_capacity(entry_count: int) -> int:
    """Table size of ``mutable.Map(k1 -> v1, ..., kn -> vn)`` (``HashMap.from`` with a known size)."""
    if entry_count <= 0:
        return 16
    return _table_size_for_scala(int((entry_count + 1) / _LOAD_FACTOR))


def scala_mutable_map_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap`` filled with ``keys`` in this order.

    ``initial_capacity`` is the table size before the first insertion: 16 for ``mutable.Map()``,
    :func:`scala_mutable_map_literal_capacity` for ``mutable.Map(k -> v, ...)``. The table doubles
    *before* an insertion that would bring the size to ``0.75 * capacity``. Inside a bucket the
    entries are kept sorted by improved hash (equal hashes in insertion order).
    """
    unique = list(dict.fromkeys(keys))
    capacity = initial_capacity
    for size in range(len(unique)):
        if size + 1 >= int(capacity * _LOAD_FACTOR):
            capacity *= 2
    hashes = {key: _spread(java_string_hash(key)) for key in unique}
    position = {key: i for i, key in enumerate(unique)}
    return sorted(unique, key=lambda k: (hashes[k] & (capacity - 1), hashes[k], position[k]))


def java_hash_map_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` filled with ``keys`` in this order.

    Resizes after an insertion takes the size above ``0.75 * capacity``; a resize keeps the
    relative order inside a bucket, so the order is (bucket at the final size, insertion order).
    """
    unique = list(dict.fromkeys(keys))
    capacity = _table_size_for_java(initial_capacity)
    for size in range(1, len(unique) + 1):
        if size > capacity * _LOAD_FACTOR:
            capacity *= 2
    position = {key: i for i, key in enumerate(unique)}
    return sorted(unique, key=lambda k: (_spread(java_string_hash(k)) & (capacity - 1), position[k]))


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.Properties`` (Java 9+) filled by ``setProperty`` in this order.

    Properties delegate to a ``ConcurrentHashMap(8)``: 16 buckets, new entries appended to their
    bucket, and a resize as soon as the size reaches ``0.75 * capacity``. The resize
    (``ConcurrentHashMap.transfer``) keeps the bucket's last run of entries in place and prepends
    the earlier ones in reverse, which is reproduced here.
    """
    capacity = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
    for size, key in enumerate(dict.fromkeys(keys), start=1):
        h = _spread(java_string_hash(key)) & 0x7FFFFFFF
        table[h & (capacity - 1)].append((h, key))
        while size >= capacity - (capacity >> 2):
            table = _concurrent_hash_map_transfer(table, capacity)
            capacity *= 2
    return [key for bucket in table for _, key in bucket]


def _concurrent_hash_map_transfer(
    table: list[list[tuple[int, str]]], capacity: int
) -> list[list[tuple[int, str]]]:
    grown: list[list[tuple[int, str]]] = [[] for _ in range(capacity * 2)]
    for index, bucket in enumerate(table):
        if not bucket:
            continue
        last_run = 0
        run_bit = bucket[0][0] & capacity
        for i in range(1, len(bucket)):
            bit = bucket[i][0] & capacity
            if bit != run_bit:
                run_bit, last_run = bit, i
        low = list(bucket[last_run:]) if run_bit == 0 else []
        high = list(bucket[last_run:]) if run_bit != 0 else []
        for node in bucket[:last_run]:
            (low if node[0] & capacity == 0 else high).insert(0, node)
        grown[index] = low
        grown[index + capacity] = high
    return grown


def scala_immutable_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a Scala 2.13 immutable ``Map`` holding ``keys`` (given in insertion order).

    Up to 4 entries it is ``Map1``..``Map4``: insertion order. From 5 it is a CHAMP ``HashMap``: at
    each trie level the 5-bit fragment ``(improve(hash) >>> 5*level) & 31`` places a key; a node
    yields its single keys in fragment order, then its sub-nodes (keys sharing a fragment) in
    fragment order, depth first. Keys with equal hashes stay in insertion order.
    """
    unique = list(dict.fromkeys(keys))
    if len(unique) <= 4:
        return unique
    hashed = [(scala_improve_hash(java_string_hash(key)), key) for key in unique]
    return _champ_order(hashed, 0)


def _champ_order(entries: list[tuple[int, str]], shift: int) -> list[str]:
    if shift >= 32:
        return [key for _, key in entries]
    groups: dict[int, list[tuple[int, str]]] = {}
    for entry in entries:
        groups.setdefault((entry[0] >> shift) & 31, []).append(entry)
    singles = [group[0][1] for _, group in sorted(groups.items()) if len(group) == 1]
    ordered = list(singles)
    for _, group in sorted(groups.items()):
        if len(group) > 1:
            ordered.extend(_champ_order(group, shift + 5))
    return ordered


def reorder(mapping: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """A dict with ``mapping``'s items in ``order`` (which must list exactly its keys)."""
    return {key: mapping[key] for key in order}


def scala_mutable_map(mapping: Mapping[str, Any], initial_capacity: int = 16) -> dict[str, Any]:
    """``mapping`` as a Scala mutable HashMap filled in its order would iterate."""
    return reorder(mapping, scala_mutable_map_order(mapping, initial_capacity))


def scala_immutable_map(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``mapping`` as a Scala immutable Map built in its order would iterate."""
    return reorder(mapping, scala_immutable_map_order(mapping))


def java_hash_map(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``mapping`` as a java.util.HashMap filled in its order would iterate."""
    return reorder(mapping, java_hash_map_order(mapping))


def java_properties(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """``mapping`` as java.util.Properties filled in its order would iterate (Java 9+)."""
    return reorder(mapping, java_properties_order(mapping))


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(text: str) -> str:
    """A JSON string as Jackson writes it: only ``"``, ``\\`` and controls escaped, hex upper-case."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as znode JSON")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON in the given key order, escaped as Jackson escapes (``/`` and non-ASCII kept)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")
