package coord

import (
	"maps"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entity config namespaces under the cluster's prefix: one key per
// entity and config, so that two brokers altering different configs of
// one entity at once both keep their change.
//
//	client-quotas/<entity>/<quota key>     a client quota's value
//	client-metrics/<subscription>/<config> a client-metrics subscription's config
//	features/<feature>/<level|epoch>       a finalized feature (KIP-584)
//	group-configs/<group>/<config>         a group config (GROUP resources)
//
// Entity names are path-safe (the broker escapes them).
const (
	ClientQuotas  = "client-quotas"
	ClientMetrics = "client-metrics"
	Features      = "features"
	GroupConfigs  = "group-configs"
)

func (k keys) entities(ns string) string { return k.root + ns + "/" }

// EntityStore keeps one namespace of entity configs in etcd, serving the
// same methods as the file store (configstore.EntityStore).
type EntityStore struct {
	s  *Session
	ns string
}

// Entities is the session's store for namespace ns.
func (s *Session) Entities(ns string) *EntityStore { return &EntityStore{s: s, ns: ns} }

// Load reads every entity of the namespace, and the etcd revision it
// reads at: a watched view older than it is older than what Load saw.
func (e *EntityStore) Load() (map[string]map[string]string, int64, error) {
	ctx, cancel := opContext()
	defer cancel()
	resp, err := e.s.cl.Get(ctx, e.s.keys.entities(e.ns), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	v := emptyView()
	for _, kv := range resp.Kvs {
		v.apply(e.s.keys, string(kv.Key), kv.Value)
	}
	return cloneEntities(v.Entities[e.ns]), resp.Header.Revision, nil
}

// Apply sets and removes configs of one entity in one transaction.
func (e *EntityStore) Apply(entity string, set map[string]string, remove []string) error {
	prefix := e.s.keys.entities(e.ns) + entity + "/"
	var ops []clientv3.Op
	for _, k := range remove {
		if _, also := set[k]; !also {
			ops = append(ops, clientv3.OpDelete(prefix+k))
		}
	}
	for k, v := range set {
		ops = append(ops, clientv3.OpPut(prefix+k, v))
	}
	if len(ops) == 0 {
		return nil
	}
	ctx, cancel := opContext()
	defer cancel()
	_, err := e.s.cl.Txn(ctx).Then(ops...).Commit()
	return err
}

// ApplyIfUnchanged sets configs of several entities in one transaction,
// only if no key of the namespace changed after revision rev (what Load
// returned): two brokers changing the namespace from what each read —
// the finalized features, whose epoch is the stored one plus one — cannot
// both succeed. false, nil: another change came first; load and decide
// again.
func (e *EntityStore) ApplyIfUnchanged(set map[string]map[string]string, rev int64) (bool, error) {
	var ops []clientv3.Op
	for entity, values := range set {
		prefix := e.s.keys.entities(e.ns) + entity + "/"
		for k, v := range values {
			ops = append(ops, clientv3.OpPut(prefix+k, v))
		}
	}
	if len(ops) == 0 {
		return true, nil
	}
	ctx, cancel := opContext()
	defer cancel()
	// A range compare holds for every key under the prefix (and for none:
	// a key never written has mod revision 0).
	unchanged := clientv3.Compare(clientv3.ModRevision(e.s.keys.entities(e.ns)).WithPrefix(), "<", rev+1)
	resp, err := e.s.cl.Txn(ctx).If(unchanged).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// applyEntity folds one entity config key into the view, copying the
// maps it changes (views are shared once published).
func (v *View) applyEntity(ns, rest string, value []byte) {
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 {
		return
	}
	entity, key := rest[:i], rest[i+1:]
	all := maps.Clone(v.Entities[ns])
	if all == nil {
		all = map[string]map[string]string{}
	}
	values := maps.Clone(all[entity])
	if values == nil {
		values = map[string]string{}
	}
	if value == nil {
		delete(values, key)
	} else {
		values[key] = string(value)
	}
	if len(values) == 0 {
		delete(all, entity)
	} else {
		all[entity] = values
	}
	next := maps.Clone(v.Entities)
	if next == nil {
		next = map[string]map[string]map[string]string{}
	}
	next[ns] = all
	v.Entities = next
	v.EntitiesRev++
}

func cloneEntities(m map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}
