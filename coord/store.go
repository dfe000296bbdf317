package coord

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kaas/storage/topicstore"
)

// opTimeout bounds one metadata operation against etcd.
const opTimeout = 10 * time.Second

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// ClusterID returns the cluster's Kafka cluster id, creating it (a random
// base64 UUID, as Kafka's) if no broker has yet.
func (s *Session) ClusterID() (string, error) {
	u := topicstore.NewUUID()
	id, err := s.createOnce(s.keys.clusterID(), base64.RawURLEncoding.EncodeToString(u[:]))
	if err != nil {
		return "", fmt.Errorf("cluster id: %w", err)
	}
	return id, nil
}

// PeerSecret is the cluster's broker-to-broker credential (created once,
// 256 random bits): a broker proves it is one of the cluster's brokers
// with it when it connects to a peer (WriteTxnMarkers and
// AddPartitionsToTxn v4 come only from brokers). Whoever can read etcd
// can read it, as they can read everything else the cluster decides.
func (s *Session) PeerSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	secret, err := s.createOnce(s.keys.peerSecret(), base64.RawURLEncoding.EncodeToString(b[:]))
	if err != nil {
		return "", fmt.Errorf("peer secret: %w", err)
	}
	return secret, nil
}

// createOnce stores value at key unless the key exists, and returns what
// the key holds.
func (s *Session) createOnce(key, value string) (string, error) {
	ctx, cancel := opContext()
	defer cancel()
	resp, err := s.cl.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", err
	}
	if resp.Succeeded {
		return value, nil
	}
	return string(resp.Responses[0].GetResponseRange().Kvs[0].Value), nil
}

// TopicStore keeps topic metadata in etcd; it serves the same methods as
// the single-broker file store (topicstore.Store), plus Create.
type TopicStore struct{ s *Session }

// Topics is the session's topic store.
func (s *Session) Topics() *TopicStore { return &TopicStore{s} }

// ErrTopicExists is Create's answer for a name another broker holds.
var ErrTopicExists = errors.New("topic already exists")

// Create stores a new topic only if no topic of that name exists.
func (t *TopicStore) Create(tp topicstore.Topic) error {
	ctx, cancel := opContext()
	defer cancel()
	b, err := json.Marshal(tp)
	if err != nil {
		return err
	}
	key := t.s.keys.topic(tp.Name)
	resp, err := t.s.cl.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrTopicExists
	}
	return nil
}

// Save writes a topic's metadata (growth, config changes).
func (t *TopicStore) Save(tp topicstore.Topic) error {
	ctx, cancel := opContext()
	defer cancel()
	b, err := json.Marshal(tp)
	if err != nil {
		return err
	}
	_, err = t.s.cl.Put(ctx, t.s.keys.topic(tp.Name), string(b))
	return err
}

// Delete removes a topic's metadata, and with it the reassignments of its
// partitions (a topic created again under the name starts afresh).
func (t *TopicStore) Delete(name string) error {
	ctx, cancel := opContext()
	defer cancel()
	_, err := t.s.cl.Txn(ctx).Then(clientv3.OpDelete(t.s.keys.topic(name)), t.s.reassignmentsOfTopic(name)).Commit()
	return err
}

