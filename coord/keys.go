// Package coord is kaas's cluster coordination through etcd: one session
// (an etcd lease) per broker with the deadline it may act by, membership,
// the cluster metadata (topics, configs, cluster id), owner keys and
// leader epochs, and a watched view of all of it. It holds no consensus of
// its own: every decision that must be agreed is an etcd transaction.
//
// Key layout under /kaas/<cluster-name>/:
//
//	cluster-id                   the Kafka cluster id (created once)
//	peer-secret                  the brokers' credential towards each other (created once)
//	brokers/<id>                 a live broker (JSON Member), under its lease
//	topics/<name>                topic metadata (JSON topicstore.Topic)
//	configs/cluster-default      dynamic cluster-wide broker configs (JSON)
//	configs/broker-<id>          one broker's dynamic configs (JSON)
//	client-quotas/<entity>/<key> a client quota's value (entities.go)
//	client-metrics/<name>/<key>  a client-metrics subscription's config
//	owners/<unit>                the owner of a unit (JSON Owner), under its lease
//	epochs/<unit>                the unit's last leader epoch (decimal), kept forever
//	reassignments/<unit>         the broker an operator assigned the unit to (JSON Reassignment)
//
// Units are named by state/ownership (p/<topic>/<n>, t/<slot>, g/<slot>).
package coord

import (
	"fmt"
	"strconv"
	"strings"
)

type keys struct{ root string }

func newKeys(cluster string) keys { return keys{root: "/kaas/" + cluster + "/"} }

func (k keys) clusterID() string        { return k.root + "cluster-id" }
func (k keys) peerSecret() string       { return k.root + "peer-secret" }
func (k keys) brokers() string          { return k.root + "brokers/" }
func (k keys) broker(id int32) string   { return k.brokers() + strconv.Itoa(int(id)) }
func (k keys) topics() string           { return k.root + "topics/" }
func (k keys) topic(name string) string { return k.topics() + name }
func (k keys) configs() string          { return k.root + "configs/" }
func (k keys) owners() string           { return k.root + "owners/" }
func (k keys) owner(unit string) string { return k.owners() + unit }
func (k keys) epochs() string           { return k.root + "epochs/" }
func (k keys) epoch(unit string) string { return k.epochs() + unit }

func (k keys) brokerConfigs(perBroker bool, id int32) string {
	if perBroker {
		return fmt.Sprintf("%sbroker-%d", k.configs(), id)
	}
	return k.configs() + "cluster-default"
}

// under returns the rest of key after prefix, and whether it was under it.
func under(key, prefix string) (string, bool) { return strings.CutPrefix(key, prefix) }
