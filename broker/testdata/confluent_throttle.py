"""librdkafka sees kaas's quota throttle times (driven by
TestLibrdkafkaSeesThrottleTimes).

Produces random, uncompressed values as client id sys.argv[3] until
librdkafka has reported two throttles (or 20 s passed) and prints, as JSON, how many throttle events librdkafka's
throttle_cb reported, the largest throttle, and how many messages were
delivered.
"""
import json
import os
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, client_id = sys.argv[1], sys.argv[2], sys.argv[3]
events = []

p = Producer({
    "bootstrap.servers": bootstrap,
    "client.id": client_id,
    "compression.type": "none",
    "linger.ms": 5,
    "queue.buffering.max.messages": 20,
    "throttle_cb": lambda ev: events.append(ev.throttle_time),
})
delivered = [0]

def done(err, _msg):
    if err is None:
        delivered[0] += 1

deadline = time.time() + 20
while time.time() < deadline and len(events) < 2:
    try:
        p.produce(topic, value=os.urandom(1000), on_delivery=done)
    except BufferError:
        pass
    p.poll(0.01)
p.flush(60)
print(json.dumps({"throttles": len(events), "max_throttle": max(events, default=0), "delivered": delivered[0]}))
