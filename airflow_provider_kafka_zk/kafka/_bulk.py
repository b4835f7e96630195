"""Bulk decoding for :meth:`.model.ClusterState.from_snapshot`: the hot znode kinds, without the codec's per-call cost.

A 200,000-partition cluster is ~400,000 znodes, of which all but a few thousand are partition state
znodes, their data-less containers and topic znodes. The codecs of :mod:`.znodes` are exact but
pay a dozen Python calls per znode (a typed getter per key, an error label per getter, a regex per
partition key); this module accepts exactly the znodes those codecs accept *in their common shape*
and answers ``None`` for anything else, so the caller hands that row to the codec, which then
raises the same error and the model records the same finding as before. Nothing here ever
produces a value the codec would not have produced.

* JSON is parsed with the codecs' own decoder (:data:`.znodes._JSON`: same strictness, constants
  rejected), only the value itself: leading or trailing whitespace goes to the codec.
* Partition state data is decoded once per distinct byte string (healthy partitions share them).
* :func:`column_builder` makes many instances of a frozen dataclass from column lists without one
  ``__init__`` call per instance (``object.__setattr__``/slot setters driven by ``map``), for the
  ~400,000 PartitionState/PartitionInfo objects of a big cluster. It only does so for dataclasses
  whose ``__init__`` just stores the fields (no ``__post_init__``), else it calls the class.

Pure: no I/O, no Airflow.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from typing import Any

from . import znodes as zk
from .uuid import KafkaUuid

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_SCAN = zk._JSON.scan_once
_LIST_TYPES = frozenset({list})
_INT_TYPES = frozenset({int})
_RECOVERY_STATES = (zk.RECOVERED, zk.RECOVERING)

StateFields = tuple[int, int, int, tuple[int, ...], int, int]
"""(leader, leader_epoch, controller_epoch, isr, leader_recovery_state, version)."""


def json_value(data: object) -> Any:
    """The JSON value ``data`` holds, or ``_NOT_JSON`` when the codec must look at it.

    Only bytes whose UTF-8 text is one JSON value with nothing around it are taken.
    """
    if type(data) is not bytes:
        return _NOT_JSON
    try:
        text = data.decode("utf-8")
        value, end = _SCAN(text, 0)
    except Exception:  # StopIteration, UnicodeDecodeError, ValueError (a constant), RecursionError
        return _NOT_JSON
    return value if end == len(text) else _NOT_JSON


_NOT_JSON: Any = object()


def _is_int32(value: object) -> bool:
    return type(value) is int and _INT32_MIN <= value <= _INT32_MAX


class Cache:
    """Validated topic names and partition numbers, and replica tuples, shared by one build."""

    __slots__ = ("partitions", "replicas", "topics")

    def __init__(self) -> None:
        self.topics: dict[str, bool] = {}
        self.partitions: dict[str, int] = {}
        self.replicas: dict[tuple[int, ...], tuple[int, ...]] = {}

    def topic_ok(self, name: str) -> bool:
        """Whether ``validate_topic_name`` accepts ``name`` (a refused one goes to the codec)."""
        ok = self.topics.get(name)
        if ok is None:
            try:
                zk.validate_topic_name(name)
                ok = True
            except Exception:
                ok = False
            self.topics[name] = ok
        return ok

    def topics_ok(self, names: Iterable[str]) -> bool:
        """Whether every name in ``names`` is a valid topic name."""
        return all(map(self.topic_ok, set(names)))

    def partition_numbers(self, texts: Sequence[str]) -> list[int | None]:
        """:meth:`partition` of each text (None: the codec would refuse it)."""
        known = self.partitions.get
        numbers = list(map(known, texts))
        if None in numbers:
            for text in set(texts) - self.partitions.keys():
                self.partition(text)
            numbers = list(map(known, texts))
        return numbers

    def partition(self, text: str) -> int | None:
        """``text`` as ``znodes._partition_number`` reads it, or None when it would refuse it."""
        number = self.partitions.get(text)
        if number is None:
            if not zk._PARTITION_KEY.fullmatch(text) or int(text) > _INT32_MAX:
                return None
            number = self.partitions[text] = int(text)
        return number


def partition_states(blobs: Iterable[object]) -> dict[object, StateFields | None]:
    """Each distinct state znode data -> its fields as ``PartitionState.decode`` reads them, or None."""
    return {blob: _state_fields(blob) for blob in blobs}


def _state_fields(blob: object) -> StateFields | None:
    js = json_value(blob)
    if type(js) is not dict:
        return None
    recovery = js.get("leader_recovery_state")
    if recovery is None:
        recovery = zk.RECOVERED
    elif type(recovery) is not int or recovery not in _RECOVERY_STATES:
        return None
    try:
        leader = js["leader"]
        leader_epoch = js["leader_epoch"]
        controller_epoch = js["controller_epoch"]
        isr = js["isr"]
        version = js["version"]
    except KeyError:
        return None
    if not (
        _is_int32(leader)
        and _is_int32(leader_epoch)
        and _is_int32(controller_epoch)
        and _is_int32(version)
        and type(isr) is list
        and _int32_list(isr)
    ):
        return None
    return leader, leader_epoch, controller_epoch, tuple(isr), recovery, version


def _int32_list(values: list[Any]) -> bool:
    return not values or (
        set(map(type, values)) <= _INT_TYPES and min(values) >= _INT32_MIN and max(values) <= _INT32_MAX
    )


def topic_assignment(topic: str, data: object, cache: Cache) -> zk.TopicAssignment | None:
    """``TopicAssignment.decode`` for a topic whose name is already valid, or None (use the codec)."""
    js = json_value(data)
    if type(js) is not dict:
        return None
    version = js.get("version")
    if not _is_int32(version):
        return None
    partitions = _replica_map(js.get("partitions"), cache)
    if partitions is None:
        return None
    adding: dict[int, tuple[int, ...]] | None = {}
    removing: dict[int, tuple[int, ...]] | None = {}
    if "adding_replicas" in js:
        adding = _replica_map(js["adding_replicas"], cache)
    if "removing_replicas" in js:
        removing = _replica_map(js["removing_replicas"], cache)
    if adding is None or removing is None:
        return None
    topic_id = None
    if "topic_id" in js:
        try:
            topic_id = KafkaUuid.parse(js["topic_id"], source="'topic_id'")
        except Exception:
            return None
    return zk.TopicAssignment(topic, partitions, topic_id, adding, removing, version)


def _replica_map(value: object, cache: Cache) -> dict[int, tuple[int, ...]] | None:
    if type(value) is not dict:
        return None
    keys = cache.partition_numbers(list(value))
    if None in keys:
        return None
    lists = list(value.values())
    if lists and not set(map(type, lists)) <= _LIST_TYPES:
        return None
    if not _int32_list(list(chain.from_iterable(lists))):
        return None
    replicas = list(map(tuple, lists))
    # equal replica lists share one tuple (a few thousand distinct ones for 200,000 partitions)
    return dict(zip(keys, map(cache.replicas.setdefault, replicas, replicas), strict=True))


# --------------------------------------------------------------------------------------------
# Many frozen dataclass instances at once
# --------------------------------------------------------------------------------------------


def _stores_fields_only(cls: type) -> bool:
    """Whether dataclass ``cls``'s ``__init__`` only stores its fields (no ``__post_init__``, every field
    an init argument): then an instance can be made by setting the fields, without calling it."""
    return (
        not hasattr(cls, "__post_init__")
        and all(f.init for f in dataclasses.fields(cls))
        and "__init__" in cls.__dict__
    )


def instance_maker(cls: type) -> Callable[[dict[str, Any]], Any]:
    """``make(values)`` -> the instance of dataclass ``cls`` with these field values, one instance at
    a time (:func:`column_builder` makes many from columns): equal to ``cls(**values)`` (the fallback:
    a class with slots or a ``__post_init__``, or ``values`` not naming every field), without a frozen
    ``__init__``'s ``object.__setattr__`` per field. ``values`` may become the instance's ``__dict__``."""
    count = len(dataclasses.fields(cls))
    if not _stores_fields_only(cls) or "__slots__" in cls.__dict__:
        return lambda values: cls(**values)
    new = object.__new__

    def make(values: dict[str, Any]) -> Any:
        if len(values) != count:  # a field left out (or one unknown): the class says which
            return cls(**values)
        made = new(cls)
        made.__dict__.update(values)
        return made

    return make


def column_builder(cls: type) -> Callable[[int, Sequence[Iterable[Any]]], list[Any]]:
    """``build(n, columns)`` -> ``n`` instances of dataclass ``cls``, field values by column.

    Equal to ``list(map(cls, *columns))`` (the fallback) for a dataclass whose ``__init__`` only
    stores its fields; a column may be an iterator (e.g. ``itertools.repeat``) of at least ``n``.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    if not _stores_fields_only(cls):
        return lambda n, columns: list(map(cls, *columns))
    slots = "__slots__" in cls.__dict__ and set(names) <= set(cls.__dict__["__slots__"])
    new = object.__new__
    set_attribute = object.__setattr__

    def build(n: int, columns: Sequence[Iterable[Any]]) -> list[Any]:
        if len(columns) != len(names):
            raise ValueError(f"{cls.__name__} has {len(names)} fields, not {len(columns)}")
        objects = list(map(new, repeat(cls, n)))
        for name, column in zip(names, columns, strict=True):
            if slots:
                deque(map(cls.__dict__[name].__set__, objects, column), maxlen=0)
            else:
                deque(map(set_attribute, objects, repeat(name), column), maxlen=0)
        return objects

    return build


