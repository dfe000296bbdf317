package fence

import (
	"sort"
	"strconv"
	"time"

	"kaas/storage/fencelog"
)

// Summary is the broadcaster's state for the inspector, published after
// every message so reading it never asks the actor anything.
type Summary struct {
	OwnFile    string `json:"own_file"`
	OwnEntries int    `json:"own_entries"`
	Floors     int    `json:"fenced_producers"`
	// FloorMap is every fenced producer id and the lowest epoch it may
	// still use on this broker (R-FEN-7). Only State fills it in, when
	// asked: building it on every bump would cost each bump time in
	// proportion to every producer fenced (issue 9 row 18).
	FloorMap  map[string]int16 `json:"floors,omitempty"`
	RecentOut []Bump           `json:"recent_bumps_out"`
	RecentIn  []Bump           `json:"recent_bumps_in"`
	PeerFiles []PeerFile       `json:"peer_files"`
	// PollLagMs is how old the newest peer fence file was when it was
	// last applied (kaas_fence_poll_lag_seconds).
	PollLagMs   float64   `json:"poll_lag_ms"`
	LastUpdated time.Time `json:"last_updated"`
}

// State is the Summary with the floor map, for the actor inspector.
func (h *Handle) State() Summary {
	s := h.Summary()
	floors := h.floors.Snapshot()
	s.FloorMap = make(map[string]int16, len(floors))
	for pid, e := range floors {
		s.FloorMap[strconv.FormatInt(pid, 10)] = e
	}
	return s
}

// Bump is one fence seen by the broadcaster.
type Bump struct {
	ProducerID int64     `json:"producer_id"`
	Epoch      int16     `json:"epoch"`
	At         time.Time `json:"at"`
	From       string    `json:"from,omitempty"`
}

// PeerFile is a peer's fence file as last read.
type PeerFile struct {
	Path     string    `json:"path"`
	Entries  int       `json:"entries"`
	Modified time.Time `json:"modified"`
	// LastApplied is when a fence from this file last raised a floor
	// here (absent: none of its fences was new to this broker), and LagMs
	// how old the file was then.
	LastApplied time.Time `json:"last_applied,omitzero"`
	LagMs       float64   `json:"lag_ms"`
}

const keepRecent = 20

type recentBumps struct{ outs, ins []Bump }

func (r *recentBumps) out(pid int64, epoch int16, at time.Time) {
	r.outs = appendRecent(r.outs, Bump{ProducerID: pid, Epoch: epoch, At: at})
}

func (r *recentBumps) in(pid int64, epoch int16, from string) {
	r.ins = appendRecent(r.ins, Bump{ProducerID: pid, Epoch: epoch, At: time.Now(), From: from})
}

func appendRecent(list []Bump, b Bump) []Bump {
	list = append(list, b)
	if len(list) > keepRecent {
		list = append(list[:0:0], list[len(list)-keepRecent:]...)
	}
	return list
}

func (b *broadcaster) publish() {
	// Lists are never null: an inspector shows an empty list as empty.
	s := &Summary{
		OwnFile: fencelog.FileName(b.cfg.BrokerID), OwnEntries: len(b.own),
		RecentOut: append([]Bump{}, b.recent.outs...), RecentIn: append([]Bump{}, b.recent.ins...),
		PeerFiles: []PeerFile{}, PollLagMs: ms(b.lag), LastUpdated: time.Now(),
	}
	s.Floors = b.cfg.Floors.Len()
	for _, p := range b.peers {
		s.PeerFiles = append(s.PeerFiles, p)
	}
	sort.Slice(s.PeerFiles, func(i, j int) bool { return s.PeerFiles[i].Path < s.PeerFiles[j].Path })
	b.summary.Store(s)
}
