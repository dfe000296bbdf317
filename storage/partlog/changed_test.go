package partlog

import (
	stdsync "sync"
	"testing"
)

// A view's Changed channel is made on demand: one taken before the next
// publish is closed by it, one taken after is closed already, and the
// current view's stays open; waiters racing with the publish all wake.
func TestViewChangedMadeOnDemand(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	v := l.View()
	early := v.Changed()
	if v.Changed() != early {
		t.Fatal("two calls on one view gave two channels")
	}
	var wg stdsync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-v.Changed()
		}()
	}
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a"))
	wg.Wait()
	for name, ch := range map[string]<-chan struct{}{"taken before": early, "taken after": v.Changed()} {
		select {
		case <-ch:
		default:
			t.Fatalf("Changed %s the publish is open", name)
		}
	}
	select {
	case <-l.View().Changed():
		t.Fatal("the current view's Changed is closed")
	default:
	}
}
