"""The Arrow/Parquet schema of a ZooKeeper snapshot's ``znodes.parquet`` (one row per znode, the
columns of :class:`~airflow_provider_kafka_zk.kafka.snapshot.ZnodeRow` in its field order).

Defined once, below both its writers: the snapshot walk (``hooks/zookeeper_snapshot.py``) builds
its Arrow arrays with it and the artefact layer (``artefacts/snapshots.py``) writes and reads the
files with it. A format definition, no I/O; importing it imports pyarrow.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_provider_kafka_zk.kafka.snapshot import ZNODE_ROW_FIELDS

PARQUET_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("data", pa.binary(), nullable=True),
        pa.field("czxid", pa.int64(), nullable=False),
        pa.field("mzxid", pa.int64(), nullable=False),
        pa.field("pzxid", pa.int64(), nullable=False),
        pa.field("ctime", pa.int64(), nullable=False),
        pa.field("mtime", pa.int64(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("cversion", pa.int32(), nullable=False),
        pa.field("aversion", pa.int32(), nullable=False),
        pa.field("ephemeral_owner", pa.int64(), nullable=False),
        pa.field("data_length", pa.int32(), nullable=False),
        pa.field("num_children", pa.int32(), nullable=False),
    ]
)
assert tuple(PARQUET_SCHEMA.names) == ZNODE_ROW_FIELDS, "Parquet columns must follow ZnodeRow"
