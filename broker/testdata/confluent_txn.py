"""librdkafka transactions against kaas (driven by TestLibrdkafkaTransactions).

Commits, aborts and commits again through confluent-kafka's transactional
producer, then reads the topic back with read_committed and
read_uncommitted consumers and prints what each saw as JSON.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic = sys.argv[1], sys.argv[2]

p = Producer({
    "bootstrap.servers": bootstrap,
    "transactional.id": "librdkafka-txn",
    "enable.idempotence": True,
})
p.init_transactions(30)

def txn(prefix, n, commit):
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % 2)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)

txn("c1", 5, True)
txn("a1", 4, False)
txn("c2", 3, True)

def read(isolation):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "librdkafka-txn-" + isolation,
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    tps = [TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)]
    c.assign(tps)
    # Every transaction is complete, so the high watermarks are where both
    # isolation levels end; read until the positions reach them.
    ends = {tp.partition: c.get_watermark_offsets(tp, 10)[1] for tp in tps}
    got, deadline = [], time.time() + 30
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
        pos = {tp.partition: tp.offset for tp in c.position(tps)}
        if all(pos[p] >= ends[p] for p in ends):
            break
    c.close()
    return sorted(got)

print(json.dumps({"read_committed": read("read_committed"), "read_uncommitted": read("read_uncommitted")}))
