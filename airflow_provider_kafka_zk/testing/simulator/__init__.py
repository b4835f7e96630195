"""A ZooKeeper-mode Kafka cluster simulator that writes Kafka's exact ZooKeeper and disk formats.

Declare a cluster (:class:`ClusterSpec`), change it with incident steps (:class:`SimulatedCluster`),
then put it into a real ZooKeeper and onto disk (:class:`DeployedCluster`). Everything later code
reads is what a real cluster of that release would show it; ``SimulatedCluster.incidents`` says
what was planted, for tests.
"""

from .cluster import Incident, SimulatedCluster, SimulationError
from .deploy import DeployedCluster
from .disk_writer import BrokerHost
from .scenarios import deletion_disabled_cluster, healthy_cluster, incident_cluster, topic_id_repair_cluster
from .spec import BrokerSpec, ClusterSpec, TopicSpec

__all__ = [
    "BrokerHost",
    "BrokerSpec",
    "ClusterSpec",
    "DeployedCluster",
    "Incident",
    "SimulatedCluster",
    "SimulationError",
    "TopicSpec",
    "deletion_disabled_cluster",
    "healthy_cluster",
    "incident_cluster",
    "topic_id_repair_cluster",
]
