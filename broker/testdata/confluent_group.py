"""A librdkafka consumer group against kaas (driven by TestLibrdkafkaConsumerGroup).

Two confluent-kafka consumers in one group (librdkafka's own join/sync,
heartbeats and assignors, cooperative-sticky) read a topic to its end,
commit synchronously and close. Prints, as JSON, what each consumer read,
the partitions each was assigned, the records whose commit never
succeeded (a record whose offset was not committed may be read again by
the consumer its partition moves to, as Kafka promises: at least once),
and the error that ended a consumer, if any.

A commit can meet a rebalance: a second consumer joining after the first
generation formed (the more likely the more loaded the machine) makes
the group CompletingRebalance for a moment, and a commit then is
REBALANCE_IN_PROGRESS, as Apache answers; librdkafka raises it from a
synchronous commit. Such a commit is retried until the rebalance is
through (the commit then carries the new generation).
"""
import json
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException

RETRIED = (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION)

bootstrap, topic, group, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

lock = threading.Lock()
seen = []
results = {}


def run(name, stop):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200,
    })
    assigned = set()

    def on_assign(consumer, parts):
        assigned.update(p.partition for p in parts)

    def on_revoke(consumer, parts):
        assigned.difference_update(p.partition for p in parts)

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    mine, uncommitted, error = [], [], None
    try:
        while not stop.is_set():
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            value = m.value().decode()
            mine.append(value)
            with lock:
                seen.append(value)
            if not commit(c, m):
                uncommitted.append(value)
    except Exception as e:  # reported to the test, not lost with the thread
        error = repr(e)
    results[name] = {"read": mine, "assigned": sorted(assigned), "uncommitted": uncommitted, "error": error}
    c.close()


def commit(c, m):
    """Commits m's offset; retries while a rebalance is in the way (False
    if it is still in the way after 30 s)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            parts = c.commit(message=m, asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() not in RETRIED:
                raise
        else:
            failed = [p.error for p in parts or [] if p.error is not None]
            if not failed:
                return True
            if any(err.code() not in RETRIED for err in failed):
                raise KafkaException(failed[0])
        time.sleep(0.05)
    return False


stop = threading.Event()
threads = [threading.Thread(target=run, args=(n, stop)) for n in ("rd-a", "rd-b")]
for t in threads:
    t.start()
deadline = time.time() + 60
while time.time() < deadline:
    with lock:
        if len(seen) >= expected:
            break
    time.sleep(0.1)
stop.set()
for t in threads:
    t.join()
print(json.dumps(results))
