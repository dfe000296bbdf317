package broker

// Finalized features (KIP-584): the level each supported feature is
// finalized at, and the epoch ApiVersions reports with them. They are
// stored in the entity config store under "features" (configstore's file
// on one broker, etcd's features/ keys in a cluster, applied on every
// broker from the watch): entity = feature name, keys "level" and
// "epoch". A feature never stored is at its configured default
// (--transaction-version for transaction.version), epoch 0. Each change
// through UpdateFeatures raises the epoch by one.

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/coord"
	"kaas/model/txnstate"
	"kaas/state/features"
)

// finalized is one published set of finalized features.
type finalized struct {
	levels map[string]int16
	epoch  int64
}

// featureTable is the broker's finalized features.
type featureTable struct {
	store entityStore
	mu    sync.Mutex // serialises updates and the applying of cluster views
	cur   atomic.Pointer[finalized]
}

// openFeatures loads the stored finalized features.
func (b *Broker) openFeatures() error {
	store, err := b.openEntityStore(coord.Features)
	if err != nil {
		return err
	}
	b.features.store = store
	return b.reloadFeatures()
}

func (b *Broker) reloadFeatures() error {
	stored, _, err := b.features.store.Load()
	if err != nil {
		return err
	}
	b.setFeatures(stored)
	return nil
}

// setFeatures publishes the stored features over the defaults.
func (b *Broker) setFeatures(stored map[string]map[string]string) {
	f := &finalized{levels: map[string]int16{}}
	for _, s := range features.Supported {
		f.levels[s.Name] = b.featureDefault(s)
		vals, ok := stored[s.Name]
		if !ok {
			continue
		}
		if l, err := strconv.ParseInt(vals["level"], 10, 16); err == nil {
			f.levels[s.Name] = int16(l)
		} else {
			b.log.Warn("ignoring a stored feature level that does not parse", "feature", s.Name, "level", vals["level"])
		}
	}
	f.epoch = storedEpoch(stored)
	b.features.cur.Store(f)
}

func (b *Broker) featureDefault(s features.Feature) int16 {
	if s.Name == features.TransactionVersion && b.cfg.TransactionVersion >= 0 {
		return b.cfg.TransactionVersion
	}
	return s.Default
}

// applyFeaturesView re-applies the cluster's features after a change in
// etcd (any broker may have updated them).
func (b *Broker) applyFeaturesView(v *coord.View) {
	b.features.mu.Lock()
	defer b.features.mu.Unlock()
	b.setFeatures(v.Entities[coord.Features])
}

// finalizedFeatures is what ApiVersions reports now.
func (b *Broker) finalizedFeatures() *finalized {
	if f := b.features.cur.Load(); f != nil {
		return f
	}
	return &finalized{levels: map[string]int16{features.TransactionVersion: features.Supported[0].Default}}
}

// errFeaturesMoved: the stored features changed after the update was
// checked against them (another broker's UpdateFeatures in a cluster).
var errFeaturesMoved = errors.New("the finalized features changed after the update was checked")

// storeFeatures persists levels (feature → level) at the next epoch and
// publishes them — if the stored features are still at checked, the
// epoch the update was checked against, and nothing changes them before
// the write (the store's compare): of two brokers updating at once, one
// applies and the other checks again against the first's change, so each
// change gets its own epoch and none is checked against levels that were
// already gone.
func (b *Broker) storeFeatures(levels map[string]int16, checked int64) error {
	b.features.mu.Lock()
	defer b.features.mu.Unlock()
	stored, rev, err := b.features.store.Load()
	if err != nil {
		return err
	}
	if storedEpoch(stored) != checked {
		b.setFeatures(stored)
		return errFeaturesMoved
	}
	epoch := strconv.FormatInt(checked+1, 10)
	set := make(map[string]map[string]string, len(levels))
	for name, l := range levels {
		set[name] = map[string]string{"level": strconv.Itoa(int(l)), "epoch": epoch}
	}
	applied, err := b.features.store.ApplyIfUnchanged(set, rev)
	if err != nil {
		return err
	}
	if err := b.reloadFeatures(); err != nil {
		return err
	}
	if !applied {
		return errFeaturesMoved
	}
	return nil
}

// storedEpoch is the finalized features epoch of what the store holds:
// the highest epoch stamped on a feature, 0 for none.
func storedEpoch(stored map[string]map[string]string) int64 {
	var epoch int64
	for _, vals := range stored {
		if e, err := strconv.ParseInt(vals["epoch"], 10, 64); err == nil {
			epoch = max(epoch, e)
		}
	}
	return epoch
}

// openTV2Transactions counts the transactions of transaction version 2
// this broker coordinates that are not finished (Ongoing or Prepare*).
func (b *Broker) openTV2Transactions() int {
	n := 0
	for _, e := range b.txnEntries() {
		if e.TV >= 2 && (e.State == txnstate.Ongoing || e.State.IsPrepare()) {
			n++
		}
	}
	return n
}

// addFeatures fills ApiVersions' feature fields (v3+): every supported
// feature, and the finalized ones above level 0 (a level-0 feature is not
// finalized, as Apache lists them) with their epoch. v3 omits supported
// features whose minimum is 0: v3 clients take a 0 minimum for a
// malformed range (KAFKA-17011; v4 allows it).
func (b *Broker) addFeatures(resp *kmsg.ApiVersionsResponse, version int16) {
	for _, s := range features.Supported {
		if version < 4 && s.Min == 0 {
			continue
		}
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = s.Name, s.Min, s.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	f := b.finalizedFeatures()
	resp.FinalizedFeaturesEpoch = f.epoch
	for _, s := range features.Supported {
		if l := f.levels[s.Name]; l > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MaxVersionLevel, ff.MinVersionLevel = s.Name, l, l
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
}
