"""The simulator plays a ZooKeeper-to-KRaft migration as a real Kafka 3.9.0 cluster did (golden data).

tests/fixtures/real-kafka-3.9-migration/ holds every znode of a real 3.9.0 cluster at each phase of a
migration and its documented rollback, and broker 0's server.properties per phase. The simulator builds
the same cluster and plays the same steps (:class:`RecordedMigration`); at each phase the two trees must
have the same znodes, each ephemeral or persistent alike, with the same JSON layout -- keys, their order,
formats -- and differ only in values: ids, times, offsets, hosts and ports, epochs and counts (a -1, Kafka's
"none", is kept as is). Where the history is what a reader relies on, the zkVersion must match too: the
config entities, topic znodes, ``/controller``, ``/controller_epoch``, registrations, the producer-id
block; ``/migration``'s grows with every dual write.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from znode_shapes import kind_of, shape, shapes, znode_shape

from airflow_provider_kafka_zk.testing.simulator.disk_writer import (
    broker_host,
    meta_properties,
    server_properties,
)
from airflow_provider_kafka_zk.testing.simulator.recorded_migration import (
    KRAFT_CONTROLLER,
    PHASES,
    RecordedMigration,
    RecordedPhase,
)
from airflow_provider_kafka_zk.testing.simulator.render import render_zookeeper

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "real-kafka-3.9-migration"


@dataclass(frozen=True)
class Znode:
    data: bytes | None
    ephemeral: bool
    version: int


def real_tree(phase: RecordedPhase) -> dict[str, Znode]:
    dump = json.loads((GOLDEN / "zookeeper" / f"{phase.value}.json").read_text())
    root = dump["root"]
    out = {}
    for z in dump["znodes"]:
        path = z["path"][len(root) :]
        if not path:
            continue  # the chroot itself
        data = None if z["data"] is None else z["data"].encode()
        out[path] = Znode(data, z["stat"]["ephemeralOwner"] != 0, z["stat"]["version"])
    return out


def simulated_tree(migration: RecordedMigration) -> dict[str, Znode]:
    return {
        r.path: Znode(r.data, r.owner_broker is not None, r.version)
        for r in render_zookeeper(migration.cluster)
    }


@pytest.fixture(scope="module")
def trees() -> dict[RecordedPhase, tuple[dict[str, Znode], dict[str, Znode]]]:
    """(real, simulated) per phase, the simulator playing the recording forward once."""
    migration = RecordedMigration()
    out = {}
    for phase in PHASES:
        migration.play_to(phase)
        out[phase] = (real_tree(phase), simulated_tree(migration))
    return out


# JSON fields whose strings are values (ids, times, addresses); every other string must be equal
VALUE_STRINGS = {"timestamp", "topic_id", "id", "host", "rack", "endpoints", "block_start", "block_end"}
# JSON fields whose integers are formats, compared as they are; other integers are values (-1 kept)
FORMAT_INTEGERS = {"version", "status"}


def skeleton(value: Any, key: str | None = None) -> Any:
    """The layout of a znode's JSON with its values masked: keys in order, formats, -1 sentinels."""
    if isinstance(value, dict):
        return ("{", tuple((k, skeleton(v, k)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[", tuple(skeleton(v, key) for v in value))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if key in FORMAT_INTEGERS or value == -1 else "<int>"
    if isinstance(value, float):
        return "<float>"
    if key in VALUE_STRINGS or re.fullmatch(r"-?[0-9]+", value):
        return "<str>"
    return value


def data_skeleton(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return ("json", skeleton(json.loads(data)))
    except ValueError:
        return ("bytes", data)


def _is_state(path: str) -> bool:
    return path.endswith("/state")


# zkVersions that are part of what happened, not a history's count: compared exactly
def _version_matters(path: str) -> bool:
    return not _is_state(path) and path != "/migration"


@pytest.mark.parametrize("phase", PHASES, ids=[p.value for p in PHASES])
def test_same_znodes_same_kind_same_layout(trees, phase):
    real, simulated = trees[phase]
    assert sorted(simulated) == sorted(real), (
        f"only real: {sorted(set(real) - set(simulated))}; only simulated: {sorted(set(simulated) - set(real))}"
    )
    for path, znode in real.items():
        mine = simulated[path]
        assert mine.ephemeral == znode.ephemeral, path
        assert data_skeleton(mine.data) == data_skeleton(znode.data), (path, mine.data, znode.data)
        if _version_matters(path):
            assert mine.version == znode.version, (path, mine.version, znode.version)


def test_what_appears_changes_and_disappears_between_phases(trees):
    """Per transition: the same znodes created and deleted (implied by the per-phase path sets), the
    same non-state znodes rewritten, partition states rewritten in both or in neither, /migration's
    zkVersion growing exactly when the real one grows."""
    for before, after in itertools.pairwise(PHASES):
        (real_a, sim_a), (real_b, sim_b) = trees[before], trees[after]

        def changed(a: dict[str, Znode], b: dict[str, Znode], states: bool) -> set[str]:
            return {
                p
                for p in set(a) & set(b)
                if _is_state(p) == states and (a[p].data != b[p].data or a[p].version != b[p].version)
            }

        step = f"{before.value} -> {after.value}"
        assert changed(sim_a, sim_b, False) == changed(real_a, real_b, False), step
        assert bool(changed(sim_a, sim_b, True)) == bool(changed(real_a, real_b, True)), step
        if "/migration" in real_a and "/migration" in real_b:
            grew = real_b["/migration"].version > real_a["/migration"].version
            assert (sim_b["/migration"].version > sim_a["/migration"].version) == grew, step


def _controller(tree: dict[str, Znode]) -> dict[str, Any]:
    return json.loads(tree["/controller"].data or b"")


def test_controller_migration_and_epoch_per_phase(trees):
    """Who holds /controller (a broker's ephemeral or the KRaft controller's persistent znode with its
    epoch), /migration's contents (created at zkVersion 0 holding -1 everywhere), /controller_epoch."""
    kraft_phases = {
        RecordedPhase.BROKERS_IN_MIGRATION_MODE,
        RecordedPhase.BROKERS_IN_KRAFT_MODE,
        RecordedPhase.ROLLBACK_BROKERS_IN_ZK_MIGRATION_MODE,
    }
    for phase in PHASES:
        for tree in trees[phase]:
            controller = _controller(tree)
            assert (controller["brokerid"] == KRAFT_CONTROLLER) == (phase in kraft_phases), phase
            assert (controller["kraftControllerEpoch"] >= 1) == (phase in kraft_phases), phase
            assert tree["/controller_epoch"].data == str(tree["/controller_epoch"].version).encode(), phase
        real, simulated = trees[phase]
        assert simulated["/controller_epoch"].data == real["/controller_epoch"].data, phase
        if "/migration" in real:
            state, mine = json.loads(real["/migration"].data), json.loads(simulated["/migration"].data)
            assert (mine["kraft_controller_id"], mine["kraft_controller_epoch"]) == (
                state["kraft_controller_id"],
                state["kraft_controller_epoch"],
            ), phase
            assert (mine["kraft_metadata_offset"] > 0) == (state["kraft_metadata_offset"] > 0), phase
    real, simulated = trees[RecordedPhase.CONTROLLER_PROVISIONED]
    assert real["/migration"].version == simulated["/migration"].version == 0


def test_brokers_registered_per_phase(trees):
    for phase in PHASES:
        real, simulated = trees[phase]
        registered = sorted(p for p in real if p.startswith("/brokers/ids/"))
        assert sorted(p for p in simulated if p.startswith("/brokers/ids/")) == registered
        assert (registered == []) == (phase is RecordedPhase.BROKERS_IN_KRAFT_MODE), phase


# ---------------------------------------------------------------------------------------------
# broker 0's server.properties and meta.properties per phase
# ---------------------------------------------------------------------------------------------

# the recording's config file per phase (04b is 04a's: the controller's stop changes no broker file)
CONFIG_OF_PHASE = {
    RecordedPhase.ZK_MODE: "broker-0.zk.properties",
    RecordedPhase.BROKERS_IN_MIGRATION_MODE: "broker-0.mig.properties",
    RecordedPhase.BROKERS_IN_KRAFT_MODE: "broker-0.kraft.properties",
    RecordedPhase.ROLLBACK_BROKERS_IN_ZK_MIGRATION_MODE: "broker-0.zk-mig.properties",
    RecordedPhase.ROLLBACK_COMPLETE: "broker-0.zk-final.properties",
}
# settings whose values are this cluster's (hosts, ports, paths, ids): compared by presence only
VALUE_SETTINGS = {
    "listeners",
    "advertised.listeners",
    "log.dirs",
    "zookeeper.connect",
    "controller.quorum.bootstrap.servers",
    "broker.id",
    "node.id",
    "broker.rack",
}


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))


@pytest.fixture(scope="module")
def broker_0_files() -> dict[RecordedPhase, tuple[dict[str, str], bytes]]:
    """Broker 0's server.properties and first meta.properties as the simulator writes them, per phase."""
    migration = RecordedMigration()
    out = {}
    for phase in PHASES:
        cluster = migration.play_to(phase)
        broker = cluster.brokers[0]
        host = broker_host(cluster, 0, Path("/hosts"))
        settings = _properties(server_properties(cluster, broker, host, "127.0.0.1:2181/k39"))
        out[phase] = (settings, meta_properties(cluster, broker, 0))
    return out


def _change(before: dict[str, str], after: dict[str, str]) -> dict[str, object]:
    """What a phase changed in the file: each key added, removed or changed, with the new value when
    it is not one of this cluster's own (:data:`VALUE_SETTINGS`)."""
    out: dict[str, object] = {}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            out[key] = (
                "<removed>" if key not in after else ("<value>" if key in VALUE_SETTINGS else after[key])
            )
    return out


def test_each_phase_changes_the_broker_settings_the_recording_changed(broker_0_files):
    phases = list(CONFIG_OF_PHASE)
    for before, after in itertools.pairwise(phases):
        real = _change(
            _properties((GOLDEN / "config" / CONFIG_OF_PHASE[before]).read_text()),
            _properties((GOLDEN / "config" / CONFIG_OF_PHASE[after]).read_text()),
        )
        simulated = _change(broker_0_files[before][0], broker_0_files[after][0])
        assert simulated == real, (before.value, after.value)
    kraft = broker_0_files[RecordedPhase.BROKERS_IN_KRAFT_MODE][0]
    assert (kraft["process.roles"], kraft["node.id"]) == ("broker", "0")
    assert (
        broker_0_files[RecordedPhase.ROLLBACK_CONTROLLER_DEPROVISIONED][0]
        == (broker_0_files[RecordedPhase.ROLLBACK_BROKERS_IN_ZK_MIGRATION_MODE][0])
    )


def _meta_in_log(name: str) -> list[bytes]:
    """meta.properties as ``cat`` printed it in the recording's log (the block after the command)."""
    text = (GOLDEN / "logs" / name).read_text()
    block = text[text.index("#\n#") :].split("\n")[:6]
    return [line.encode() for line in block]


def test_meta_properties_gain_directory_id_in_migration_mode_and_keep_version_0(broker_0_files):
    """ZooKeeper mode: broker.id, version=0, cluster.id. From the start in migration mode on -- in KRaft
    mode and after the rollback too -- a directory.id joins (its date line is that start's), and the
    version stays 0 (the recording cat-ed it in ZooKeeper and in KRaft mode)."""
    zk_mode = _meta_in_log("00-zk-mode.txt")[:5]
    kraft_mode = _meta_in_log("03-brokers-kraft-mode.txt")
    mine = {p: meta.split(b"\n") for p, (_, meta) in broker_0_files.items()}

    def keys(lines: list[bytes]) -> list[bytes]:
        return [line.split(b"=")[0] for line in lines[2:] if line]

    assert keys(mine[RecordedPhase.ZK_MODE]) == keys(zk_mode) == [b"broker.id", b"version", b"cluster.id"]
    for phase in PHASES[2:]:
        assert (
            keys(mine[phase])
            == keys(kraft_mode)
            == [b"broker.id", b"directory.id", b"version", b"cluster.id"]
        )
        assert b"version=0" in mine[phase] and b"broker.id=0" in mine[phase]
    assert keys(mine[RecordedPhase.CONTROLLER_PROVISIONED]) == keys(zk_mode)
    directory = {p: next(x for x in mine[p] if x.startswith(b"directory.id=")) for p in PHASES[2:]}
    assert len(set(directory.values())) == 1  # given once, kept


# ---------------------------------------------------------------------------------------------
# the 3.9 scenarios (readiness blockers, mid-migration) against the recorded layouts
# ---------------------------------------------------------------------------------------------

# not on the recorded cluster (no authorizer, SCRAM, tokens, ZooKeeper-form tools): their codecs are
# source-checked in test_znodes / test_kraft_readiness_rules; the lease is this provider's own znode
_NOT_RECORDED = re.compile(
    r"^/(kafka-acl|kafka-acl-extended|kafka-acl-changes|kafka-acl-extended-changes|delegation_token|"
    r"kafka_zk_maintenance|admin/reassign_partitions|admin/preferred_replica_election|config/users/)"
)


def test_the_3_9_scenarios_write_the_recorded_layouts(trees):
    """Every znode of the 3.9 scenarios -- the cluster ready to migrate, each readiness blocker planted
    on it, the cluster mid-migration -- is a kind the recorded 3.9.0 cluster had at some phase, ephemeral
    or persistent alike, in that layout."""
    from airflow_provider_kafka_zk.testing.simulator.scenarios import (
        READINESS_BLOCKERS,
        kraft_ready_cluster,
        mid_migration_cluster,
    )

    allowed = set()
    for phase in PHASES:
        real, _ = trees[phase]
        allowed |= shapes({p: (z.data, z.ephemeral) for p, z in real.items()})
    # blockers the recording did not plant, in the layouts the real 3.3.1 cluster showed (test_simulator_golden):
    # a 2.7 client's topic znode (the KAFKA-14190 precursor) and a deletion marker
    allowed |= {
        (
            "topic",
            False,
            shape({"version": 2, "partitions": {"0": [1]}, "adding_replicas": {}, "removing_replicas": {}}),
        ),
        ("delete-marker", False, None),
        # a reassignment in flight (§8 of the 3.3.1 observations; same format in 3.9)
        (
            "topic",
            False,
            shape(
                {
                    **json.loads(real["/brokers/topics/mig-a"].data or b""),
                    "adding_replicas": {"0": [2]},
                    "removing_replicas": {"0": [1]},
                }
            ),
        ),
    }
    clusters = {
        "kraft_ready_cluster": kraft_ready_cluster(),
        "mid_migration_cluster": mid_migration_cluster(),
    }
    for name, blocker in READINESS_BLOCKERS.items():
        cluster = kraft_ready_cluster(kafka_version=blocker.kafka_version)
        blocker.plant(cluster)
        clusters[name] = cluster
    unknown = {}
    for name, cluster in clusters.items():
        for record in render_zookeeper(cluster):
            if _NOT_RECORDED.match(record.path) or cluster.spec.kafka_version != "3.9.0":
                continue
            key = (kind_of(record.path), record.owner_broker is not None, znode_shape(record.data))
            if key not in allowed:
                unknown[f"{name}: {record.path}"] = key
    assert not unknown, unknown


def test_the_kraft_controllers_files_are_the_recorded_ones():
    """The controller's server.properties has the recorded controller's keys (with the security protocol
    map and log.dirs the docs' sample lacks) and its meta.properties is what ``kafka-storage format`` wrote:
    version 1, node.id, directory.id, cluster.id, in that order."""
    from airflow_provider_kafka_zk.testing.simulator.controller_host import (
        controller_hosts,
        controller_meta_properties,
        controller_server_properties,
    )

    cluster = RecordedMigration().play_to(RecordedPhase.CONTROLLER_PROVISIONED)
    (host,) = controller_hosts(cluster, Path("/hosts")).values()
    mine = _properties(controller_server_properties(cluster, host, "127.0.0.1:42181/k39"))
    real = _properties((GOLDEN / "config" / "controller-3000.properties").read_text())
    assert list(mine) == list(real)
    for key in (
        "process.roles",
        "node.id",
        "controller.listener.names",
        "zookeeper.metadata.migration.enable",
    ):
        assert mine[key] == real[key], key
    log = (GOLDEN / "logs" / "01-controller.txt").read_text()
    recorded = log[log.index("#\n#") :].split("\n")[:6]
    meta = controller_meta_properties(cluster, 3000).decode().split("\n")
    assert [line.split("=")[0] for line in meta[2:6]] == [line.split("=")[0] for line in recorded[2:6]]
    assert (
        meta[2] == recorded[2] and meta[4] == recorded[4] and meta[5] == recorded[5]
    )  # node.id, version, cluster.id


def test_a_finalized_migration_no_longer_writes_zookeeper() -> None:
    """After POST_MIGRATION no KRaftMigrationDriver runs: /migration stays as the last dual write left it
    (the recording stopped before finalizing: ActivationRecordsGenerator, 3.9.0-rc3)."""
    from airflow_provider_kafka_zk.testing.simulator import SimulationError
    from airflow_provider_kafka_zk.testing.simulator.recorded_migration import (
        RecordedMigration,
        RecordedPhase,
    )

    with pytest.raises(SimulationError, match="only a migration in dual-write"):
        RecordedMigration().cluster.finalize_kraft_migration()
    cluster = RecordedMigration().play_to(RecordedPhase.BROKERS_IN_KRAFT_MODE)
    before = cluster.kraft_migration
    assert cluster.kraft_controller_idles(2) == 4  # dual-write: a delta every 500 ms
    cluster.finalize_kraft_migration()
    frozen = cluster.kraft_migration
    assert frozen.finalized and frozen.kraft_metadata_offset > before.kraft_metadata_offset
    assert cluster.kraft_controller_idles(10) == 0
    assert (cluster.kraft_migration.kraft_metadata_offset, cluster.kraft_migration.zk_version) == (
        frozen.kraft_metadata_offset,
        frozen.zk_version,
    )
