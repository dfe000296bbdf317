package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ActorKindStats aggregates the actors of one kind (partition,
// transactional.id, group, ...) from their mailbox counters.
type ActorKindStats struct {
	Actors   int
	Depth    int64 // messages waiting, summed over the kind
	MaxDepth int64 // the deepest single mailbox of the kind
	// Processed counts messages taken from mailboxes, including those of
	// actors of the kind that have stopped, so it never goes down.
	Processed int64
}

type actorCollector struct {
	src                                  atomic.Pointer[func() map[string]ActorKindStats]
	wakeupsSrc                           atomic.Pointer[func() (wakeups, started int64)]
	actors, depth, maxDepth, processedTo *prometheus.Desc
	wakeups, started                     *prometheus.Desc
}

func newActorCollector() *actorCollector {
	k := []string{"kind"}
	return &actorCollector{
		actors:      prometheus.NewDesc("kaas_actors", "Live actors, by kind.", k, nil),
		depth:       prometheus.NewDesc("kaas_actor_mailbox_depth", "Messages waiting in mailboxes, summed by actor kind.", k, nil),
		maxDepth:    prometheus.NewDesc("kaas_actor_mailbox_depth_max", "Deepest single mailbox, by actor kind.", k, nil),
		processedTo: prometheus.NewDesc("kaas_actor_messages_processed_total", "Messages actors took from their mailboxes, by actor kind.", k, nil),
		wakeups:     prometheus.NewDesc("kaas_actor_wakeups_total", "Mailboxes woken onto a worker goroutine (each a hand-off between goroutines).", nil, nil),
		started:     prometheus.NewDesc("kaas_actor_workers_started_total", "Mailbox wake-ups that started a new worker goroutine (no idle one).", nil, nil),
	}
}

func (c *actorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.actors
	ch <- c.depth
	ch <- c.maxDepth
	ch <- c.processedTo
	ch <- c.wakeups
	ch <- c.started
}

func (c *actorCollector) Collect(ch chan<- prometheus.Metric) {
	if w := c.wakeupsSrc.Load(); w != nil {
		n, s := (*w)()
		ch <- prometheus.MustNewConstMetric(c.wakeups, prometheus.CounterValue, float64(n))
		ch <- prometheus.MustNewConstMetric(c.started, prometheus.CounterValue, float64(s))
	}
	src := c.src.Load()
	if src == nil {
		return
	}
	for kind, s := range (*src)() {
		ch <- prometheus.MustNewConstMetric(c.actors, prometheus.GaugeValue, float64(s.Actors), kind)
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(s.Depth), kind)
		ch <- prometheus.MustNewConstMetric(c.maxDepth, prometheus.GaugeValue, float64(s.MaxDepth), kind)
		ch <- prometheus.MustNewConstMetric(c.processedTo, prometheus.CounterValue, float64(s.Processed), kind)
	}
}

// WatchActors makes scrapes report the per-kind actor statistics src
// returns (called once per scrape).
func (m *Metrics) WatchActors(src func() map[string]ActorKindStats) { m.actors.src.Store(&src) }

// WatchActorWakeups makes scrapes report the actor system's mailbox
// wake-ups and the workers they started (src: its Wakeups).
func (m *Metrics) WatchActorWakeups(src func() (wakeups, started int64)) {
	m.actors.wakeupsSrc.Store(&src)
}
