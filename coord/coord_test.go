package coord_test

import (
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"kaas/coord"
	"kaas/coord/etcdembed"
	"kaas/storage/topicstore"
)

func startEtcd(t *testing.T) *etcdembed.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := etcdembed.Start(etcdembed.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func join(t *testing.T, endpoint string, id int32) (*coord.Session, error) {
	t.Helper()
	s, err := coord.Join(t.Context(), coord.Config{
		Endpoints: []string{endpoint}, Cluster: "test", BrokerID: id,
		Advertised: "127.0.0.1:9092", SessionTTL: 2 * time.Second, DialTimeout: 2 * time.Second,
	})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMembershipOwnersAndMetadata(t *testing.T) {
	e := startEtcd(t)
	a, err := join(t, e.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Alive() || a.Remaining() <= 0 || a.Remaining() > 2*time.Second {
		t.Fatalf("fresh session: alive=%v remaining=%v", a.Alive(), a.Remaining())
	}
	// A second broker with the same id refuses to start, naming why.
	if _, err := join(t, e.Endpoint(), 1); !errors.Is(err, coord.ErrDuplicateBroker) || !strings.Contains(err.Error(), "broker id 1") {
		t.Fatalf("duplicate id: got %v", err)
	}
	w, err := a.Watch(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	b, err := join(t, e.Endpoint(), 2)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both members in the view", func() bool { return len(w.View().Members) == 2 })

	// The cluster id is created once and shared.
	id1, err := a.ClusterID()
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := b.ClusterID(); id2 != id1 || id1 == "" {
		t.Fatalf("cluster ids %q %q", id1, id2)
	}
	// Topics: created once, seen by every broker through the watch.
	tp := topicstore.Topic{Name: "orders", ID: topicstore.NewUUID(), Partitions: 3}
	if err := b.Topics().Create(tp); err != nil {
		t.Fatal(err)
	}
	if err := a.Topics().Create(tp); !errors.Is(err, coord.ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	eventually(t, "the topic in a's view", func() bool { return w.View().Topics["orders"].ID == tp.ID })

	// Ownership: one owner at a time; the epoch rises on every change.
	ep, _, ok, err := a.Claim("p/orders/0")
	if err != nil || !ok || ep != 0 {
		t.Fatalf("first claim: %d %v %v", ep, ok, err)
	}
	if _, _, ok, err := b.Claim("p/orders/0"); err != nil || ok {
		t.Fatalf("claim of an owned unit: ok=%v err=%v", ok, err)
	}
	if err := a.Release("p/orders/0", ep); err != nil {
		t.Fatal(err)
	}
	ep2, _, ok, err := b.Claim("p/orders/0")
	if err != nil || !ok || ep2 != 1 {
		t.Fatalf("claim after release: %d %v %v", ep2, ok, err)
	}
	eventually(t, "b's ownership in the view", func() bool {
		o, ok := w.View().Owners["p/orders/0"]
		return ok && o.Broker == 2 && o.Epoch == 1
	})

	// A broker that leaves takes its owner keys with it; the next owner
	// gets a higher epoch.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b gone with its keys", func() bool {
		_, owned := w.View().Owners["p/orders/0"]
		return len(w.View().Members) == 1 && !owned
	})
	if ep3, _, ok, err := a.Claim("p/orders/0"); err != nil || !ok || ep3 != 2 {
		t.Fatalf("claim after the owner left: %d %v %v", ep3, ok, err)
	}
}

// etcd unreachable at start: a clear error, fast.
func TestUnreachableEtcd(t *testing.T) {
	start := time.Now()
	_, err := join(t, "http://127.0.0.1:1", 1)
	if err == nil || !strings.Contains(err.Error(), "cannot reach etcd") {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
}

// etcd lost while running: the session stops being alive before the
// lease could expire, and is alive again once etcd is back.
func TestEtcdLostAndBack(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	e, err := etcdembed.Start(etcdembed.Config{Listen: "127.0.0.1:0", DataDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ep := e.Endpoint()
	s, err := join(t, ep, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	lostAt := time.Now()
	eventually(t, "not alive", func() bool { return !s.Alive() })
	if d := time.Since(lostAt); d > 2*time.Second {
		t.Fatalf("still alive %v after etcd went away (TTL 2s)", d)
	}
	listen := strings.TrimPrefix(ep, "http://")
	e2, err := etcdembed.Start(etcdembed.Config{Listen: listen, DataDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	eventually(t, "alive again", s.Alive)
}

// ClaimAll claims a dead broker's whole share in a few transactions: each
// unit on its own terms (a unit someone owns, or whose epoch moved past
// the caller's view, is left alone; the others are claimed), across more
// units than one etcd transaction may hold.
func TestClaimAllBatches(t *testing.T) {
	e := startEtcd(t)
	a, err := join(t, e.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := join(t, e.Endpoint(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := b.Claim("p/t/0"); err != nil || !ok {
		t.Fatalf("b's claim: %v %v", ok, err)
	}
	if _, _, ok, err := b.Claim("p/t/1"); err != nil || !ok {
		t.Fatalf("b's claim: %v %v", ok, err)
	}
	if err := b.Release("p/t/1", 0); err != nil {
		t.Fatal(err)
	}
	const n = 150 // three transactions
	var priors []coord.Prior
	for i := range n {
		priors = append(priors, coord.Prior{Unit: "p/t/" + strconv.Itoa(i)})
	}
	priors[1].Known, priors[1].Epoch = true, 0 // released at epoch 0: claimable at 1
	priors[2].Known, priors[2].Epoch = true, 5 // a stale view: never had an owner
	got, err := a.ClaimAll(priors)
	if err != nil || len(got) != n {
		t.Fatalf("ClaimAll: %d results, %v", len(got), err)
	}
	for i, c := range got {
		want := i != 0 && i != 2
		if c.Unit != priors[i].Unit || c.OK != want {
			t.Errorf("unit %d: %+v, want claimed=%v", i, c, want)
		}
	}
	if got[1].Epoch != 1 || got[3].Epoch != 0 {
		t.Errorf("epochs: released unit %d, fresh unit %d; want 1 and 0", got[1].Epoch, got[3].Epoch)
	}
	w, err := a.Watch(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	v := w.View()
	owned := 0
	for _, o := range v.Owners {
		if o.Broker == 1 {
			owned++
		}
	}
	if owned != n-2 || v.Owners["p/t/0"].Broker != 2 {
		t.Fatalf("a owns %d units (want %d), p/t/0 is %+v", owned, n-2, v.Owners["p/t/0"])
	}
}

// Issue 21: a unit may act only under the lease it was claimed with. When
// the lease is lost (here revoked behind the session's back, as etcd
// expires it under a paused broker) the session registers again with a
// new lease — Alive is true again — but AliveUnder the claim's lease
// never is, and the new lease is granted only after OnLost returned.
func TestUnitsActOnlyUnderTheirOwnLease(t *testing.T) {
	e := startEtcd(t)
	s, err := join(t, e.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimAll([]coord.Prior{{Unit: "p/t/0"}})
	if err != nil || len(got) != 1 || !got[0].OK || got[0].Lease != s.Lease() {
		t.Fatalf("claim: %+v, %v (session lease %x)", got, err, s.Lease())
	}
	claimed := got[0].Lease
	if !s.AliveUnder(claimed) {
		t.Fatal("not alive under the lease just claimed with")
	}
	release := make(chan struct{})
	inLost := make(chan bool, 1)
	s.OnLost(func() {
		inLost <- s.AliveUnder(claimed) || s.Alive()
		<-release
	})
	if _, err := s.Client().Revoke(t.Context(), claimed); err != nil {
		t.Fatal(err)
	}
	select {
	case alive := <-inLost:
		if alive {
			t.Fatal("alive while the loss is being handled")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the lease loss was not noticed")
	}
	if s.Lease() != 0 || s.Alive() {
		t.Fatalf("a lease (%x) granted before OnLost returned", s.Lease())
	}
	close(release)
	eventually(t, "a new lease", s.Alive)
	if s.Lease() == claimed || s.AliveUnder(claimed) {
		t.Fatalf("alive under the lost lease %x (session lease now %x)", claimed, s.Lease())
	}
	if !s.AliveUnder(s.Lease()) {
		t.Fatal("not alive under the new lease")
	}
}

// TestEntitiesApplyIfUnchanged: a conditional write of a namespace goes
// through only if nothing in the namespace changed after the revision it
// was decided on — of two brokers updating the finalized features from
// what each read, one wins and the other is told to read again.
func TestEntitiesApplyIfUnchanged(t *testing.T) {
	e := startEtcd(t)
	a, err := join(t, e.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := join(t, e.Endpoint(), 2)
	if err != nil {
		t.Fatal(err)
	}
	fa, fb := a.Entities(coord.Features), b.Entities(coord.Features)

	// Nothing stored yet: both read the empty namespace.
	_, revA, err := fa.Load()
	if err != nil {
		t.Fatal(err)
	}
	_, revB, err := fb.Load()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := fa.ApplyIfUnchanged(map[string]map[string]string{"transaction.version": {"level": "1", "epoch": "1"}}, revA)
	if err != nil || !ok {
		t.Fatalf("first conditional write: applied=%v err=%v", ok, err)
	}
	ok, err = fb.ApplyIfUnchanged(map[string]map[string]string{"transaction.version": {"level": "2", "epoch": "1"}}, revB)
	if err != nil || ok {
		t.Fatalf("write decided on a stale read: applied=%v err=%v, want refused", ok, err)
	}
	got, rev, err := fb.Load()
	if err != nil {
		t.Fatal(err)
	}
	if v := got["transaction.version"]; v["level"] != "1" || v["epoch"] != "1" {
		t.Fatalf("after the refused write: %v, want the first write's level 1 epoch 1", v)
	}
	// Read again, decided again: it goes through.
	ok, err = fb.ApplyIfUnchanged(map[string]map[string]string{"transaction.version": {"level": "2", "epoch": "2"}}, rev)
	if err != nil || !ok {
		t.Fatalf("write on a fresh read: applied=%v err=%v", ok, err)
	}
	// A change to another namespace does not refuse it.
	_, rev, _ = fa.Load()
	if err := a.Entities(coord.ClientQuotas).Apply("user=x", map[string]string{"producer_byte_rate": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := fa.ApplyIfUnchanged(map[string]map[string]string{"transaction.version": {"level": "1", "epoch": "3"}}, rev); err != nil || !ok {
		t.Fatalf("write after a change elsewhere: applied=%v err=%v", ok, err)
	}
}