_STATE_FIELD_NAMES = [f.name for f in dataclasses.fields(zk.PartitionState)]
_STATE_BY_DICT = (
    _STATE_FIELD_NAMES
    == [
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "controller_epoch",
        "isr",
        "leader_recovery_state",
        "version",
    ]
    and not hasattr(zk.PartitionState, "__post_init__")
    and "__slots__" not in zk.PartitionState.__dict__
)
_state_columns = column_builder(zk.PartitionState)


def partition_state_objects(
    topics: Sequence[str],
    numbers: Sequence[int],
    datas: Sequence[object],
    decoded: dict[object, StateFields | None],
) -> list[zk.PartitionState]:
    """``PartitionState(topic, number, *decoded[data])`` for each row (every ``decoded[data]`` set).

    The instance dict is a copy of one template per distinct data: two dict writes per row
    instead of eight attribute writes.
    """
    n = len(datas)
    if not _STATE_BY_DICT:
        fields = list(map(decoded.__getitem__, datas))
        columns = list(zip(*fields, strict=True)) if fields else [()] * 6
        return _state_columns(n, [topics, numbers, *columns])
    templates = {
        data: dict(zip(_STATE_FIELD_NAMES, (None, None, *fields), strict=True))
        for data, fields in decoded.items()
        if fields is not None
    }
    dicts = list(map(dict.copy, map(templates.__getitem__, datas)))
    deque(map(dict.__setitem__, dicts, repeat("topic"), topics), maxlen=0)
    deque(map(dict.__setitem__, dicts, repeat("partition"), numbers), maxlen=0)
    objects = list(map(object.__new__, repeat(zk.PartitionState, n)))
    deque(map(object.__setattr__, objects, repeat("__dict__"), dicts), maxlen=0)
    return objects
