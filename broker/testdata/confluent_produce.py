"""An idempotent librdkafka producer against kaas (driven by
TestClusterLibrdkafka): produces N records round the topic's partitions,
waits for every delivery report and prints, as JSON, how many were
delivered and every error librdkafka reported.
"""
import json
import sys

from confluent_kafka import Producer

bootstrap, topic, partitions, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

errors = []
delivered = [0]


def report(err, msg):
    if err is not None:
        errors.append(str(err))
    else:
        delivered[0] += 1


p = Producer({
    "bootstrap.servers": bootstrap,
    "enable.idempotence": True,
    "linger.ms": 5,
    "error_cb": lambda err: errors.append("error_cb: " + str(err)),
})
for i in range(n):
    p.produce(topic, value=f"rdk-{i}".encode(), partition=i % partitions, on_delivery=report)
    p.poll(0)
left = p.flush(60)
print(json.dumps({"delivered": delivered[0], "undelivered": left, "errors": errors}))
