package system

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestAwait(t *testing.T) {
	t.Run("the reply", func(t *testing.T) {
		reply := make(chan int, 1)
		reply <- 7
		if v, err := Await(context.Background(), reply); v != 7 || err != nil {
			t.Fatalf("Await = %d, %v", v, err)
		}
	})
	t.Run("the context ends first", func(t *testing.T) {
		ctx, cancel := Within(time.Millisecond)
		defer cancel()
		v, err := Await(ctx, make(chan int))
		if v != 0 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await = %d, %v; want 0, deadline exceeded", v, err)
		}
	})
	t.Run("a reply that is ready wins over an ended context", func(t *testing.T) {
		// Not guaranteed by select in general; here the context is
		// cancelled only after the reply is read.
		reply := make(chan string, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { reply <- "ok" }()
		v, err := Await(ctx, reply)
		cancel()
		if v != "ok" || err != nil {
			t.Fatalf("Await = %q, %v", v, err)
		}
	})
}

func TestBusy(t *testing.T) {
	if got := Busy("answer", 250*time.Millisecond)["status"]; got != "busy: no answer within 250ms" {
		t.Fatalf("Busy = %q", got)
	}
}
