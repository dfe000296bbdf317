package lease

import (
	"testing"
	"time"
)

func TestDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type renewal struct {
		sentMs int
		ttl    time.Duration
	}
	cases := []struct {
		name      string
		margin    time.Duration
		renewals  []renewal
		lost      bool
		nowMs     int
		alive     bool
		untilMs   int // -1: zero
		remaining time.Duration
	}{
		{"never renewed", time.Second, nil, false, 0, false, -1, 0},
		{"from the send time, minus the margin", time.Second, []renewal{{0, 6 * time.Second}}, false, 4999, true, 5000, time.Millisecond},
		{"strictly before the deadline", time.Second, []renewal{{0, 6 * time.Second}}, false, 5000, false, 5000, 0},
		{"a later keep-alive extends it", time.Second, []renewal{{0, 6 * time.Second}, {2000, 6 * time.Second}}, false, 6500, true, 7000, 500 * time.Millisecond},
		{"a late answer to an older send does not pull it back", time.Second, []renewal{{2000, 6 * time.Second}, {0, 6 * time.Second}}, false, 6500, true, 7000, 500 * time.Millisecond},
		{"an expired lease (TTL ≤ 0) renews nothing", time.Second, []renewal{{0, 2 * time.Second}, {1500, -1}}, false, 1200, false, 1000, -200 * time.Millisecond},
		{"lost forgets it", time.Second, []renewal{{0, 6 * time.Second}}, true, 10, false, -1, 0},
		{"short test TTL", DefaultMargin(2 * time.Second), []renewal{{0, 2 * time.Second}}, false, 1665, true, 1666, time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := New(c.margin)
			for _, r := range c.renewals {
				d.Renewed(at(r.sentMs), r.ttl)
			}
			if c.lost {
				d.Lost()
			}
			if got := d.Alive(at(c.nowMs)); got != c.alive {
				t.Errorf("Alive = %v, want %v", got, c.alive)
			}
			if c.untilMs < 0 {
				if !d.Until().IsZero() {
					t.Errorf("Until = %v, want zero", d.Until())
				}
			} else if want := at(c.untilMs); !d.Until().Truncate(time.Millisecond).Equal(want) {
				t.Errorf("Until = %v, want %v", d.Until(), want)
			}
			if got := d.Remaining(at(c.nowMs)).Truncate(time.Millisecond); got != c.remaining {
				t.Errorf("Remaining = %v, want %v", got, c.remaining)
			}
		})
	}
}

func TestDefaultMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{6 * time.Second, time.Second},
		{2 * time.Second, 333333333},
		{300 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := DefaultMargin(c.ttl); got != c.want {
			t.Errorf("DefaultMargin(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}
