"""librdkafka (python3-confluent-kafka) against kaas's request versions
(driven by TestLibrdkafkaVersions): a producer and a consumer group at the
versions librdkafka negotiates with ApiVersions, a consumer speaking as a
Kafka 0.9 client (no ApiVersions: Fetch v1, ListOffsets v0, message format
v0), an AdminClient listing topics and describing configs, and a lag
tool's read of __consumer_offsets (the group's partition, decoding
OffsetCommitKey v0/v1 and OffsetCommitValue as Apache writes them).
Prints, as JSON, what each saw.
"""
import json
import struct
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

bootstrap, topic, group, slot, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
out = {"errors": []}


def err_cb(err):
    out["errors"].append(str(err))


p = Producer({"bootstrap.servers": bootstrap, "error_cb": err_cb})
for i in range(n):
    p.produce(topic, value=f"v-{i}".encode(), partition=0)
out["undelivered"] = p.flush(30)


# A consumer group at the negotiated versions, committing.
g = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "error_cb": err_cb})
g.subscribe([topic])
read = []
for _ in range(300):
    m = g.poll(0.2)
    if m is None or m.error():
        if len(read) >= n:
            break
        continue
    read.append(m.value().decode())
g.commit(asynchronous=False)
g.close()
out["group_read"] = len(read)

# As a Kafka 0.9 client: old Fetch and ListOffsets, magic 0 messages.
old = Consumer({"bootstrap.servers": bootstrap, "group.id": group + "-old", "api.version.request": False,
                "broker.version.fallback": "0.9.0", "error_cb": err_cb})
old.assign([TopicPartition(topic, 0, 0)])
old_read = []
for _ in range(300):
    m = old.poll(0.2)
    if m is None or m.error():
        if len(old_read) >= n:
            break
        continue
    old_read.append(m.value().decode())
old.close()
out["old_read"] = len(old_read)

a = AdminClient({"bootstrap.servers": bootstrap})
md = a.list_topics(timeout=10)
out["topics"] = sorted(md.topics.keys())
res = a.describe_configs([ConfigResource("topic", topic)])
for _, f in res.items():
    out["cleanup_policy"] = f.result()["cleanup.policy"].value

# The lag tool: the group's partition of __consumer_offsets.
lag = Consumer({"bootstrap.servers": bootstrap, "group.id": group + "-lag", "enable.auto.commit": False,
                "error_cb": err_cb})
lag.assign([TopicPartition("__consumer_offsets", slot, 0)])
commits = {}
for _ in range(100):
    m = lag.poll(0.2)
    if m is None or m.error():
        if commits:
            break
        continue
    key = m.key()
    (version,) = struct.unpack(">h", key[:2])
    if version not in (0, 1):
        continue
    glen = struct.unpack(">h", key[2:4])[0]
    gname = key[4:4 + glen].decode()
    rest = key[4 + glen:]
    tlen = struct.unpack(">h", rest[:2])[0]
    tname = rest[2:2 + tlen].decode()
    (part,) = struct.unpack(">i", rest[2 + tlen:6 + tlen])
    if m.value() is None:
        commits.pop(f"{gname}/{tname}/{part}", None)
        continue
    (offset,) = struct.unpack(">q", m.value()[2:10])
    commits[f"{gname}/{tname}/{part}"] = offset
lag.close()
out["commits"] = commits
print(json.dumps(out))