// Load reads every topic.
func (t *TopicStore) Load() ([]topicstore.Topic, error) {
	ctx, cancel := opContext()
	defer cancel()
	resp, err := t.s.cl.Get(ctx, t.s.keys.topics(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []topicstore.Topic
	for _, kv := range resp.Kvs {
		var tp topicstore.Topic
		if err := json.Unmarshal(kv.Value, &tp); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", kv.Key, err)
		}
		out = append(out, tp)
	}
	return out, nil
}

// ConfigStore keeps the dynamic broker config layers in etcd, serving the
// same methods as the file store (configstore.Store).
type ConfigStore struct{ s *Session }

// Configs is the session's broker config store.
func (s *Session) Configs() *ConfigStore { return &ConfigStore{s} }

// Load reads a dynamic layer; a missing key is an empty layer.
func (c *ConfigStore) Load(perBroker bool) (map[string]string, error) {
	ctx, cancel := opContext()
	defer cancel()
	resp, err := c.s.cl.Get(ctx, c.s.keys.brokerConfigs(perBroker, c.s.self.ID))
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	if len(resp.Kvs) > 0 {
		if err := json.Unmarshal(resp.Kvs[0].Value, &values); err != nil {
			return nil, err
		}
	}
	return values, nil
}

// Save writes a dynamic layer.
func (c *ConfigStore) Save(perBroker bool, values map[string]string) error {
	ctx, cancel := opContext()
	defer cancel()
	b, err := json.Marshal(values)
	if err != nil {
		return err
	}
	_, err = c.s.cl.Put(ctx, c.s.keys.brokerConfigs(perBroker, c.s.self.ID), string(b))
	return err
}

// Prior is a unit to claim with the last leader epoch the caller's view
// shows for it (Known false: the unit never had an owner).
type Prior struct {
	Unit  string
	Epoch int32
	Known bool
}

// Claimed is the outcome of one unit's claim: OK with the new leader
// epoch, or not (another broker's key exists, or the epoch moved on since
// the caller's view: the caller waits for its view to catch up). Rev is
// the etcd revision of the claim: a view older than it cannot show the
// key.
type Claimed struct {
	Unit  string
	Epoch int32
	Rev   int64
	OK    bool
	// Lease is the lease the owner key was created under: the unit may
	// act only while Session.AliveUnder(Lease).
	Lease LeaseID
}

// claimBatch is how many units one etcd transaction claims: each is a
// nested transaction of two compares and two puts, and etcd refuses a
// transaction whose operations, nested ones included, pass --max-txn-ops
// (128 by default).
const claimBatch = 60

// ClaimAll makes this broker the owner of every unit of priors nobody
// owns now, in as few etcd transactions as the batch size allows (a
// failover claims a dead broker's whole share at once, rather than one
// round trip per unit). For each unit, atomically and independently of
// the others: the owner key is created under this broker's lease, only if
// no key exists (a new owner starts only after the old key is gone) and
// the unit's epoch key still holds the prior epoch; the epoch key is
// raised by one (a unit's first owner leads at epoch 0, as Apache's first
// leader).
func (s *Session) ClaimAll(priors []Prior) ([]Claimed, error) {
	leaseID := s.Lease()
	if leaseID == 0 || !s.Alive() {
		return nil, errors.New("no live session lease")
	}
	out := make([]Claimed, 0, len(priors))
	for len(priors) > 0 {
		n := min(len(priors), claimBatch)
		got, err := s.claimBatch(leaseID, priors[:n])
		out = append(out, got...)
		if err != nil {
			return out, err
		}
		priors = priors[n:]
	}
	return out, nil
}

func (s *Session) claimBatch(leaseID clientv3.LeaseID, priors []Prior) ([]Claimed, error) {
	ops := make([]clientv3.Op, 0, len(priors))
	out := make([]Claimed, 0, len(priors))
	for _, p := range priors {
		ek, ok := s.keys.epoch(p.Unit), s.keys.owner(p.Unit)
		epoch := int32(0)
		same := clientv3.Compare(clientv3.CreateRevision(ek), "=", 0)
		if p.Known {
			epoch = p.Epoch + 1
			same = clientv3.Compare(clientv3.Value(ek), "=", strconv.Itoa(int(p.Epoch)))
		}
		val, _ := json.Marshal(Owner{Broker: s.self.ID, Epoch: epoch})
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ok), "=", 0), same},
			[]clientv3.Op{clientv3.OpPut(ok, string(val), clientv3.WithLease(leaseID)), clientv3.OpPut(ek, strconv.Itoa(int(epoch)))},
			nil))
		out = append(out, Claimed{Unit: p.Unit, Epoch: epoch, Lease: leaseID})
	}
	ctx, cancel := opContext()
	defer cancel()
	resp, err := s.cl.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	for i, r := range resp.Responses {
		out[i].OK = r.GetResponseTxn().GetSucceeded()
		out[i].Rev = resp.Header.Revision
	}
	return out, nil
}

// Claim claims one unit at the epoch etcd holds now (ClaimAll's
// single-unit form, for callers without a view).
func (s *Session) Claim(unit string) (epoch int32, rev int64, ok bool, err error) {
	ctx, cancel := opContext()
	cur, err := s.cl.Get(ctx, s.keys.epoch(unit))
	cancel()
	if err != nil {
		return 0, 0, false, err
	}
	p := Prior{Unit: unit}
	if len(cur.Kvs) > 0 {
		e, _ := strconv.ParseInt(string(cur.Kvs[0].Value), 10, 32)
		p.Epoch, p.Known = int32(e), true
	}
	got, err := s.ClaimAll([]Prior{p})
	if err != nil {
		return 0, 0, false, err
	}
	return got[0].Epoch, got[0].Rev, got[0].OK, nil
}

// Release deletes this broker's owner key for unit (after the unit was
// stopped and fsynced), if it is still this broker's at that epoch.
func (s *Session) Release(unit string, epoch int32) error {
	ctx, cancel := opContext()
	defer cancel()
	val, _ := json.Marshal(Owner{Broker: s.self.ID, Epoch: epoch})
	key := s.keys.owner(unit)
	_, err := s.cl.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", string(val))).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}
