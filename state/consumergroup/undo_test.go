package consumergroup

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
)

// TestFailedDeleteRestoresGroup: a DeleteGroups or OffsetDelete whose
// tombstones fail is answered the writer's code (mapped) and leaves the
// group and its offsets as they were; a commit made since is kept, and a
// group unloaded meanwhile stays Dead.
func TestFailedDeleteRestoresGroup(t *testing.T) {
	tpA, tpB := model.TopicPartition{Topic: "a"}, model.TopicPartition{Topic: "b"}
	setup := func(t *testing.T) (*Group, *fakeEnv) {
		g, env := newGroup(t, testConfig())
		g.CommitOffsets(CommitRequest{Generation: -1, Offsets: map[model.TopicPartition]Offset{tpA: {Offset: 1, ExpireTimestamp: -1}, tpB: {Offset: 2, ExpireTimestamp: -1}}}, func(map[model.TopicPartition]int16) {})
		env.flush()
		return g, env
	}
	offsets := func(g *Group) map[model.TopicPartition]int64 {
		out := map[model.TopicPartition]int64{}
		for _, f := range g.FetchOffsets(nil, false) {
			out[f.TP] = f.Offset
		}
		return out
	}
	notCoordinator := kerr.NotCoordinator.Code

	t.Run("each delete fails alone", func(t *testing.T) {
		g, env := setup(t)
		env.failWith = kerr.KafkaStorageError.Code
		var code int16 = -2
		g.Delete(func(c int16) { code = c })
		env.flush()
		if code != notCoordinator || g.State() != Empty {
			t.Fatalf("failed delete: code %d, state %s", code, g.State())
		}
		var codes map[model.TopicPartition]int16
		g.DeleteOffsets([]model.TopicPartition{tpA}, func(c int16, cs map[model.TopicPartition]int16) { code, codes = c, cs })
		env.flush()
		if code != notCoordinator || codes != nil {
			t.Fatalf("failed offset delete: %d %v", code, codes)
		}
		if got := offsets(g); got[tpA] != 1 || got[tpB] != 2 {
			t.Fatalf("offsets after the failed deletes: %v", got)
		}
		env.failWith = 0
		g.Delete(func(c int16) { code = c })
		env.flush()
		if code != 0 || g.State() != Dead {
			t.Fatalf("delete once the log works: code %d, state %s", code, g.State())
		}
	})

	t.Run("two deletes fail together", func(t *testing.T) {
		g, env := setup(t)
		var c1, c2 int16 = -2, -2
		g.DeleteOffsets([]model.TopicPartition{tpA}, func(c int16, _ map[model.TopicPartition]int16) { c1 = c })
		g.Delete(func(c int16) { c2 = c })
		env.failWith = kerr.KafkaStorageError.Code
		env.flush()
		if c1 != notCoordinator || c2 != notCoordinator || g.State() != Empty {
			t.Fatalf("codes %d %d, state %s", c1, c2, g.State())
		}
		if got := offsets(g); got[tpA] != 1 || got[tpB] != 2 {
			t.Fatalf("offsets: %v", got)
		}
	})

	t.Run("a commit since is kept", func(t *testing.T) {
		g, env := setup(t)
		g.DeleteOffsets([]model.TopicPartition{tpA}, func(int16, map[model.TopicPartition]int16) {})
		g.CommitOffsets(CommitRequest{Generation: -1, Offsets: map[model.TopicPartition]Offset{tpA: {Offset: 9, ExpireTimestamp: -1}}}, func(map[model.TopicPartition]int16) {})
		del, commit := env.queued[0], env.queued[1]
		env.queued = nil
		commit.done(0, 100)
		del.done(notCoordinator, 0)
		if got := offsets(g); got[tpA] != 9 {
			t.Fatalf("offset of a: %d, want the later commit's 9", got[tpA])
		}
	})

	t.Run("unloaded meanwhile", func(t *testing.T) {
		g, env := setup(t)
		g.Delete(func(int16) {})
		g.Unload()
		env.failWith = notCoordinator
		env.flush()
		if g.State() != Dead {
			t.Fatalf("state %s, want Dead (unloaded)", g.State())
		}
	})
}
