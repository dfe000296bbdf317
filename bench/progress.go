package bench

import (
	"fmt"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress draws a bar over one side's measured duration on stderr, with
// the live rate in its description.
type progress struct {
	stop chan struct{}
	done chan struct{}
}

func startProgress(o *Options, label string, e *Env) *progress {
	p := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	if !o.Progress {
		close(p.done)
		return p
	}
	total := o.Duration.Milliseconds()
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetDescription(label+" (setting up)"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(false),
	)
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				_ = bar.Finish()
				_ = bar.Clear()
				return
			case <-t.C:
				if !e.started {
					continue
				}
				records, ops, elapsed := e.Rec.live()
				rate := fmt.Sprintf("%s ops/s", si(float64(ops)/elapsed.Seconds()))
				if records > 0 {
					rate = fmt.Sprintf("%s records/s", si(float64(records)/elapsed.Seconds()))
				}
				bar.Describe(label + " " + rate)
				_ = bar.Set64(min(elapsed.Milliseconds(), total))
			}
		}
	}()
	return p
}

func (p *progress) finish() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.stop)
	<-p.done
}

// si formats a rate with a k/M suffix.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
