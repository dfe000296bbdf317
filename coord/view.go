package coord

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kaas/storage/topicstore"
)

// Owner is who owns a unit and at which leader epoch.
type Owner struct {
	Broker int32 `json:"broker"`
	Epoch  int32 `json:"epoch"`
}

// View is one consistent snapshot of the cluster state in etcd, as of
// revision Rev. Views are immutable; the watcher replaces them whole.
type View struct {
	Rev       int64
	ClusterID string
	Members   map[int32]Member
	Topics    map[string]topicstore.Topic
	// Configs maps "cluster-default" and "broker-<id>" to their values.
	Configs map[string]map[string]string
	Owners  map[string]Owner
	Epochs  map[string]int32
	// Reassignments are the operators' choices of owner, by unit
	// (reassignments.go; broker/cluster_reassignments.go).
	Reassignments map[string]Reassignment
	// Entities maps a namespace (ClientQuotas, ClientMetrics) to its
	// entities' configs; EntitiesRev counts changes to any of them, so a
	// watcher sees cheaply whether to re-apply them.
	Entities    map[string]map[string]map[string]string
	EntitiesRev int64
}

// MemberIDs lists the live brokers' ids.
func (v *View) MemberIDs() []int32 {
	out := make([]int32, 0, len(v.Members))
	for id := range v.Members {
		out = append(out, id)
	}
	return out
}

func emptyView() *View {
	return &View{
		Members: map[int32]Member{}, Topics: map[string]topicstore.Topic{},
		Configs: map[string]map[string]string{}, Owners: map[string]Owner{}, Epochs: map[string]int32{},
		Reassignments: map[string]Reassignment{},
	}
}

func (v *View) clone() *View {
	return &View{
		Rev: v.Rev, ClusterID: v.ClusterID,
		Members: maps.Clone(v.Members), Topics: maps.Clone(v.Topics),
		Configs: maps.Clone(v.Configs), Owners: maps.Clone(v.Owners), Epochs: maps.Clone(v.Epochs),
		Reassignments: maps.Clone(v.Reassignments),
		Entities:      v.Entities, EntitiesRev: v.EntitiesRev, // applyEntity copies what it changes
	}
}

// apply folds one key's new value (nil: deleted) into the view.
func (v *View) apply(k keys, key string, value []byte) {
	set := value != nil
	if v.applyReassignment(k, key, value) {
		return
	}
	switch {
	case key == k.clusterID():
		v.ClusterID = string(value)
	case strings.HasPrefix(key, k.brokers()):
		rest, _ := under(key, k.brokers())
		id, err := strconv.Atoi(rest)
		if err != nil {
			return
		}
		if !set {
			delete(v.Members, int32(id))
			return
		}
		var m Member
		if json.Unmarshal(value, &m) == nil {
			v.Members[int32(id)] = m
		}
	case strings.HasPrefix(key, k.topics()):
		name, _ := under(key, k.topics())
		if !set {
			delete(v.Topics, name)
			return
		}
		var t topicstore.Topic
		if json.Unmarshal(value, &t) == nil {
			v.Topics[name] = t
		}
	case strings.HasPrefix(key, k.configs()):
		name, _ := under(key, k.configs())
		if !set {
			delete(v.Configs, name)
			return
		}
		m := map[string]string{}
		if json.Unmarshal(value, &m) == nil {
			v.Configs[name] = m
		}
	case strings.HasPrefix(key, k.entities(ClientQuotas)):
		rest, _ := under(key, k.entities(ClientQuotas))
		v.applyEntity(ClientQuotas, rest, value)
	case strings.HasPrefix(key, k.entities(ClientMetrics)):
		rest, _ := under(key, k.entities(ClientMetrics))
		v.applyEntity(ClientMetrics, rest, value)
	case strings.HasPrefix(key, k.entities(GroupConfigs)):
		rest, _ := under(key, k.entities(GroupConfigs))
		v.applyEntity(GroupConfigs, rest, value)
	case strings.HasPrefix(key, k.entities(Features)):
		rest, _ := under(key, k.entities(Features))
		v.applyEntity(Features, rest, value)
	case strings.HasPrefix(key, k.owners()):
		unit, _ := under(key, k.owners())
		if !set {
			delete(v.Owners, unit)
			return
		}
		var o Owner
		if json.Unmarshal(value, &o) == nil {
			v.Owners[unit] = o
		}
	case strings.HasPrefix(key, k.epochs()):
		unit, _ := under(key, k.epochs())
		if !set {
			delete(v.Epochs, unit)
			return
		}
		if e, err := strconv.Atoi(string(value)); err == nil {
			v.Epochs[unit] = int32(e)
		}
	}
}

// Watcher keeps a View of the cluster current through an etcd watch on
// the cluster's prefix, and calls onChange after each change is applied.
type Watcher struct {
	s        *Session
	view     atomic.Pointer[View]
	onChange func(old, cur *View)
	cancel   context.CancelFunc
	done     chan struct{}
}

// Watch loads the whole cluster state and follows it. onChange runs on
// the watcher's goroutine, one call at a time.
func (s *Session) Watch(onChange func(old, cur *View)) (*Watcher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{s: s, onChange: onChange, cancel: cancel, done: make(chan struct{})}
	if err := w.load(ctx); err != nil {
		cancel()
		return nil, err
	}
	go w.run(ctx)
	return w, nil
}

// View is the latest snapshot.
func (w *Watcher) View() *View { return w.view.Load() }

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

func (w *Watcher) load(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := w.s.cl.Get(rctx, w.s.keys.root, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	v := emptyView()
	for _, kv := range resp.Kvs {
		v.apply(w.s.keys, string(kv.Key), kv.Value)
	}
	v.Rev = resp.Header.Revision
	old := w.view.Swap(v)
	if old != nil && w.onChange != nil {
		w.onChange(old, v)
	}
	return nil
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	for ctx.Err() == nil {
		rev := w.view.Load().Rev
		wch := w.s.cl.Watch(clientv3.WithRequireLeader(ctx), w.s.keys.root, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				w.s.log.Warn("cluster watch interrupted; reloading", "err", err)
				break
			}
			if len(resp.Events) == 0 {
				continue
			}
			old := w.view.Load()
			v := old.clone()
			for _, ev := range resp.Events {
				var val []byte
				if ev.Type == mvccpb.PUT {
					val = ev.Kv.Value
				}
				v.apply(w.s.keys, string(ev.Kv.Key), val)
			}
			v.Rev = resp.Header.Revision
			w.view.Store(v)
			if w.onChange != nil {
				w.onChange(old, v)
			}
		}
		// The watch ended (etcd lost, compaction, no leader): start over
		// from a full load once etcd answers again.
		for ctx.Err() == nil {
			if err := w.load(ctx); err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}
