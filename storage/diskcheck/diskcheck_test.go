package diskcheck

import (
	"strings"
	"testing"
)

func TestBlockingIsRecordedOnlyOnAMarkedGoroutine(t *testing.T) {
	Enable()
	Blocking("fsync", "before marking")
	done := OnLoop()
	other := make(chan struct{})
	go func() { Blocking("fsync", "another goroutine"); close(other) }()
	<-other
	Blocking("fsync", "a file")
	done()
	Blocking("fsync", "after")
	v := Violations()
	if len(v) != 1 || !strings.Contains(v[0], "fsync a file") || !strings.Contains(v[0], "TestBlockingIsRecorded") {
		t.Fatalf("violations %q, want the one on the marked goroutine with its stack", v)
	}
}
