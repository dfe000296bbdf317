"""confluent-kafka (librdkafka) over a secured listener (driven by
TestSecureInteropConfluent).

Usage: confluent_secure.py BOOTSTRAP TOPIC GROUP key=value...
The key=value pairs are librdkafka settings (security.protocol, SASL and
SSL options). Produces five records with an idempotent producer, consumes
them back in a consumer group (committing offsets), and prints what it read
as JSON; on an error prints {"error": "..."} and exits 1.
"""
import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer

bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
security = dict(arg.split("=", 1) for arg in sys.argv[4:])

errors = []


def on_error(err):
    errors.append(str(err))


def fail(msg):
    print(json.dumps({"error": msg}))
    sys.exit(1)


p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
              "error_cb": on_error, "message.timeout.ms": 20000, **security})
delivered = []
for i in range(5):
    p.produce(topic, value=f"secure-{i}".encode(),
              on_delivery=lambda err, msg: delivered.append(err))
p.flush(30)
if len(delivered) != 5 or any(delivered):
    fail(f"delivery: {delivered} {errors}")

c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "error_cb": on_error, **security})
c.subscribe([topic])
got = []
try:
    for _ in range(200):
        m = c.poll(0.25)
        if m is None:
            if len(got) >= 5:
                break
            continue
        if m.error():
            fail(str(m.error()))
        got.append(m.value().decode())
        if len(got) >= 5:
            c.commit(asynchronous=False)
            break
except KafkaException as e:
    fail(str(e))
finally:
    c.close()
print(json.dumps({"read": got}))
