package share

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/model"
	"kaas/state/sharegroup"
	"kaas/storage/durable"
	"kaas/storage/sharestate"
	"kaas/storage/slotlog"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

type noTopics struct{}

func (noTopics) ByName(string) (sharegroup.TopicID, int32, bool) {
	return sharegroup.TopicID{}, 0, false
}

// TestWriteDurableAfterLeaseDoubtIsNotAnswered: a cluster broker's
// share state write that became durable only once its partition's lease
// had fallen in doubt must not be answered as done — a peer may have
// taken the partition over and sealed the share log before the write got
// there. The lease falls in doubt during the fsync of the log (the
// filesystem's injector closes the gate as the fsync starts), the way a
// paused broker's does. The same holds for acknowledgements answered
// after their fsync (awaitSync), through the same failInDoubt.
func TestWriteDurableAfterLeaseDoubtIsNotAnswered(t *testing.T) {
	fsys := errorfs.Wrap(memfs.New())
	env := durable.Env{FS: fsys, DataDir: "/data", Logger: slog.New(slog.DiscardHandler)}
	var doubt atomic.Bool
	gate := func() bool { return !doubt.Load() }
	store, loaded, err := sharestate.OpenPartition(env, "/data/t-0", slotlog.Owner{Gen: 1, MayAct: gate})
	if err != nil {
		t.Fatal(err)
	}
	sys := system.New(slog.New(slog.DiscardHandler))
	h, err := Spawn(sys, Config{Groups: sharegroup.Defaults(), Topics: noTopics{}, Logger: slog.New(slog.DiscardHandler),
		Resolve: func(model.TopicIDPartition) (Partition, int16) { return Partition{}, kerr.NotLeaderForPartition.Code }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Shutdown(); _ = store.Close() })
	tp := model.TopicIDPartition{Topic: [16]byte{1}, Partition: 0}
	h.OpenPartition(tp, store, loaded, nil, gate)

	alter := func() map[model.TopicIDPartition]int16 {
		got := make(chan map[model.TopicIDPartition]int16, 1)
		h.Send(&messages.ShareAlterOffsets{Group: "g", Offsets: map[model.TopicIDPartition]int64{tp: 5},
			Reply: func(code int16, codes map[model.TopicIDPartition]int16) {
				if code != 0 {
					t.Errorf("AlterShareGroupOffsets: group code %d", code)
				}
				got <- codes
			}})
		return <-got
	}
	if codes := alter(); codes[tp] != 0 {
		t.Fatalf("with the lease alive: code %d, want 0", codes[tp])
	}
	var fired atomic.Bool
	fsys.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Sync && strings.HasPrefix(op.Path, "/data/t-0/") {
			doubt.Store(true) // the lease falls in doubt while the fsync runs
			fired.Store(true)
		}
		return nil
	})
	if codes := alter(); codes[tp] != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a write fsynced once the lease was in doubt: code %d, want NOT_LEADER_OR_FOLLOWER (not done)", codes[tp])
	}
	if !fired.Load() {
		t.Fatal("no fsync of the partition's share log ran")
	}
}
