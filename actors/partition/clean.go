package partition

import (
	"errors"
	"fmt"
	"time"

	"kaas/state/producers"
	"kaas/storage/partlog"
)

// The partition's side of the log cleaner (cleanup.policy=compact): the
// pool (actors/cleaner) asks every backoff whether a pass is due
// (cleanCheck); the actor plans one (a copy of what it reads), the pool
// runs it off the actor, and the result comes back here (cleanDone) to
// be swapped in — on the actor, the only writer of the segment set, and
// only while this broker's lease holds (cluster mode): a deposed owner's
// pass stops writing as soon as the gate closes, and its result is
// never installed.

// Cleaner is the broker's cleaner pool as a partition uses it.
type Cleaner interface {
	Register(name string, poke func())
	Unregister(name string)
	Submit(ratio float64, run func(partlog.CleanOptions))
	Done(st partlog.CleanStats, err error)
	MarkUncleanable()
}

// cleanCheck asks whether a pass is due.
type cleanCheck struct{}

// cleanDone is a finished pass.
type cleanDone struct {
	plan *partlog.CleanPlan
	res  *partlog.CleanResult
	err  error
}

// cleanerStatus is the partition's cleaner as the inspector shows it.
type cleanerStatus struct {
	running  bool
	offline  error // a failed pass: this partition is not cleaned until a restart
	lastPass time.Time
	passes   int
	seq      int
}

// stopCleaner ends the partition's part in cleaning: no more checks, and
// a pass still running stops writing (its files are the next recovery's).
func (p *Partition) stopCleaner() {
	p.stopCleaning.Store(true)
	if p.cfg.Cleaner != nil {
		p.cfg.Cleaner.Unregister(actorName(p.cfg.Topic, p.cfg.Partition))
	}
}

// registerCleaner keeps the pool's checks in step with cleanup.policy.
func (p *Partition) registerCleaner() {
	if p.cfg.Cleaner == nil {
		return
	}
	name := actorName(p.cfg.Topic, p.cfg.Partition)
	if p.cfg.Log.Compact && !p.retired && !p.abandoned {
		h := p.handle
		p.cfg.Cleaner.Register(name, func() { h.Periodic(cleanCheck{}) })
	} else {
		p.cfg.Cleaner.Unregister(name)
	}
}

// status is the partition's cleaner state, made for compacted partitions
// only (the others never carry it).
func (p *Partition) status() *cleanerStatus {
	if p.cleaner == nil {
		p.cleaner = &cleanerStatus{}
	}
	return p.cleaner
}

func (p *Partition) cleanCheck(now time.Time) {
	c := p.status()
	if c.running || c.offline != nil || !p.cfg.Log.Compact || p.cfg.Cleaner == nil || p.log.Failed() != nil || !p.open() {
		return
	}
	last := make(map[int64]partlog.ProducerLast)
	p.producers.Each(func(pid int64, e *producers.Entry) {
		off := int64(-1)
		if n := len(e.Window); n > 0 {
			off = e.Window[n-1].LastOffset
		}
		last[pid] = partlog.ProducerLast{LastDataOffset: off, Epoch: e.Epoch}
	})
	c.seq++
	plan := p.log.PlanClean(now, p.lastStableOffset(), last, fmt.Sprintf("e%d-%d", p.cfg.LeaderEpoch, c.seq))
	if plan == nil {
		return
	}
	c.running = true
	self, sys, stop := p.self, p.sys, &p.stopCleaning
	gate := p.cfg.Gate
	mayAct := func() bool { return !stop.Load() && (gate == nil || gate()) }
	p.cfg.Cleaner.Submit(plan.DirtyRatio, func(opts partlog.CleanOptions) {
		opts.MayAct = mayAct
		res, err := plan.Run(opts)
		sys.Send(self, &cleanDone{plan: plan, res: res, err: err})
	})
}

func (p *Partition) cleanDone(m *cleanDone) {
	p.awaitSync() // the install replaces segment files the fsync may hold
	c := p.status()
	c.running = false
	switch {
	case errors.Is(m.err, partlog.ErrCleanStale):
		p.logger().Info("cleaning stopped: the partition's lease is in doubt")
		return
	case m.err != nil && p.log.Superseded(m.plan):
		// Retention or DeleteRecords removed a segment the pass was
		// reading: the next check plans again.
		p.logger().Info("cleaning pass given up: its segments changed meanwhile", "err", m.err)
		return
	case m.err != nil:
		// Only this partition's cleaner goes offline: the data is as it
		// was (the pass wrote new files only, and removed them).
		c.offline = m.err
		p.cfg.Cleaner.Done(m.res.Stats, m.err)
		p.cfg.Cleaner.MarkUncleanable()
		p.cfg.Env.Failed("log cleaner", m.err, "partition", actorName(p.cfg.Topic, p.cfg.Partition))
		return
	}
	if !p.open() || p.log.Failed() != nil {
		return // the next owner's recovery removes the files
	}
	installed, err := p.log.InstallCleaned(m.res, p.open)
	if err != nil {
		if p.log.Failed() != nil {
			p.fail(err)
		}
		p.logger().Warn("installing cleaned segments", "err", err)
		return
	}
	c.lastPass, c.passes = time.Now(), c.passes+1
	p.cfg.Cleaner.Done(m.res.Stats, nil)
	p.logger().Info("cleaned", "groups", installed, "cleaned_to", m.res.EndOffset, "bytes_read", m.res.Stats.BytesRead,
		"bytes_written", m.res.Stats.BytesWritten, "records_removed", m.res.Stats.RecordsRemoved)
	// No flush of its own: the install only renamed and removed files
	// (the pass fsynced them and the manifest), and the directory's fsync
	// rides on the next group commit, off the actor. An fsync here held
	// appends.
	p.publish()
	if m.res.EndOffset < m.res.Uncleanable {
		// The map filled: the rest in another pass, now.
		p.sys.Send(p.self, cleanCheck{})
	}
}

// CleanerSummary is the cleaner's state in the inspector.
type CleanerSummary struct {
	CleanedTo  int64   `json:"cleaned_to"`
	DirtyRatio float64 `json:"dirty_ratio"`
	// TombstonesUntil is the earliest delete horizon of a tombstone or
	// marker kept (ms since the epoch), 0 for none.
	TombstonesUntil int64  `json:"tombstones_pending_until,omitempty"`
	Running         bool   `json:"running"`
	Passes          int    `json:"passes"`
	LastPass        string `json:"last_pass,omitempty"`
	Offline         string `json:"offline,omitempty"`
}

func (p *Partition) cleanerSummary() *CleanerSummary {
	if !p.cfg.Log.Compact {
		return nil
	}
	st, c := p.log.CleanerState(), p.status()
	s := &CleanerSummary{CleanedTo: st.CleanedTo, DirtyRatio: st.DirtyRatio, TombstonesUntil: st.NextHorizon,
		Running: c.running, Passes: c.passes}
	if !c.lastPass.IsZero() {
		s.LastPass = c.lastPass.UTC().Format(time.RFC3339)
	}
	if c.offline != nil {
		s.Offline = c.offline.Error()
	}
	return s
}
