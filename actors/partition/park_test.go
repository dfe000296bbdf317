package partition

import (
	"bytes"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog/batchtest"
)

// An idle partition is parked: listed for the inspector, no actor. Ticks
// and checkpoints leave an empty one parked, a config change is applied
// in place, and the first produce starts the actor, which then serves it
// and the reads as if it had always run.
func TestIdlePartitionIsParkedUntilItsFirstWrite(t *testing.T) {
	f := open(t, t.TempDir())
	info, ok := f.sys.Lookup("partition/t-0")
	if !f.h.Parked() || !ok || info.PID != nil || len(f.sys.Actors()) != 1 {
		t.Fatalf("after Open: parked %v, listed %v as %+v, %d actors", f.h.Parked(), ok, info, len(f.sys.Actors()))
	}
	f.h.Periodic(messages.Tick{})
	f.h.Periodic(messages.Checkpoint{})
	big := batchtest.Plain(1, string(bytes.Repeat([]byte("x"), 200)))
	f.h.Send(&messages.UpdateConfig{Log: testLogConfig(), MaxMessageBytes: int32(len(big) - 1)})
	if !f.h.Parked() {
		t.Fatal("a tick, a checkpoint or a config change started an empty partition")
	}

	if r := wait(t, f.produce(big, -1)); r.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("batch over the max.message.bytes set while parked: %+v", r)
	}
	if f.h.Parked() {
		t.Fatal("still parked after a produce")
	}
	if r := wait(t, f.produce(batchtest.Plain(1, "v"), -1)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("produce: %+v", r)
	}
	v := f.h.View()
	data, err := v.Read(0, 1<<20, v.HighWatermark)
	if err != nil || v.HighWatermark != 1 || !bytes.Contains(data, []byte("v")) {
		t.Fatalf("read back: hw %d, %d bytes, %v", v.HighWatermark, len(data), err)
	}
	info, _ = f.sys.Lookup("partition/t-0")
	if info.PID == nil || info.Mailbox.Processed() < 2 || len(f.sys.Actors()) != 1 {
		t.Fatalf("after the produce: listed as %+v, %d actors", info, len(f.sys.Actors()))
	}
	if s, ok := info.State(info.PID).(Summary); !ok || s.HighWatermark != 1 {
		t.Fatalf("inspector state %+v", info.State(info.PID))
	}
}

// A partition with records is parked too after a restart; its periodic
// work starts it (retention may have something to delete).
func TestParkedPartitionWithRecordsWakesForItsTick(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir)
	wait(t, f.produce(batchtest.Plain(1, "v"), -1))
	f.stop()
	g := open(t, dir)
	if !g.h.Parked() || g.h.View().HighWatermark != 1 {
		t.Fatalf("reopened: parked %v, hw %d", g.h.Parked(), g.h.View().HighWatermark)
	}
	g.h.Periodic(messages.Tick{})
	if g.h.Parked() {
		t.Fatal("a tick left a partition with records parked")
	}
}

// Stopping a partition that never ran closes its log where it is (a
// clean shutdown: the reopened log needs no recovery scan), removes it
// if asked, and unregisters it; a parked partition retired is closed the
// same way and refuses what comes after.
func TestStopAndRetireParked(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir)
	if err := f.h.Stop(false); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.sys.Lookup("partition/t-0"); ok {
		t.Fatal("still listed after Stop")
	}
	if _, err := os.Stat(dir + "/.clean-shutdown"); err != nil {
		t.Fatalf("no clean-shutdown marker after stopping a parked partition: %v", err)
	}
	f.sys.Shutdown()
	f.h = nil

	g := open(t, dir)
	g.h.Retire()
	if _, ok := g.sys.Lookup("partition/t-0"); ok {
		t.Fatal("still listed after Retire")
	}
	if r := wait(t, g.produce(batchtest.Plain(1, "v"), -1)); r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a retired parked partition: %+v", r)
	}
	g.sys.Shutdown()
	g.h = nil

	h := open(t, dir)
	if err := h.h.Stop(true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory after Stop(remove): %v", err)
	}
	h.sys.Shutdown()
	h.h = nil
}
