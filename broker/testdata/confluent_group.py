"""A librdkafka consumer group against kaas (driven by TestLibrdkafkaConsumerGroup).

Two confluent-kafka consumers in one group (librdkafka's own join/sync,
heartbeats and assignors, cooperative-sticky) read a topic to its end,
commit synchronously and close. Prints, as JSON, what each consumer read
and the partitions each was assigned.
"""
import json
import sys
import threading
import time

from confluent_kafka import Consumer

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
    mine = []
    while not stop.is_set():
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        mine.append(m.value().decode())
        with lock:
            seen.append(m.value().decode())
        c.commit(message=m, asynchronous=False)
    results[name] = {"read": mine, "assigned": sorted(assigned)}
    c.close()


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
